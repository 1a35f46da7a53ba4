"""How many tuples a source spout (RedisStreamSpout, DirectorySpout) keeps in flight: its own
bound, by default larger in exactly-once mode (a tuple is in flight until the checkpoint after
it commits, a second by default), lowered by `topology.max.spout.pending` (a per-task bound in
Storm; twice it in exactly-once mode). Pure."""

from __future__ import annotations

IN_FLIGHT = 1000                  # the default bound: acked mode
IN_FLIGHT_EXACTLY_ONCE = 100_000  # ... exactly-once


def in_flight_limit(max_in_flight: int | None, max_spout_pending, exactly_once: bool = False) -> int:
    """The bound: `max_in_flight` (None: the mode's default), lowered by max spout pending when set.
    In exactly-once mode max spout pending bounds the tuples no checkpoint has followed yet, and
    one checkpoint holding at most as many is under way meanwhile (executor/spout.py): a source's
    tuples not yet committed are then at most twice the key."""
    own = max_in_flight or (IN_FLIGHT_EXACTLY_ONCE if exactly_once else IN_FLIGHT)
    if max_spout_pending:
        return max(1, min(int(own), int(max_spout_pending) * (2 if exactly_once else 1)))
    return int(own)
