"""Runs scenarios on whichever per-tuple core this process loads (STORM_PY_PURE=1: the pure twin)
and prints what they produced, for tests/unit/test_unit_core.py to compare the two cores.

One JSON scenario per stdin line, one JSON result per stdout line. Randomness (shuffle order,
edge and root ids) is seeded per scenario, so both cores must produce identical results.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import types

import executor.routing
from executor.acker import AckerLedger
from executor.core import core_status
from executor.core.outbox import Outbox, seed_edges
from executor.routing import StreamOut, _make_grouper
from executor.serialization import decode_batch, pack_batch
from executor.structure import Grouping
from executor.tuple import Fields, Tuple

FIELDS = Fields(["word", "n"])


class _Queue:
    """A destination queue that takes `room` batches, then refuses until drained."""

    def __init__(self, room: int):
        self.room = room
        self.batches: list = []

    def try_publish(self, batch, nbytes=0, producer=None) -> bool:
        if self.room <= 0:
            return False
        self.room -= 1
        self.batches.append(batch)
        return True


def _resolve(src, stream):
    return "comp", FIELDS


def _entries(batch) -> list:
    out = []
    for task, p in batch:
        if type(p) is tuple:
            out.append([task, list(p)])
        else:
            a2i = p.anchors_to_ids
            out.append([task, p.values, p.source_task, p.source_stream,
                        None if a2i is None else sorted([str(k), str(v)] for k, v in a2i.items())])
    return out


def run(sc: dict) -> dict:
    random.seed(sc["seed"])
    seed_edges(sc["seed"])  # the outbox's edge ids (its own generator: C integers when compiled)
    # the groupers' own Randoms (shuffle order from their construction on), seeded in order
    seeds = itertools.count(sc["seed"])
    executor.routing.random = types.SimpleNamespace(Random=lambda: random.Random(next(seeds)))
    targets = list(range(10, 10 + sc["n_targets"]))
    local = set(targets[: sc["n_local"]])
    groupers = [_make_grouper(Grouping(kind, Fields(["word"]) if kind in ("fields", "partial_key") else None),
                              targets, FIELDS, 1, local, None, "comp", "s", None)
                for kind in sc["groupings"]]
    out = StreamOut("comp", "s", FIELDS, False, groupers, frozenset())
    n_slots = 3
    queues = [_Queue(sc["room"]) for _ in range(n_slots)]
    acker_tasks = [90, 91]
    task_slot = {t: t % n_slots for t in targets + acker_tasks}
    ob = Outbox("comp", queues, task_slot, batch_size=sc["batch_size"], max_tuple_bytes=1 << 20,
                acker_tasks=acker_tasks, local_tasks=local | {91}, first_task=1, listener=None,
                report_error=lambda task, exc: None)
    inputs = [Tuple(["in", i], 5, "s", "up", FIELDS, {7 + i % 3: 100 + i}) for i in range(4)]
    chosen = []
    roots = []
    rooted = []
    for op in sc["ops"]:
        kind = op[0]
        if kind == "emit":
            values = [op[1], op[2]]
            chosen.append(ob.emit(1, out, values, out.targets(values)))
        elif kind == "anchored":
            values = [op[1], op[2]]
            anchors = [inputs[i] for i in op[3]]
            chosen.append(ob.emit_anchored(1, out, values, out.targets(values), anchors))
        elif kind == "tracked":
            values = [op[1], op[2]]
            tg = out.targets(values)
            chosen.append(tg)
            if tg:
                roots.append(str(ob.emit_tracked(1, out, values, tg)))
        elif kind == "rooted":  # into an input's tree (a stateful spout passing a checkpoint step on)
            values = [op[1], op[2]]
            tg = out.targets(values)
            chosen.append(tg)
            root, = inputs[op[3][0] if op[3] else 0].anchors_to_ids
            rooted.append(str(ob.emit_rooted(1, out, values, tg, root)))
        elif kind == "ack":
            ob.ack(inputs[op[3][0] if op[3] else 0])
        elif kind == "fail":
            ob.fail(inputs[op[3][0] if op[3] else 0])
        elif kind == "flush":
            ob.flush()
            for q in queues:
                q.room += 1
            ob.try_flush_pending()
    ob.flush()
    published = [[_entries(b) for b in q.batches] for q in queues]
    pending = [[i, _entries(b)] for q, b, _n in ob.pending_emits for i in [queues.index(q)]]
    # the wire: every published batch packed, and decoded back
    wire = []
    for q in queues:
        for b in q.batches:
            data = pack_batch(b)
            cols, controls = decode_batch(data, _resolve)
            wire.append([data.hex(), [[c.task, c.source_task, c.stream, c.values, len(c)] for c in cols],
                         [[t, list(p)] for t, p in controls]])
    # the acker: every control message of the run through a ledger, in publish order
    ledger = AckerLedger()
    outcomes = []
    for q in queues:
        for b in q.batches:
            for _task, p in b:
                if type(p) is tuple:
                    if p[0] == 1:
                        res = ledger.init(p[1], p[2], p[3])
                    elif p[0] == 2:
                        res = ledger.ack(p[1], p[2])
                    else:
                        res = ledger.fail(p[1])
                    outcomes.append(None if res is None else [res[0], res[1], str(res[2])])
    return {"chosen": chosen, "roots": roots, "rooted": rooted, "counts": out.counts, "published": published,
            "pending": pending, "wire": wire, "acker": outcomes, "ledger_size": len(ledger),
            "input_ack_vals": [str(t.ack_val) for t in inputs]}


def main() -> None:
    print(json.dumps({"core": core_status()["core"]}), flush=True)
    for line in sys.stdin:
        try:
            res = run(json.loads(line))
        except Exception as exc:  # the same error on both cores is a same result
            res = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
