"""Chaos at scale: the numbered word count (examples/numbered_word_count) writing through the
Spark sink on a dev cluster of 2 supervisors and 2 workers, with a fault every --every seconds
until all --messages are committed, then the table checked against what was sent.

Faults, in turn (examples/numbered_word_count/faults.py): SIGKILL a worker (the sink's, then the
other one), SIGKILL a supervisor and start it again, restart Nimbus, restart ZooKeeper (same
port and data dir). A `none` mark half-way to the first fault is the control: what "recovery"
takes with no fault at all (the in-flight messages' complete latency).

Prints one JSON object: messages missing (must be 0), duplicate rows (replays), whether the
dedupe read is exact, every fault with its recovery time (fault -> every message emitted before
it committed), recovery per kind (median, max), throughput (messages committed per second from
the first commit to the last, faults included, and before the first fault), elapsed time.

With --exactly-once the topology runs with topology.state.exactly.once: true, its state in the
dev cluster's Redis (which the `redis` fault kills and starts again, in turn with the others):
the raw table must then hold every row once (duplicates 0, not only an exact dedupe read).

usage: python3 bench/chaos.py [--messages 1000000] [--every 10] [--message-timeout 10]
                              [--faults worker,supervisor,nimbus,zookeeper] [--dir D] [--exactly-once]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "examples" / "numbered_word_count"))

from faults import EXACTLY_ONCE_FAULTS, FAULT_KINDS, Fault, NumberedRun  # noqa: E402

from daemons.devcluster import DevCluster  # noqa: E402

log = logging.getLogger("chaos")

FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1}


def per_kind(faults: list[Fault]) -> dict[str, dict]:
    """Recovery seconds by fault kind: count, median, max (pure)."""
    out = {}
    for kind in sorted({f.kind for f in faults}):
        secs = [f.recovered_secs for f in faults if f.kind == kind and f.recovered_secs is not None]
        out[kind] = {"faults": sum(1 for f in faults if f.kind == kind), "recovered": len(secs),
                     "median_secs": round(statistics.median(secs), 2) if secs else None,
                     "max_secs": round(max(secs), 2) if secs else None}
    return out


def control(run: NumberedRun) -> Fault:
    """A mark without a fault: recovery then measures the complete latency of what is in flight."""
    offsets = run.offsets()
    fault = Fault("none", time.monotonic(), {o.index: o.emitted for o in offsets},
                  sum(o.committed for o in offsets), done_secs=0.0)
    run.faults.append(fault)
    return fault


def chaos(args) -> dict:
    base = Path(args.dir or tempfile.mkdtemp(prefix="storm-py-chaos-"))
    # exactly once: the cluster's Redis is every topology's state provider (dev-cluster --redis)
    dev = DevCluster(base / "dev", supervisors=2, slots=2, user_conf=FAST, redis=args.exactly_once)
    conf = {"topology.message.timeout.secs": args.message_timeout}
    if args.exactly_once:
        conf["topology.state.exactly.once"] = "true"
    run = NumberedRun(dev, base / "run", args.messages, name="chaos", conf=conf)
    kinds = itertools.cycle(args.faults)
    started = time.monotonic()
    deadline = started + args.max_secs
    try:
        dev.start()
        run.submit()
        run.wait(lambda: run.committed() > 0, 300, "the first commit")
        first_at, first_committed = time.monotonic(), run.committed()
        control_at, next_at = first_at + args.every / 2, first_at + args.every
        marked = False
        before_faults = None
        completed = False
        while True:
            offsets = run.poll()
            now = time.monotonic()
            if sum(o.committed for o in offsets) == args.messages and sum(o.count for o in offsets) == args.messages:
                completed = True
                break
            if now > deadline:
                log.error("not done within %gs (reported as incomplete): %s", args.max_secs, run.describe())
                break
            if not marked and now >= control_at:
                control(run)
                marked = True
            if now >= next_at:
                if before_faults is None:
                    before_faults = (run.committed() - first_committed) / (now - first_at)
                fault = run.inject(next(kinds))
                log.info("%s fault: %s", fault.kind, run.describe())
                next_at = max(fault.started + args.every, time.monotonic())
            time.sleep(0.1)  # poll interval (the loop is bounded by the deadline above)
        done_at = time.monotonic()
        run.poll()
        run.kill_topology()
    finally:
        dev.stop()
    faults = [f for f in run.faults if f.kind != "none"]
    committed = run.committed()
    common = {
        "bench": "chaos", "messages": args.messages, "completed": completed, "committed": committed,
        "faults": len(faults), "recovery_by_kind": per_kind(run.faults),
        "unrecovered": [f.as_dict() for f in faults if f.recovered_secs is None],
        "fault_log": [f.as_dict() for f in run.faults],
        "throughput_msgs_per_sec": round((committed - first_committed) / (done_at - first_at), 1),
        "throughput_before_faults_msgs_per_sec": None if before_faults is None else round(before_faults, 1),
        "first_commit_secs": round(first_at - started, 1), "run_secs": round(done_at - first_at, 1),
        "every_secs": args.every, "message_timeout_secs": args.message_timeout, "dir": str(base),
        "exactly_once": args.exactly_once,
    }
    if not completed:
        return {**common, "ok": False}  # a table checked against messages never sent proves nothing
    checked_at = time.monotonic()
    verdict = run.check_table(timeout=1800)
    return {
        **common, "missing": verdict["missing"],
        "missing_first": verdict["missing_first"], "duplicates": verdict["duplicates"],
        "rows": verdict["rows"], "expected_rows": verdict["expected"], "deduped_rows": verdict["deduped"],
        "wrong_rows": verdict["wrong"], "dedupe_exact": verdict["deduped"] == verdict["distinct"] == verdict["expected"],
        # exactly once: the raw table itself is the claim
        "ok": verdict["ok"] and (not args.exactly_once or verdict["duplicates"] == 0),
        "check_secs": round(time.monotonic() - checked_at, 1),
    }


def _interrupt(*_args) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between faults")
    ap.add_argument("--message-timeout", type=int, default=10, help="topology.message.timeout.secs")
    ap.add_argument("--faults", type=lambda s: s.split(","), default=None,
                    help=f"comma-separated, in turn (default {','.join(FAULT_KINDS)}; with --exactly-once "
                         f"{','.join(EXACTLY_ONCE_FAULTS)})")
    ap.add_argument("--max-secs", type=float, default=3600, help="stop after this long and report the run as incomplete")
    ap.add_argument("--dir", help="where the cluster, offsets and table go (default: a new temp dir, kept)")
    ap.add_argument("--exactly-once", action="store_true",
                    help="topology.state.exactly.once: true, the state in the cluster's Redis")
    args = ap.parse_args()
    kinds = EXACTLY_ONCE_FAULTS if args.exactly_once else FAULT_KINDS
    if args.faults is None:
        args.faults = list(kinds)
    unknown = [k for k in args.faults if k not in kinds]
    if unknown:
        ap.error(f"unknown faults {unknown}; choose from {list(kinds)}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    # SIGTERM unwinds like Ctrl-C, so the cluster (workers included) is stopped on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    result = chaos(args)
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
