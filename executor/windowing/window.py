"""What a windowed bolt's execute gets (Storm's TupleWindow)."""

from __future__ import annotations


class TupleWindow:
    """The tuples of one window, in timestamp order: `get()` all of them, `get_new()` those not
    in the previous window, `get_expired()` those that left since it. `start_timestamp` and
    `end_timestamp` are ms since the epoch (the end: the trigger's reference time; the start:
    end minus the length of a duration window, None for a count window, as Storm)."""

    __slots__ = ("_tuples", "_new", "_expired", "start_timestamp", "end_timestamp")

    def __init__(self, tuples: list, new: list, expired: list, start_timestamp: int | None, end_timestamp: int | None):
        self._tuples = tuples
        self._new = new
        self._expired = expired
        self.start_timestamp = start_timestamp
        self.end_timestamp = end_timestamp

    def get(self) -> list:
        return self._tuples

    def get_new(self) -> list:
        return self._new

    def get_expired(self) -> list:
        return self._expired

    def __iter__(self):
        return iter(self._tuples)

    def __len__(self) -> int:
        return len(self._tuples)

    def __repr__(self) -> str:
        return (f"TupleWindow({len(self._tuples)} tuples, {len(self._new)} new, {len(self._expired)} expired, "
                f"{self.start_timestamp}..{self.end_timestamp})")
