"""The thread that owns a RedisStreamSpout task's Redis connection.

The spout's calls run on its worker's shared executor thread, which must never wait on the
network: a Redis round trip (with `appendfsync always`, an fsync per command) stalls every
executor of the worker, and a Redis that stopped answering would stall them for the client
timeout. So the spout only moves items through thread-safe deques, and this thread does every
Redis call: it reads ahead what the spout's in-flight budget admits, sends acks as batched
XACKs, claims replayed entries back, takes over a dead consumer's, dead-letters, and recreates a
deleted group. What the spout must know comes back as `Fetched` batches and problem lines.

Entries stay as the reply parser (hiredis, in C) made them: `[entry_id, [name, value, ...]]`
lists of str, in the batches they were read in. Every object this thread makes per entry is
made under the GIL the executor thread needs, so it makes none (redis-py's own reply
callbacks for the stream commands, a dict per entry, are switched off). For the same reason
reads and acks go over a connection of its own with one send per round trip
(executor/spouts/stream_wire.py); the rarer commands use redis-py's client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, NamedTuple

from executor.spouts.stream_ledger import later_id, original_bytes, retry_delay, split_at
from executor.spouts.stream_wire import StreamWire
from executor.state.redis_client import RedisSettings, connect, problem_of

log = logging.getLogger(__name__)

IDLE_WAIT_SECS = 0.02    # nothing to do: look again this soon, or when the spout wakes us (it does
                         # when acks pile up or its read-ahead runs low: each wake-up costs the
                         # executor thread a GIL hand-over)
EMPTY_READ_WAIT_SECS = 0.005  # after a read that found nothing new
ACKS_ALONE_AFTER_SECS = 0.25  # acks ride on the next read; sent alone only once they waited this
                              # long (a round trip of acks alone delays the next read by as much)

NEW, REPLAY, GONE, REWOUND = 0, 1, 2, 3  # what a Fetched item is


RAW_REPLIES = ("XREADGROUP", "XCLAIM", "XAUTOCLAIM", "XRANGE")
_SECOND = itemgetter(1)  # a (stream, entry id) key's id; an [entry id, fields] entry's fields


class Fetched(NamedTuple):
    """Entries of one stream for the spout, in the order they are to be emitted."""

    kind: int          # NEW (read, recovered or claimed from a dead consumer), REPLAY, GONE, or
                       # REWOUND: what follows is read after the rewind numbered `stream`
    stream: str
    entries: list      # [entry_id, [name, value, ...]] each (the fields None for GONE)


@dataclass(frozen=True)
class FetchSettings:
    streams: tuple[str, ...]
    group: str
    consumer: str
    start: str
    batch: int
    min_read: int
    claim_idle_ms: int
    where: str                         # "RedisStreamSpout 'events'", for log and error lines
    dead_letter: Callable[[str], str]  # source stream -> dead-letter stream
    password_from: str
    exactly_once: bool = False         # no entry taken over from another consumer (each task's
                                       # pending list is its own checkpointed read)


class StreamFetcher:
    """Started by the spout's open, stopped by its close. `budget()` is what the spout could take
    now (its ledger's free slots less the entries handed over and not yet taken: `offered` here,
    counted by this thread, less what the spout counted; int reads, safe across threads under
    the GIL)."""

    def __init__(self, settings: FetchSettings, redis: RedisSettings, budget: Callable[[], int]):
        self.s = settings
        self.redis = redis
        self._budget = budget
        self.ready: deque[Fetched] = deque()   # to the spout
        self.offered = 0                       # entries put in `ready` so far (written here only)
        self.problems: deque[str] = deque()    # to the spout, reported as its errors
        self.acks: deque[tuple] = deque()      # from the spout: keys to XACK
        self.replays: deque[tuple] = deque()   # from the spout: keys to emit again
        self.dead: deque[tuple] = deque()      # from the spout: (key, raw or None, reason)
        self._wake = threading.Event()
        self._stop = False
        self._client = None
        self._wire = StreamWire(redis)  # reads and acks (the hot round trip)
        self._read_args = ("STREAMS", *settings.streams, *(">",) * len(settings.streams))
        self._failures = 0
        self._retry_at = 0.0
        self._down_since: float | None = None
        self._recovering = {s: "0" for s in settings.streams}  # own pending entries to emit again
        self._skip: dict[str, str] = {}  # exactly-once: per stream, the committed read position
        self._rewind: tuple[int, dict[str, str], dict[str, list[str]]] | None = None  # from the spout
        self._replay: dict[str, list[str]] = {}  # a start from a savepoint: entries to emit again first
        self._cursors = {s: "0-0" for s in settings.streams}   # XAUTOCLAIM scan positions
        self._next_claim = time.monotonic() + settings.claim_idle_ms / 2000.0
        self._next_read = 0.0
        self._acks_due: float | None = None  # when acks waiting for a read are sent alone
        self._last_read: dict[str, str] = {}
        self._thread = threading.Thread(target=self._run, name=f"redis-stream-{settings.consumer}", daemon=True)

    # ---- the spout's side ----
    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def rewind(self, number: int, positions: dict[str, str], replay: dict[str, list[str]] | None = None) -> None:
        """Exactly-once: emit again, after a REWOUND item with this number, every entry of this
        consumer's pending list past `positions` (per stream, the newest entry id of the committed
        checkpoint); the entries up to them are in it and are XACKed, not emitted. The items
        already in `ready` belong to the rolled-back past (the spout drops them). `replay`: per
        stream, entries acked since (a start from an older savepoint, executor/savepoints/sources.py),
        read by id and emitted first."""
        self._rewind = (number, dict(positions), {s: list(ids) for s, ids in (replay or {}).items() if ids})
        self._wake.set()

    def stop(self, timeout: float) -> None:
        """Send what is waiting (acks first) and end the thread."""
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("%s: its Redis thread did not stop within %.1fs", self.s.where, timeout)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    @property
    def connected(self) -> bool:
        return self._client is not None

    # ---- the thread ----
    def _run(self) -> None:
        import redis.exceptions as rex

        while True:
            stopping = self._stop
            did = False
            try:
                if self._client is None:
                    self._connect()
                if self._client is not None:
                    did = self._round(stopping)
            except rex.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    self._group_gone()
                else:
                    self._lost(exc)
            except (rex.RedisError, OSError) as exc:
                self._lost(exc)
            except Exception:  # a bug here must not leave the spout silently without input
                log.exception("%s: Redis thread failed; it carries on", self.s.where)
                self._lost(RuntimeError("internal error (see the worker log)"))
            if stopping:
                break
            if not did:
                self._wake.wait(IDLE_WAIT_SECS if self._client is not None else
                                max(0.0, min(1.0, self._retry_at - time.monotonic())))
                self._wake.clear()
        self._close()

    def _close(self) -> None:
        self._wire.close()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _round(self, stopping: bool) -> bool:
        rewind = self._rewind
        if rewind is not None and not stopping:
            self._rewind = None
            number, self._skip, self._replay = rewind
            # this thread alone appends to `ready`: nothing read before this point comes after it
            self.ready.append(Fetched(REWOUND, number, []))
            self._recovering = {s: "0" for s in self.s.streams}
        did = self._send_dead()
        if self._replay and not stopping:
            return self._emit_replay() or did
        if stopping or self.replays or self._recovering:
            did = self._send_acks(self._take_acks()) or did
            if stopping:
                return did
            if self.replays:
                return self._claim_back() or did
            return self._recover_own() or did
        now = time.monotonic()
        if now >= self._next_claim and not self.s.exactly_once:
            self._next_claim = now + self.s.claim_idle_ms / 2000.0
            if self._autoclaim():
                return True
        budget = min(self._budget(), self.s.batch)
        # Only a worthwhile read: at the limit each ack frees one slot, and a read per entry
        # would cost a round trip per tuple; a smaller one only when the spout has run dry.
        read = (budget >= self.s.min_read or (budget > 0 and not self.ready)) and now >= self._next_read
        if not read:
            if not self.acks:
                return did
            if self._acks_due is None:
                self._acks_due = now + ACKS_ALONE_AFTER_SECS
            if now < self._acks_due:
                return did
        self._acks_due = None
        acks = self._take_acks()
        if not read:
            return self._send_acks(acks) or did
        # Acks and the read in one round trip: with appendfsync always, Redis syncs its
        # append-only file once per round of commands, so this halves the syncs waited for.
        if not self._read(budget, acks):
            self._next_read = now + EMPTY_READ_WAIT_SECS
            return bool(acks) or did
        return True

    # ---- connection ----
    def _connect(self) -> None:
        import redis.exceptions as rex

        now = time.monotonic()
        if now < self._retry_at:
            return
        client = connect(self.redis, retries=0, text=True)
        for command in RAW_REPLIES:
            client.set_response_callback(command, _as_is)
        try:
            for stream in self.s.streams:
                self._ensure_group(client, stream, self.s.start)
            self._wire.open()
        except (rex.RedisError, OSError) as exc:
            client.close()
            self._lost(exc)
            return
        self._client = client
        if self._down_since is not None:
            log.info("%s: Redis at %s is reachable again (after %.1fs)", self.s.where, self.redis.address,
                     now - self._down_since)
        self._failures, self._down_since = 0, None

    def _ensure_group(self, client, stream: str, at: str) -> bool:
        """Create the group at `at` (the stream too when absent); False when it already exists."""
        import redis.exceptions as rex

        try:
            client.xgroup_create(stream, self.s.group, id=at, mkstream=True)
        except rex.ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return False
            raise
        log.info("%s: created consumer group %r of stream %r at %s", self.s.where, self.s.group, stream, at)
        return True

    def _lost(self, exc: BaseException) -> None:
        """Redis unreachable or failing: one problem line per outage, then retries with a back-off
        (the spout's tuples in flight are kept; their acks wait here)."""
        self._close()
        now = time.monotonic()
        self._failures += 1
        self._retry_at = now + retry_delay(self._failures)
        problem = problem_of(exc, self.redis, who=f"Redis (for {self.s.where})", password_from=self.s.password_from)
        if self._down_since is None:
            self._down_since = now
            self.problems.append(f"{problem}; retrying every {retry_delay(99):g}s at most, tuples in flight are kept")
        else:
            log.debug("%s: still failing: %s", self.s.where, problem)

    def _group_gone(self) -> None:
        """A stream or its group was deleted: create them again and go on, from the newest entry
        this task read when the stream still exists (nothing it had is read twice), from the
        start of a stream created anew."""
        for stream in self.s.streams:
            exists = self._client.exists(stream)
            at = self._last_read.get(stream, self.s.start) if exists else "0"
            if self._ensure_group(self._client, stream, at):
                self.problems.append(f"{self.s.where}: consumer group {self.s.group!r} of stream {stream!r} at "
                                     f"{self.redis.address} was gone (deleted?): created again at {at}")

    # ---- reading ----
    def _offer(self, kind: int, stream: str, entries: list) -> int:
        if not all(map(_SECOND, entries)):  # deleted while pending: nothing to emit
            entries = [e for e in entries if e[1]]
        if entries:
            self.offered += len(entries)
            self.ready.append(Fetched(kind, stream, entries))
        return len(entries)

    def _read(self, count: int, acks: dict[str, list[str]]) -> int:
        """New entries (up to count), after sending `acks` in the same round trip."""
        commands = self._xacks(acks)
        commands.append(("XREADGROUP", "GROUP", self.s.group, self.s.consumer, "COUNT", count, *self._read_args))
        try:
            reply = self._wire.call(commands)[-1] or []
        except BaseException as exc:
            self._requeue_acks(acks, exc)
            raise
        n = 0
        for stream, entries in reply:
            if entries:  # ">" reads come in id order: the last is the newest
                self._last_read[stream] = later_id(self._last_read.get(stream), entries[-1][0])
            n += self._offer(NEW, stream, entries)
        return n

    def _emit_replay(self) -> bool:
        """A start from an older savepoint: the entries acked after it, by id, in id order."""
        budget = min(self._budget(), self.s.batch)
        if budget <= 0:
            return False
        for stream in list(self._replay):
            ids, rest = self._replay[stream][:budget], self._replay[stream][budget:]
            pipe = self._client.pipeline(transaction=False)
            for entry_id in ids:
                pipe.xrange(stream, entry_id, entry_id, count=1)
            found = [e for reply in pipe.execute() for e in (reply or ())]
            if len(found) < len(ids):
                self.problems.append(f"{self.s.where}: {len(ids) - len(found)} entries of stream {stream!r} that a "
                                     f"start from a savepoint reads again are gone from it (trimmed?)")
            self._offer(NEW, stream, found)
            if rest:
                self._replay[stream] = rest
                return True
            del self._replay[stream]
            budget -= len(ids)
            if budget <= 0:
                break
        return True

    def _recover_own(self) -> bool:
        """This consumer's pending entries (its previous run's tuples in flight), emitted again."""
        budget = min(self._budget(), self.s.batch)
        if budget <= 0:
            return False
        reply = self._client.xreadgroup(self.s.group, self.s.consumer, dict(self._recovering), count=budget) or []
        seen = set()
        for stream, entries in reply:
            if not entries:
                continue
            seen.add(stream)
            self._recovering[stream] = entries[-1][0]
            committed = self._skip.get(stream)
            if committed is not None:  # exactly-once: in the committed checkpoint, its XACK lost
                entries, done = split_at(entries, committed)
                if done:
                    self._client.xack(stream, self.s.group, *done)
            deleted = [i for i, fields in entries if not fields]
            if deleted:  # deleted from the stream while pending: nothing to emit
                self._client.xack(stream, self.s.group, *deleted)
            self._offer(NEW, stream, entries)
        for stream in list(self._recovering):
            if stream not in seen:
                del self._recovering[stream]
                log.info("%s: consumer %s's pending entries of stream %r are all emitted again", self.s.where,
                         self.s.consumer, stream)
        return True

    def _autoclaim(self) -> bool:
        """Take over entries another consumer has held unacked for too long (it died)."""
        taken = 0
        budget = min(self._budget(), self.s.batch)
        for stream in self.s.streams:
            if budget - taken <= 0:
                break
            reply = self._client.xautoclaim(stream, self.s.group, self.s.consumer, self.s.claim_idle_ms,
                                            start_id=self._cursors[stream], count=budget - taken)
            cursor = reply[0]
            self._cursors[stream] = cursor
            n = self._offer(NEW, stream, reply[1])
            if n:
                log.info("%s: took over %d entr(ies) of stream %r idle for over %dms (a consumer died)",
                         self.s.where, n, stream, self.s.claim_idle_ms)
            taken += n
            if cursor != "0-0":
                self._next_claim = 0.0  # more to scan: go on at the next round
        return taken > 0

    def _claim_back(self) -> bool:
        """Entries to emit again, claimed back (resetting their idle time, so that no other task
        takes them over meanwhile) with their fields. One no longer in the group's pending list
        (the group was created again) is read from the stream; one deleted is GONE."""
        by_stream: dict[str, list[str]] = {}
        for _ in range(min(len(self.replays), self.s.batch)):
            stream, entry_id = self.replays.popleft()
            by_stream.setdefault(stream, []).append(entry_id)
        for stream, ids in by_stream.items():
            try:
                claimed = self._client.xclaim(stream, self.s.group, self.s.consumer, 0, ids) or []
                found = {i: fields for i, fields in claimed if fields}
                for entry_id in ids:
                    fields = found.get(entry_id)
                    if fields is None:
                        rows = self._client.xrange(stream, entry_id, entry_id, count=1)
                        fields = rows[0][1] if rows else None
                    if fields is None:
                        log.warning("%s: entry %s of stream %r was deleted before it was processed; giving it up",
                                    self.s.where, entry_id, stream)
                    self.offered += 1  # before the spout can take it (its count must not pass this)
                    self.ready.append(Fetched(REPLAY if fields else GONE, stream, [[entry_id, fields]]))
            except BaseException:
                self.replays.extendleft((stream, i) for i in reversed(ids))  # again once Redis answers
                raise
        return True

    # ---- writing ----
    def _take_acks(self) -> dict[str, list[str]]:
        acks = self.acks
        take = acks.popleft
        keys = [take() for _ in range(len(acks))]  # the spout appends meanwhile: only these
        if not keys:
            return {}
        if len(self.s.streams) == 1:  # the common case, under the GIL the executor thread needs
            return {self.s.streams[0]: list(map(_SECOND, keys))}
        by_stream: dict[str, list[str]] = {}
        for stream, entry_id in keys:
            by_stream.setdefault(stream, []).append(entry_id)
        return by_stream

    def _xacks(self, by_stream: dict[str, list[str]]) -> list[tuple]:
        return [("XACK", stream, self.s.group, *ids) for stream, ids in by_stream.items()]

    def _requeue_acks(self, by_stream: dict[str, list[str]], exc: BaseException) -> None:
        """Acks not sent: again once Redis answers (XACK is idempotent); dropped when the group
        is gone (there is nothing to ack them in)."""
        if "NOGROUP" not in str(exc):
            self.acks.extendleft((s, i) for s, ids in reversed(by_stream.items()) for i in reversed(ids))

    def _send_acks(self, by_stream: dict[str, list[str]]) -> bool:
        if not by_stream:
            return False
        try:
            self._wire.call(self._xacks(by_stream))
        except BaseException as exc:
            self._requeue_acks(by_stream, exc)
            raise
        return True

    def _send_dead(self) -> bool:
        """Copy each entry given up on, with where it came from and why, to its dead-letter
        stream and ack it in its own, in one transaction: it is in exactly one of the two."""
        if not self.dead:
            return False
        while self.dead:
            key, raw, reason = self.dead[0]
            stream, entry_id = key
            if raw is None:
                rows = self._client.xrange(stream, entry_id, entry_id, count=1)
                if not rows:
                    self.dead.popleft()
                    continue
                raw = rows[0][1]
            target = self.s.dead_letter(stream)
            # [name, value, ...] as decoded: back to the bytes Redis holds (the command packer
            # encodes str strictly, and a non-UTF-8 field is what brings an entry here)
            it = iter([original_bytes(text) for text in raw])
            record: dict[Any, Any] = dict(zip(it, it))
            record.update({"storm-py.source.stream": stream, "storm-py.source.id": entry_id,
                           "storm-py.group": self.s.group, "storm-py.reason": reason})
            pipe = self._client.pipeline(transaction=True)
            pipe.xadd(target, record)
            pipe.xack(stream, self.s.group, entry_id)
            pipe.execute()
            self.dead.popleft()
            self.problems.append(f"{self.s.where}: entry {entry_id} of stream {stream!r} moved to dead-letter "
                                 f"stream {target!r}: {reason}")
        return True


def _as_is(response, **options):
    """The reply as the parser made it (redis-py would turn each entry's fields into a dict)."""
    return response
