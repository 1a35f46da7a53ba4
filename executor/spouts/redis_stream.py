"""`RedisStreamSpout`: one or more Redis streams read as a consumer group, at least once.

Storm's storm-kafka-client semantics on a Redis stream (docs/topology-guide.md, "Sources"):
each spout task is one consumer of the group; a tuple's message id is its entry id; an acked
tuple's entry is XACKed (batched), so the group's position advances only over processed entries;
a failed or timed-out tuple's entry is emitted again (XCLAIMed back first, so no other task takes
it meanwhile). Entries a dead consumer held are taken over with XAUTOCLAIM once they have sat
unacked for twice the message timeout, and a task that restarts under its old consumer name
first emits again what it had pending. An entry whose fields are not text goes to a dead-letter
stream (`<stream>:dead-letter` by default) with the reason, and is acked in the source stream.

next_tuple never waits on Redis for data (no BLOCK): an empty read makes the task wait a few
milliseconds before it asks again. A Redis it cannot reach is one error line naming host:port,
retried with a back-off; the tuples in flight are kept and their acks sent once it is back.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from executor.components import Spout
from executor.errors import ClearError, InvalidTopologyError
from executor.spouts.stream_ledger import (
    StreamLedger,
    UnmappableEntry,
    check_positive,
    check_start,
    check_streams,
    claim_idle_ms,
    map_fields,
    retry_delay,
)
from executor.state.redis_client import RedisSettings, connect, problem_of

log = logging.getLogger(__name__)

EMPTY_READ_WAIT_SECS = 0.005  # after a read that found nothing new
ACK_FLUSH_SECS = 0.02         # acks wait at most this long to go out in one XACK
ACK_BATCH = 256
EMIT_PER_CALL = 64            # a next_tuple call emits at most this many (Storm: "don't hog")
WHO = "RedisStreamSpout"


class RedisStreamError(ClearError):
    """A one-line problem with the spout's Redis (reported as the component's error)."""


def _text(value) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


class RedisStreamSpout(Spout):
    """Emits `[entry_id, fields]` (output fields `id`, `fields`; `fields` a dict of str to str)
    for every entry of `stream` (a name, or a list of names) delivered to this task as a consumer
    of `group`; the group is created at `start` ('$', '0' or an entry id) when absent.

    Keyword options: `db`; `consumer` (the name prefix; default `<topology>-<component>`, the task
    index appended); `batch` (entries per read); `dead_letter_stream` (default
    `<stream>:dead-letter`); `max_deliveries` (after this many failures an entry is
    dead-lettered; default never, Storm's default); `timeout` (seconds per Redis call)."""

    def __init__(self, stream, group: str, host: str = "127.0.0.1", port: int = 6379, start: str = "0",
                 password: str | None = None, max_in_flight: int = 1000, *, db: int = 0,
                 consumer: str | None = None, batch: int = 200, dead_letter_stream: str | None = None,
                 max_deliveries: int | None = None, timeout: float = 2.0):
        self.streams = check_streams(stream)
        if not isinstance(group, str) or not group:
            raise InvalidTopologyError(f"{WHO}: group must be a non-empty string, got {group!r}")
        if not isinstance(host, str) or not host:
            raise InvalidTopologyError(f"{WHO}: host must be a non-empty string, got {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise InvalidTopologyError(f"{WHO}: port must be an integer 1-65535, got {port!r}")
        if consumer is not None and (not isinstance(consumer, str) or not consumer):
            raise InvalidTopologyError(f"{WHO}: consumer must be a non-empty string, got {consumer!r}")
        if dead_letter_stream is not None and (not isinstance(dead_letter_stream, str) or not dead_letter_stream):
            raise InvalidTopologyError(f"{WHO}: dead_letter_stream must be a non-empty string, got "
                                       f"{dead_letter_stream!r}")
        self.group = group
        self.host = host
        self.port = port
        self.start = check_start(start)
        self.password = password
        self.max_in_flight = check_positive("max_in_flight", max_in_flight)
        self.db = db
        self.consumer = consumer
        self.batch = check_positive("batch", batch)
        self.dead_letter_stream = dead_letter_stream
        self.max_deliveries = check_positive("max_deliveries", max_deliveries, allow_none=True)
        self.timeout = float(timeout)

    def __repr__(self) -> str:  # never shows the password
        return (f"RedisStreamSpout({list(self.streams)!r}, group={self.group!r}, "
                f"{self.host}:{self.port}, start={self.start!r})")

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(["id", "fields"])

    # ---- lifecycle ----
    def open(self, conf: dict, context, collector) -> None:
        self._collector = collector
        self._settings = RedisSettings(self.host, self.port, self.db, self.password, "", self.timeout)
        self._where = f"{WHO} {context.this_component_id!r}"
        prefix = self.consumer or f"{conf.get('topology.name') or context.storm_id}-{context.this_component_id}"
        self._name = f"{prefix}-{context.this_task_index}"
        max_pending = conf.get("topology.max.spout.pending") or 0
        limit = min(self.max_in_flight, max_pending) if max_pending > 0 else self.max_in_flight
        self._ledger = StreamLedger(limit, self.max_deliveries)
        self._claim_idle_ms = claim_idle_ms(conf.get("topology.message.timeout.secs", 30))
        self._claim_every = self._claim_idle_ms / 2000.0
        self._client = None
        self._failures = 0
        self._retry_at = 0.0
        self._down_since: float | None = None
        self._buffer: deque = deque()          # (stream, id, raw fields) held, not yet emitted
        self._recovering = {s: "0" for s in self.streams}  # own pending entries still to re-emit
        self._cursors = {s: "0-0" for s in self.streams}   # XAUTOCLAIM scan positions
        self._next_claim = time.monotonic() + self._claim_every
        self._next_read = 0.0
        self._acks_since = 0.0
        self._multi = len(self.streams) > 1
        self.dead_lettered = 0

    def next_tuple(self) -> None:
        now = time.monotonic()
        if self._client is None and not self._connect(now):
            return
        import redis.exceptions as rex

        try:
            self._flush_acks(now, force=False)
            if not self._buffer:
                self._fill(now)
            self._emit_some()
        except rex.ResponseError as exc:
            if "NOGROUP" in str(exc):
                self._group_gone(exc)
            else:
                self._lost(exc, now)
        except (rex.RedisError, OSError) as exc:
            self._lost(exc, now)

    def ack(self, msg_id) -> None:
        self._ledger.acked(self._key(msg_id))
        if self._ledger.acks_waiting() >= ACK_BATCH:
            self._flush_quietly()

    def fail(self, msg_id) -> None:
        key = self._key(msg_id)
        if key in self._ledger.in_flight and not self._ledger.failed(key):
            self._dead_letter_later(key, f"it failed {self.max_deliveries} time(s)")

    def deactivate(self) -> None:
        self._flush_quietly()

    def close(self) -> None:
        self._flush_quietly()
        if self._client is not None:
            self._client.close()
            self._client = None

    # ---- message ids ----
    def _key(self, msg_id) -> tuple:
        return tuple(msg_id) if self._multi else (self.streams[0], msg_id)

    def _msg_id(self, stream: str, entry_id: str):
        return (stream, entry_id) if self._multi else entry_id

    # ---- connection ----
    def _connect(self, now: float) -> bool:
        if now < self._retry_at:
            return False
        import redis.exceptions as rex

        client = connect(self._settings, retries=0)
        try:
            for stream in self.streams:
                self._ensure_group(client, stream, self.start)
        except (rex.RedisError, OSError) as exc:
            client.close()
            self._lost(exc, now)
            return False
        self._client = client
        if self._down_since is not None:
            log.info("%s: Redis at %s is reachable again (after %.1fs)", self._where, self._settings.address,
                     now - self._down_since)
        self._failures, self._down_since = 0, None
        return True

    def _ensure_group(self, client, stream: str, at: str) -> bool:
        """Create the group at `at` (the stream too when absent); False when it already exists."""
        import redis.exceptions as rex

        try:
            client.xgroup_create(stream, self.group, id=at, mkstream=True)
        except rex.ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return False
            raise
        log.info("%s: created consumer group %r of stream %r at %s", self._where, self.group, stream, at)
        return True

    def _lost(self, exc: BaseException, now: float) -> None:
        """Redis unreachable or failing: one error per outage, then retries with a back-off."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._failures += 1
        delay = retry_delay(self._failures)
        self._retry_at = now + delay
        problem = problem_of(exc, self._settings, who=f"Redis (for {self._where})", password_from=f"{WHO}(password=...)")
        if self._down_since is None:
            self._down_since = now
            self._report(f"{problem}; retrying every {retry_delay(99):g}s at most, tuples in flight are kept")
        else:
            log.debug("%s: still failing: %s", self._where, problem)

    def _group_gone(self, exc: BaseException) -> None:
        """A stream or its group was deleted under the spout: create them again and go on (from
        the newest entry this task read when the stream still exists, so nothing is read twice
        that this task already had; from the start when the stream is new)."""
        for stream in self.streams:
            exists = self._client.exists(stream)
            at = self._ledger.last_read.get(stream, self.start) if exists else "0"
            if self._ensure_group(self._client, stream, at):
                self._report(f"{self._where}: consumer group {self.group!r} of stream {stream!r} at "
                             f"{self._settings.address} was gone (deleted?): created again at {at}")

    def _report(self, message: str) -> None:
        log.error("%s", message)
        self._collector.report_error(RedisStreamError(message))

    # ---- reading ----
    def _fill(self, now: float) -> None:
        """Take entries to emit: replays first, then this consumer's own pending entries (after
        a restart), then a dead consumer's (when due), then new ones."""
        ledger = self._ledger
        replays = ledger.take_replays(self.batch)
        if replays:
            self._claim_back(replays)
            return
        if self._recovering:
            self._recover_own()
            return
        if now >= self._next_claim:
            self._next_claim = now + self._claim_every
            if self._autoclaim():
                return
        budget = min(ledger.budget() - len(self._buffer), self.batch)
        if budget <= 0 or now < self._next_read:
            return
        got = self._read({s: ">" for s in self.streams}, budget)
        if not got:
            self._next_read = now + EMPTY_READ_WAIT_SECS

    def _read(self, streams: dict[str, str], count: int) -> int:
        reply = self._client.xreadgroup(self.group, self._name, streams, count=count) or []
        n = 0
        for stream, entries in reply:
            stream = _text(stream)
            for entry_id, raw in entries:
                entry_id = _text(entry_id)
                if self._ledger.take(stream, entry_id):
                    self._buffer.append((stream, entry_id, raw))
                    n += 1
        return n

    def _recover_own(self) -> None:
        """This consumer's pending entries (its previous run's tuples in flight), emitted again."""
        budget = min(self._ledger.budget() - len(self._buffer), self.batch)
        if budget <= 0:
            return
        reply = self._client.xreadgroup(self.group, self._name, dict(self._recovering), count=budget) or []
        seen = set()
        for stream, entries in reply:
            stream = _text(stream)
            for entry_id, raw in entries:
                entry_id = _text(entry_id)
                self._recovering[stream] = entry_id
                seen.add(stream)
                if raw is None or not raw:  # deleted from the stream while pending: nothing to emit
                    self._client.xack(stream, self.group, entry_id)
                    continue
                if self._ledger.take(stream, entry_id):
                    self._buffer.append((stream, entry_id, raw))
        for stream in list(self._recovering):
            if stream not in seen:
                del self._recovering[stream]
                log.info("%s: consumer %s's pending entries of stream %r are all emitted again", self._where,
                         self._name, stream)

    def _autoclaim(self) -> bool:
        """Take over entries another consumer has held unacked for too long (it died)."""
        taken = False
        budget = min(self._ledger.budget() - len(self._buffer), self.batch)
        for stream in self.streams:
            if budget <= 0:
                break
            reply = self._client.xautoclaim(stream, self.group, self._name, self._claim_idle_ms,
                                            start_id=self._cursors[stream], count=budget)
            cursor, entries = _text(reply[0]), reply[1]
            self._cursors[stream] = cursor
            for entry_id, raw in entries:
                entry_id = _text(entry_id)
                if raw is None or not raw:
                    continue
                if self._ledger.take(stream, entry_id):
                    self._buffer.append((stream, entry_id, raw))
                    budget -= 1
                    taken = True
            if taken:
                log.info("%s: took over %d entr(ies) of stream %r idle for over %dms (a consumer died)",
                         self._where, len(self._buffer), stream, self._claim_idle_ms)
            if cursor != "0-0":
                self._next_claim = 0.0  # more to scan: go on at the next call
        return taken

    def _claim_back(self, replays: dict[str, list[str]]) -> None:
        """Entries to emit again: claimed back (resetting their idle time, so no other task takes
        them over meanwhile) with their fields; one that is no longer in the group's pending list
        (the group was created again) is read from the stream; one deleted is given up."""
        for stream, ids in replays.items():
            claimed = self._client.xclaim(stream, self.group, self._name, 0, ids) or []
            found = {}
            for entry_id, raw in claimed:
                if raw:
                    found[_text(entry_id)] = raw
            for entry_id in ids:
                raw = found.get(entry_id)
                if raw is None:
                    rows = self._client.xrange(stream, entry_id, entry_id, count=1)
                    raw = rows[0][1] if rows else None
                if raw is None:
                    log.warning("%s: entry %s of stream %r was deleted before it was processed; giving it up",
                                self._where, entry_id, stream)
                    self._ledger.forget((stream, entry_id))
                    continue
                self._buffer.append((stream, entry_id, raw))

    # ---- emitting ----
    def _emit_some(self) -> None:
        buffer = self._buffer
        emit = self._collector.emit
        for _ in range(min(EMIT_PER_CALL, len(buffer))):
            stream, entry_id, raw = buffer.popleft()
            try:
                fields = map_fields(raw)
            except UnmappableEntry as exc:
                self._dead_letter(stream, entry_id, raw, f"its fields cannot be mapped to text: {exc}")
                continue
            emit([entry_id, fields], msg_id=self._msg_id(stream, entry_id))

    def _dead_letter_target(self, stream: str) -> str:
        return self.dead_letter_stream or f"{stream}:dead-letter"

    def _dead_letter(self, stream: str, entry_id: str, raw, reason: str) -> None:
        """Copy the entry, with where it came from and why, to the dead-letter stream and ack it
        in its own, in one transaction: it is in exactly one of the two."""
        target = self._dead_letter_target(stream)
        record: dict[Any, Any] = dict(raw or {})
        record.update({"storm-py.source.stream": stream, "storm-py.source.id": entry_id,
                       "storm-py.group": self.group, "storm-py.reason": reason})
        pipe = self._client.pipeline(transaction=True)
        pipe.xadd(target, record)
        pipe.xack(stream, self.group, entry_id)
        pipe.execute()
        self._ledger.forget((stream, entry_id))
        self.dead_lettered += 1
        self._report(f"{self._where}: entry {entry_id} of stream {stream!r} moved to dead-letter stream "
                     f"{target!r}: {reason}")

    def _dead_letter_later(self, key: tuple, reason: str) -> None:
        """An entry that failed too often: dead-lettered at once when Redis answers (its fields
        read back from the stream), else replayed until it does."""
        import redis.exceptions as rex

        stream, entry_id = key
        try:
            if self._client is None:
                raise ConnectionError("not connected")
            rows = self._client.xrange(stream, entry_id, entry_id, count=1)
            if not rows:
                self._ledger.forget(key)
                return
            self._dead_letter(stream, entry_id, rows[0][1], reason)
        except (rex.RedisError, OSError, ConnectionError):
            self._ledger.replays.append(key)

    # ---- acks ----
    def _flush_acks(self, now: float, force: bool) -> None:
        ledger = self._ledger
        if not ledger.to_ack:
            self._acks_since = now
            return
        if not force and ledger.acks_waiting() < ACK_BATCH and now - self._acks_since < ACK_FLUSH_SECS:
            return
        acks = ledger.take_acks()
        try:
            if len(acks) == 1:
                (stream, ids), = acks.items()
                self._client.xack(stream, self.group, *ids)
            else:
                pipe = self._client.pipeline(transaction=False)
                for stream, ids in acks.items():
                    pipe.xack(stream, self.group, *ids)
                pipe.execute()
        except BaseException:
            for stream, ids in acks.items():  # sent again once Redis answers (XACK is idempotent)
                ledger.to_ack.setdefault(stream, []).extend(ids)
            raise
        self._acks_since = now

    def _flush_quietly(self) -> None:
        if self._client is None:
            return
        import redis.exceptions as rex

        try:
            self._flush_acks(time.monotonic(), force=True)
        except rex.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                log.warning("%s: acks not sent: %s", self._where, exc)
            self._ledger.take_acks()  # the group is gone: nothing to ack them in
        except (rex.RedisError, OSError) as exc:
            self._lost(exc, time.monotonic())
