"""Which executors and supervisors Nimbus considers alive (pure; Storm's heartbeat cache).

Nimbus never compares a heartbeat's own timestamp with its clock: it remembers when (on its
own clock) each reported time last *changed*. An executor whose reported time has not advanced
for `nimbus.task.timeout.secs` is dead, except during `nimbus.task.launch.secs` after its start
time (its worker may still be starting). A supervisor is treated the same way with
`nimbus.supervisor.timeout.secs`, and one whose ephemeral node vanished is dead at once.
After a Nimbus restart the cache is empty, so every heartbeat seen is fresh: a restart never
moves a running executor. Likewise, time during which Nimbus could not read ZooKeeper is no
evidence that anything died: when its connection comes back, every clock restarts
(restart_clocks) and supervisors whose node is missing keep their slots for a grace period
while their own sessions come back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Seen:
    """A reported heartbeat time and when Nimbus saw that value first."""

    reported: int
    seen_at: float


def update_cache(cache: Mapping[K, Seen], reported: Mapping[K, int], now: float) -> dict[K, Seen]:
    """The cache after a round of heartbeats: a changed (or new) value restarts its clock.
    Keys that reported nothing keep their old entry, so they age towards the timeout."""
    out = dict(cache)
    for key, value in reported.items():
        old = out.get(key)
        if old is None or old.reported != value:
            out[key] = Seen(value, now)
    return out


def is_fresh(seen: Seen | None, now: float, timeout_secs: float) -> bool:
    return seen is not None and now - seen.seen_at < timeout_secs


def alive_executors(executors: Iterable[K], cache: Mapping[K, Seen], start_times: Mapping[K, int],
                    now: float, task_timeout_secs: float, launch_secs: float) -> frozenset[K]:
    """Executors in their launch grace or whose heartbeat advanced within the task timeout."""
    alive = set()
    for e in executors:
        start = start_times.get(e)
        if start is not None and now - start < launch_secs:
            alive.add(e)
        elif is_fresh(cache.get(e), now, task_timeout_secs):
            alive.add(e)
    return frozenset(alive)


def alive_supervisors(present: Iterable[K], cache: Mapping[K, Seen], now: float,
                      timeout_secs: float) -> frozenset[K]:
    """Supervisors whose node exists and whose heartbeat advanced within the timeout."""
    return frozenset(s for s in present if is_fresh(cache.get(s), now, timeout_secs))


def forget(cache: Mapping[K, Seen], keep: Iterable[K]) -> dict[K, Seen]:
    """The cache restricted to `keep` (drops entries of removed topologies or supervisors)."""
    keep = set(keep)
    return {k: v for k, v in cache.items() if k in keep}


def restart_clocks(cache: Mapping[K, Seen], now: float) -> dict[K, Seen]:
    """The cache after Nimbus was blind until `now`: every heartbeat gets a full timeout from now."""
    return {k: Seen(v.reported, max(v.seen_at, now)) for k, v in cache.items()}
