"""The windowed word count's workload, shared by bench/windowed.py (storm-py) and
bench/windowed_bytewax.py (Bytewax, run in its own virtualenv): no framework imports.

Sentences are the peer benchmarks' (a 1,000-word vocabulary from seed 1234; sentence i has 8-12
words from one random.Random(42) stream). Sentence i happens at event time
BASE_MS + i * STEP_MS + 0.5 ms: never on a window boundary, so Storm's windows (start, end] and
Bytewax's [open, close) hold the same sentences. Windows are 10 s long and slide by 1 s (ends
at whole seconds); each one yields (end ms, word, count) for every word in it.
"""

from __future__ import annotations

import random
import string
from collections import Counter

BASE_MS = 1_700_000_000_000
STEP_MS = 1             # event time between sentences: a 10 s window holds 10,000 sentences
LENGTH_MS = 10_000
SLIDE_MS = 1_000


def make_vocab(size: int = 1000, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < size:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def make_sentences(n: int, seed: int = 42) -> list[str]:
    vocab = make_vocab()
    rng = random.Random(seed)
    return [" ".join(rng.choices(vocab, k=rng.randint(8, 12))) for _ in range(n)]


def event_ms(i: int) -> float:
    return BASE_MS + i * STEP_MS + 0.5


def last_complete_end(n: int) -> int:
    """The last window end a watermark at the last sentence's time has passed: both sides are
    compared on the windows ending up to here (Bytewax also flushes the partial ones at EOF)."""
    last = event_ms(n - 1)
    return int(last // SLIDE_MS * SLIDE_MS)


def expected(sentences: list[str]) -> dict[tuple[int, str], int]:
    """(window end ms, word) -> count for every window ending up to last_complete_end."""
    buckets: dict[int, Counter] = {}
    for i, s in enumerate(sentences):
        buckets.setdefault(int((event_ms(i) - BASE_MS) // SLIDE_MS), Counter()).update(s.split())
    per = LENGTH_MS // SLIDE_MS
    out: dict[tuple[int, str], int] = {}
    last = last_complete_end(len(sentences))
    end = BASE_MS + SLIDE_MS
    while end <= last:
        k = (end - BASE_MS) // SLIDE_MS   # the window (end - length, end] covers buckets k-per .. k-1
        total: Counter = Counter()
        for b in range(k - per, k):
            total.update(buckets.get(b, {}))
        for word, c in total.items():
            out[(end, word)] = c
        end += SLIDE_MS
    return out


def check(got: dict[tuple[int, str], int], sentences: list[str]) -> dict:
    """Compare what a run produced (restricted to the complete windows) with the plain computation."""
    want = expected(sentences)
    last = last_complete_end(len(sentences))
    got = {k: v for k, v in got.items() if k[0] <= last}
    wrong = sum(1 for k, v in want.items() if got.get(k) != v)
    extra = sum(1 for k in got if k not in want)
    return {"correct": wrong == 0 and extra == 0, "rows_expected": len(want), "rows_wrong": wrong,
            "rows_extra": extra}
