"""Whether a topology's checkpoints stopped committing, and why, in words (pure): what the UI's
diagnosis, `storm-py monitor` and `storm-py list` say, from the checkpoint spout's reported
figures (executor/checkpoint/spout.py's gauges)."""

from __future__ import annotations

from typing import Any, Mapping

# Stopped: no commit for this many intervals, and at least STALL_MIN_SECS.
STALL_INTERVALS = 10
STALL_MIN_SECS = 30.0


def checkpoint_stall(name: str, conf: Mapping[str, Any], launched_at: float, now: float,
                     figures: Mapping[str, Any]) -> str | None:
    """One line when the checkpoints of topology `name` (active, with `conf`, launched at
    `launched_at`) have not committed for long, None otherwise; `figures` are the checkpoint
    spout's (`last_committed_at`, `last_committed_txid`, `rollbacks`, `recovering`). Times on
    one clock (in a dev cluster, the workers' and Nimbus's are one machine's)."""
    interval = max(0.1, float(conf.get("topology.state.checkpoint.interval.ms") or 1000) / 1000)
    at = figures.get("last_committed_at")
    since = now - (float(at) if at is not None else float(launched_at))
    if since < max(STALL_MIN_SECS, STALL_INTERVALS * interval):
        return None
    last = "none yet" if at is None else f"the last was txid {figures.get('last_committed_txid')}"
    rollbacks = int(figures.get("rollbacks") or 0)
    if figures.get("recovering"):
        why = ("it keeps rolling back: a recovery step fails every time it is tried (the components' last errors "
               "say which: an unreachable state provider, a hook that raises) or never completes (a task that does "
               "not pass it on; it times out after topology.message.timeout.secs, the workers' logs say where)")
    else:
        why = ("a checkpoint step is not completing: a task does not pass it on (a lost worker, a bolt stuck in "
               "execute); it fails after topology.message.timeout.secs and the topology rolls back")
    return (f"checkpoints of topology {name} have not committed for {int(since)} s ({last}; {rollbacks} "
            f"rollback(s)): {why}")
