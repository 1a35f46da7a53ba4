"""Merging executor stats (pure): counters add up, latencies average weighted by their counts."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

# latency key -> the counter it is an average over
LATENCY_WEIGHTS = {"execute_latency_ms": "executed", "complete_latency_ms": "acked"}


def merge_stats(stats: Iterable[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    weighted: dict[str, list[float]] = {}
    for s in stats:
        for k, v in s.items():
            weight_key = LATENCY_WEIGHTS.get(k)
            if weight_key is None:
                out[k] = out.get(k, 0) + v
            else:
                w = s.get(weight_key, 0) or 0
                acc = weighted.setdefault(k, [0.0, 0.0])
                acc[0] += v * w
                acc[1] += w
    for k, (total, w) in weighted.items():
        out[k] = total / w if w else 0.0
    return out


# ---------------------------------------------------------------- per-window figures (Storm's)
# A window's counters (executor/stats_windows.py) as Storm's UI figures, for one executor or
# merged over several. Counter names: "metric|key", key a stream (spouts' and everyone's output)
# or "component:stream" (a bolt's input).

EMITTED, TRANSFERRED, ACKED, FAILED, EXECUTED = "emitted", "transferred", "acked", "failed", "executed"
COMPLETE_MS, COMPLETE_N = "complete_ms_sum", "complete_count"
EXECUTE_MS, EXECUTE_N = "execute_ms_sum", "execute_count"


def split_counter(name: str) -> tuple[str, str]:
    metric, _, key = name.partition("|")
    return metric, key


def add_counters(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Counters of several executors (or windows of one executor's restarts) added key by key."""
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def by_key(counters: Mapping[str, float], metric: str) -> dict[str, float]:
    """{key: value} of one metric."""
    out: dict[str, float] = {}
    for name, v in counters.items():
        m, key = split_counter(name)
        if m == metric:
            out[key] = out.get(key, 0) + v
    return out


def total(counters: Mapping[str, float], metric: str, keys: Callable[[str], bool] | None = None) -> float:
    return sum(v for k, v in by_key(counters, metric).items() if keys is None or keys(k))


def average_ms(counters: Mapping[str, float], sum_metric: str, count_metric: str,
               keys: Callable[[str], bool] | None = None) -> float:
    """A latency's average over the window: its summed milliseconds over its count (0.0 when
    nothing was measured, as Storm shows it)."""
    n = total(counters, count_metric, keys)
    return total(counters, sum_metric, keys) / n if n else 0.0


def capacity(counters: Mapping[str, float], window_secs: float) -> float:
    """Storm's bolt capacity: the fraction of the window the executor spent executing."""
    if window_secs <= 0:
        return 0.0
    return min(1.0, total(counters, EXECUTE_MS) / (window_secs * 1000.0))


def is_system_stream(key: str) -> bool:
    """Streams Storm hides unless sys=1: "__ack_init", "__tick", ... (a bolt's input key is
    component:stream)."""
    stream = key.rpartition(":")[2]
    return stream.startswith("__")
