"""What a Redis stream spout task has in flight, and the decisions about it (pure: no Redis).

An entry is in flight from the moment the spout holds it (read, claimed or waiting to be emitted
again) until its tuple tree is acked, or it is given up on (dead-lettered, or deleted from the
stream). The in-flight count bounds how much the spout reads: nothing is read that the spout
could not emit under `max_in_flight` and `topology.max.spout.pending`, so what the group hands
out (its pending entries list in Redis) stays bounded however far behind the topology is.
"""

from __future__ import annotations

import re

from executor.errors import InvalidTopologyError

# A stream entry id: milliseconds-sequence ("1700000000000-0"), or milliseconds alone.
_ENTRY_ID = re.compile(r"^[0-9]{1,20}(-[0-9]{1,20})?$")
SPECIAL_STARTS = ("$", "0")

Key = tuple  # (stream, entry id)


def check_streams(stream) -> tuple[str, ...]:
    """The stream names a spout reads: one name, or a non-empty list of distinct names."""
    names = [stream] if isinstance(stream, str) else list(stream) if isinstance(stream, (list, tuple)) else None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidTopologyError(
            f"RedisStreamSpout: stream must be a non-empty string or a list of them, got {stream!r}")
    if len(set(names)) != len(names):
        raise InvalidTopologyError(f"RedisStreamSpout: stream names a stream twice: {names!r}")
    return tuple(names)


def check_start(start) -> str:
    """Where a group created by the spout starts: '$' (new entries only), '0' (the whole stream)
    or an entry id (the entries after it)."""
    text = str(start) if isinstance(start, int) and not isinstance(start, bool) else start
    if not isinstance(text, str) or not (text in SPECIAL_STARTS or _ENTRY_ID.match(text)):
        raise InvalidTopologyError(
            f"RedisStreamSpout: start must be '$' (new entries only), '0' (the whole stream) or an "
            f"entry id such as '1700000000000-0', got {start!r}")
    return text


def check_positive(name: str, value, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidTopologyError(f"RedisStreamSpout: {name} must be a positive integer, got {value!r}")
    return value


def id_order(entry_id: str) -> tuple[int, int]:
    """An entry id as a sortable pair (Redis orders ids by milliseconds, then sequence)."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def later_id(a: str | None, b: str) -> str:
    return b if a is None or id_order(b) > id_order(a) else a


def split_at(entries: list, position: str) -> tuple[list, list[str]]:
    """Entries ([entry_id, fields] each, in id order) past `position`, and the ids up to it."""
    limit = id_order(position)
    done = [e[0] for e in entries if id_order(e[0]) <= limit]
    return (entries[len(done):] if done else entries), done


class UnmappableEntry(ValueError):
    """An entry whose fields are not text: it goes to the dead-letter stream."""


def map_fields(flat) -> dict[str, str]:
    """An entry's fields as str -> str, or UnmappableEntry saying which field is not UTF-8.

    `flat` is the entry as the spout's connection gives it: [name, value, name, value, ...],
    decoded as UTF-8 with "surrogateescape" (by hiredis, in C), so bytes that are not UTF-8 show
    as lone surrogates and nothing is lost (they encode back to the same bytes)."""
    if len(flat) == 2:  # one field, the common record: no iterators, two checks in C
        name, value = flat
        if name.isascii() and value.isascii():
            return {name: value}
    if not flat:
        raise UnmappableEntry("it has no fields")
    it = iter(flat)
    fields = dict(zip(it, it))
    if "".join(flat).isascii():  # the common case, once per tuple: one check in C
        return fields
    for i, text in enumerate(flat):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            original = text.encode("utf-8", "surrogateescape")
            if i % 2 == 0:
                raise UnmappableEntry(f"field name {original!r} is not UTF-8") from None
            raise UnmappableEntry(f"the value of field {flat[i - 1]!r} is not UTF-8") from None
    return fields


def original_bytes(text: str) -> bytes:
    """What Redis holds for a string the spout's connection decoded."""
    return text.encode("utf-8", "surrogateescape")


def claim_idle_ms(message_timeout_secs: float) -> int:
    """How long an entry must sit unacked in the group before any task takes it over (XAUTOCLAIM):
    twice the message timeout, so an entry a live task still tracks (it would have timed out and
    been claimed back by its own replay first) is not taken from it."""
    return max(1000, int(2 * float(message_timeout_secs) * 1000))


def retry_delay(failures: int, first: float = 0.5, cap: float = 5.0) -> float:
    """Seconds before reconnecting after `failures` consecutive failures (doubling, capped)."""
    return min(cap, first * (2 ** max(0, failures - 1)))


class StreamLedger:
    """One task's entries in flight (owned by the executor thread). Compiled with the per-tuple
    core (stream_ledger.pxd; executor/core/__init__.py): the spout's cursor calls it per tuple."""

    def __init__(self, limit: int, max_deliveries: int | None = None):
        self.limit = limit                    # min(max_in_flight, topology.max.spout.pending)
        self.max_deliveries = max_deliveries
        self.in_flight: set = set()
        self.fails: dict = {}

    def __repr__(self) -> str:
        return f"StreamLedger(limit={self.limit}, in_flight={len(self.in_flight)}, failing={len(self.fails)})"

    def budget(self, held: int = 0) -> int:
        """How many more entries may be read now, `held` already read and not yet taken."""
        return max(0, self.limit - len(self.in_flight) - held)

    def take(self, key: Key) -> bool:
        """An entry handed to this task; False when it is already in flight here (claimed back)."""
        if key in self.in_flight:
            return False
        self.in_flight.add(key)
        return True

    def acked(self, key: Key) -> bool:
        """True when the entry was in flight here (it is to be XACKed)."""
        if key in self.in_flight:
            self.in_flight.discard(key)
            if self.fails:
                self.fails.pop(key, None)
            return True
        return False

    def failed(self, key: Key) -> bool | None:
        """A failed or timed-out entry: True to replay it, False to give up on it (it failed
        max_deliveries times: the caller dead-letters it), None when it is not in flight here."""
        if key not in self.in_flight:
            return None
        n = self.fails.get(key, 0) + 1
        self.fails[key] = n
        return self.max_deliveries is None or n < self.max_deliveries

    def clear(self) -> None:
        """Exactly-once rewind: nothing is in flight (what was is emitted again)."""
        self.in_flight.clear()
        self.fails.clear()

    def forget(self, key: Key) -> None:
        """An entry given up on (dead-lettered, or gone from the stream)."""
        self.in_flight.discard(key)
        self.fails.pop(key, None)
