"""What a supervisor remembers of its workers' deaths, per topology: the back-off that holds a
topology whose workers keep dying here, and `storm-py list`'s recent restarts. Pure."""

from __future__ import annotations

from typing import Mapping, Sequence

from daemons.backoff import backoff_delay

# Worker deaths a supervisor remembers per topology: its back-off and `storm-py list`'s restarts.
DEATH_MEMORY_SECS = 600.0
RECENT_DEATHS_SECS = 300.0


def remember_death(times: Sequence[float], now: float, window: float = DEATH_MEMORY_SECS) -> tuple[float, ...]:
    """A topology's worker death times here after one more at `now`, older ones forgotten."""
    return (*(t for t in times if now - t < window), now)


def deaths_within(times: Sequence[float], now: float, window: float = RECENT_DEATHS_SECS) -> int:
    return sum(1 for t in times if now - t < window)


def recent_deaths(death_times: Mapping[str, Sequence[float]], now: float,
                  window: float = RECENT_DEATHS_SECS) -> tuple[tuple[str, int], ...]:
    """(topology, deaths in the last `window`) for each topology with any (SupervisorInfo's form)."""
    counts = ((sid, deaths_within(times, now, window)) for sid, times in sorted(death_times.items()))
    return tuple((sid, n) for sid, n in counts if n)


def topology_hold_until(times: Sequence[float], now: float, base_secs: float = 1.0, max_secs: float = 60.0,
                        window: float = DEATH_MEMORY_SECS) -> float | None:
    """When the next worker of a topology whose workers died here at `times` may launch: the
    slot back-off (one free retry, then base, 2*base ... max) over the topology's deaths in the
    last `window`, from the newest; None when nothing holds it."""
    recent = [t for t in times if now - t < window]
    delay = backoff_delay(len(recent), base_secs, max_secs, free_retries=1)
    return max(recent) + delay if recent and delay > 0 else None
