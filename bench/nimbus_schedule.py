"""Time Nimbus's pure scheduler (daemons/nimbus/scheduler.py) on a 100-supervisor cluster. Prints one JSON line.

The cluster: 100 supervisors x 4 slots on 100 hosts. Scenarios, each timed as one whole
`schedule()` call (a full scheduling round), median and max over --runs runs after warm-up:
  fresh_one_ms        one new topology of 1,000 executors asking for all 400 workers
  fresh_ten_ms        ten new topologies of 100 executors and 40 workers each (1,000 executors)
  steady_ms           the ten topologies again with their assignments and everything alive
                      (the monitor's common case: nothing moves, the result equals the input)
  supervisor_lost_ms  the ten topologies after one supervisor vanished (its executors move)
  dead_workers_ms     the ten topologies with the executors of 20 slots dead (they move)
Also `start_times_ms`: start times for the 1,000-executor assignment against the old one.

usage: python bench/nimbus_schedule.py [--runs 31]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from daemons.nimbus.scheduler import (  # noqa: E402
    SupervisorSlots,
    TopologyRequest,
    schedule,
    start_times,
)

SUPERVISORS = 100
PORTS = 4
EXECUTORS = 1000


def cluster() -> list[SupervisorSlots]:
    return [SupervisorSlots(f"sup-{i:03d}", f"host-{i:03d}", tuple(range(6700, 6700 + PORTS)))
            for i in range(SUPERVISORS)]


def ten_topologies(assignments: dict | None = None, dead: frozenset = frozenset()) -> list[TopologyRequest]:
    out = []
    for t in range(10):
        tid = f"topo{t}-{t + 1}-1700000000"
        executors = [(100 * t + i, 100 * t + i) for i in range(1, 101)]
        alive = None if not dead else frozenset(executors) - dead
        out.append(TopologyRequest(tid, executors, 40, (assignments or {}).get(tid, {}), alive))
    return out


def timed(fn, runs: int) -> dict[str, float]:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return {"median": round(statistics.median(samples) * 1000, 3), "max": round(max(samples) * 1000, 3),
            "n": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=31, help="timed runs per scenario")
    args = ap.parse_args()

    sups = cluster()
    one = [TopologyRequest("big-1-1700000000", [(i, i) for i in range(1, EXECUTORS + 1)], SUPERVISORS * PORTS)]
    first = schedule(one, sups)
    assert len(first["big-1-1700000000"]) == EXECUTORS

    fresh_ten = ten_topologies()
    placed = schedule(fresh_ten, sups)
    steady = ten_topologies(placed)
    assert schedule(steady, sups) == placed  # nothing to do, nothing changes

    lost = sups[1:]
    slots = sorted({slot for a in placed.values() for slot in a.values()})
    dead_slots = set(slots[::len(slots) // 20][:20])
    dead = frozenset(ex for a in placed.values() for ex, slot in a.items() if slot in dead_slots)
    with_dead = ten_topologies(placed, dead)

    big = one[0]
    old = first[big.topology_id]
    moved = schedule([TopologyRequest(big.topology_id, big.executors, big.num_workers, old)],
                     lost)[big.topology_id]
    starts = dict.fromkeys(old, 1_700_000_000)

    print(json.dumps({
        "bench": "nimbus_schedule",
        "supervisors": SUPERVISORS, "slots_per_supervisor": PORTS, "executors": EXECUTORS,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "fresh_one_ms": timed(lambda: schedule(one, sups), args.runs),
        "fresh_ten_ms": timed(lambda: schedule(fresh_ten, sups), args.runs),
        "steady_ms": timed(lambda: schedule(steady, sups), args.runs),
        "supervisor_lost_ms": timed(lambda: schedule(steady, lost), args.runs),
        "dead_workers_ms": timed(lambda: schedule(with_dead, sups), args.runs),
        "start_times_ms": timed(lambda: start_times(old, starts, moved, 1_700_000_100), args.runs),
    }), flush=True)


if __name__ == "__main__":
    main()
