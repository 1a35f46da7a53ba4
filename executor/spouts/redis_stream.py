"""`RedisStreamSpout`: one or more Redis streams read as a consumer group, at least once.

Storm's storm-kafka-client semantics on a Redis stream (docs/topology-guide.md, "Sources"):
each spout task is one consumer of the group; a tuple's message id is its entry id; an acked
tuple's entry is XACKed (batched), so the group's position advances only over processed entries;
a failed or timed-out tuple's entry is emitted again (XCLAIMed back first, so no other task takes
it meanwhile). Entries a dead consumer held are taken over with XAUTOCLAIM once they have sat
unacked for twice the message timeout, and a task that restarts under its old consumer name
first emits again what it had pending. An entry whose fields are not text goes to a dead-letter
stream (`<stream>:dead-letter` by default) with the reason, and is acked in the source stream.

With `topology.state.exactly.once: true` it is a stateful spout (a RewindableSpout): its read
position (per stream, the newest entry id emitted) is its checkpointed state, an entry is
XACKed only once the checkpoint after it commits, and at start and after a rollback it emits
again its own pending entries past the committed position (those up to it, committed but not
yet XACKed when a worker died, are XACKed). No entry is taken over from another consumer: each
task's pending list is part of its own checkpointed read, and tasks keep their consumer names.

The spout's calls never wait on Redis: a thread of its own (executor/spouts/stream_fetcher.py)
owns its connections, reads ahead what the in-flight budget admits and sends the acks. A Redis
it cannot reach is one error line naming host:port, retried with a back-off; the tuples in
flight are kept and their acks sent once it is back.
"""

from __future__ import annotations

import logging

from executor.checkpoint.api import RewindableSpout
from executor.checkpoint.barrier_mode import barrier_only
from executor.errors import ClearError, InvalidTopologyError
from executor.spouts.in_flight import in_flight_limit
from executor.spouts.stream_cursor import StreamCursor
from executor.spouts.stream_fetcher import FetchSettings, StreamFetcher
from executor.spouts.stream_ledger import (
    StreamLedger,
    check_positive,
    check_start,
    check_streams,
    claim_idle_ms,
    later_id,
)
from executor.state.redis_client import RedisSettings

log = logging.getLogger(__name__)

WHO = "RedisStreamSpout"
_POSITION = "read position:"     # + stream: its state key
# Where it reads ({kind, host, port, db, group, streams, consumer}), and (a start from an older
# savepoint) per stream the entries to read again: executor/savepoints/sources.py reads and writes them.
SOURCE_KEY = "$source"
REWIND_KEY = "$rewind"


class RedisStreamError(ClearError):
    """A one-line problem with the spout's Redis (reported as the component's error)."""


class RedisStreamSpout(RewindableSpout):
    """Emits `[entry_id, fields]` (output fields `id`, `fields`; `fields` a dict of str to str)
    for every entry of `stream` (a name, or a list of names) delivered to this task as a consumer
    of `group`; the group is created at `start` ('$', '0' or an entry id) when absent.

    `max_in_flight`: entries emitted and not yet acked, at most (lowered by
    `topology.max.spout.pending`); default 1,000, and 100,000 in exactly-once mode, where an
    entry is acked at the commit of the checkpoint after it (size it for the rate times
    `topology.state.checkpoint.interval.ms`).

    Keyword options: `db`; `consumer` (the name prefix; default `<topology>-<component>`, the task
    index appended); `batch` (entries per read); `dead_letter_stream` (default
    `<stream>:dead-letter`); `max_deliveries` (after this many failures an entry is
    dead-lettered; default never, Storm's default; no failures in exactly-once mode); `timeout`
    (seconds per Redis call)."""

    def __init__(self, stream, group: str, host: str = "127.0.0.1", port: int = 6379, start: str = "0",
                 password: str | None = None, max_in_flight: int | None = None, *, db: int = 0,
                 consumer: str | None = None, batch: int = 500, dead_letter_stream: str | None = None,
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
        self.max_in_flight = check_positive("max_in_flight", max_in_flight, allow_none=True)
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
        where = f"{WHO} {context.this_component_id!r}"
        prefix = self.consumer or f"{conf.get('topology.name') or context.storm_id}-{context.this_component_id}"
        self._exactly_once = once = barrier_only(conf)
        limit = in_flight_limit(self.max_in_flight, conf.get("topology.max.spout.pending"), once)
        self._ledger = ledger = StreamLedger(limit, self.max_deliveries)
        self._consumer = f"{prefix}-{context.this_task_index}"
        self._replaying: dict[str, str] = {}
        settings = FetchSettings(
            streams=self.streams, group=self.group, consumer=self._consumer,
            start=self.start, batch=self.batch, min_read=max(1, min(self.batch, limit // 4)),
            claim_idle_ms=claim_idle_ms(conf.get("topology.message.timeout.secs", 30)), where=where,
            dead_letter=lambda stream: self.dead_letter_stream or f"{stream}:dead-letter",
            password_from=f"{WHO}(password=...)", exactly_once=once)
        redis = RedisSettings(self.host, self.port, self.db, self.password, "", self.timeout)
        self._fetcher = fetcher = StreamFetcher(settings, redis, lambda: cursor.budget())
        self._cursor = cursor = StreamCursor(ledger, fetcher, collector.emit, self.streams,
                                             wake_at=settings.min_read,  # the budget at which a read is worth it
                                             on_problems=self._report_problems)
        # Per tuple, the executor calls the cursor's (compiled) methods without this class's frame.
        self.next_tuple, self.ack = cursor.next_tuple, cursor.ack
        self._state = None
        if not once:  # exactly-once: at init_state, from the committed position
            fetcher.start()

    def next_tuple(self) -> None:  # until open: nothing to emit
        pass

    def ack(self, msg_id) -> None:  # until open: nothing in flight
        pass

    def fail(self, msg_id) -> None:
        key = self._cursor.key(msg_id)
        replay = self._ledger.failed(key)
        if replay is None:
            return
        if replay:
            self._fetcher.replays.append(key)
        else:
            self._ledger.forget(key)
            self._fetcher.dead.append((key, None, f"it failed {self.max_deliveries} time(s)"))
        self._fetcher.wake()

    # ---- exactly-once (executor/checkpoint/spout_side.py calls these) ----
    def init_state(self, state) -> None:
        """At start and after every rollback: emit again from the committed read position (and,
        started from an older savepoint, the entries acked since it: its REWIND_KEY, written by
        executor/savepoints/sources.py). Where it reads goes into the state too (SOURCE_KEY): a
        savepoint reads the group's cut there."""
        self._state = state
        positions = {s: p for s in self.streams if (p := state.get(_POSITION + s)) is not None}
        # what is left to read again: a replay committed before a restart is past the position
        replay = {s: [i for i in cut.get("replay") or () if s not in positions or later_id(positions[s], i) == i
                      and i != positions[s]]
                  for s, cut in (state.get(REWIND_KEY) or {}).items()}
        self._replaying = {s: ids[-1] for s, ids in replay.items() if ids}
        self._fetcher.rewind(self._cursor.rewind(), positions, replay)
        source = {"kind": "redis-stream", "host": self.host, "port": self.port, "db": self.db, "group": self.group,
                  "streams": list(self.streams), "consumer": self._consumer}
        if state.get(SOURCE_KEY) != source:
            state.put(SOURCE_KEY, source)
        if not self._fetcher.started:
            self._fetcher.start()

    def pre_prepare(self, txid: int) -> None:
        """The read position into the state the checkpoint stores (once per checkpoint, not per
        tuple); the entries a start from a savepoint had to read again leave it once emitted."""
        positions = self._cursor.positions()
        for stream, entry_id in positions.items():
            self._state.put(_POSITION + stream, entry_id)
        if self._replaying and all(later_id(positions.get(s), last) == positions.get(s)
                                   for s, last in self._replaying.items()):
            self._replaying = {}
            self._state.delete(REWIND_KEY)

    def deactivate(self) -> None:
        self._fetcher.wake()  # acks out now

    def close(self) -> None:
        self._fetcher.stop(self.timeout + 1.0)
        if self._fetcher.problems:
            self._report_problems()

    def _report_problems(self) -> None:
        problems = self._fetcher.problems
        while problems:
            message = problems.popleft()
            log.error("%s", message)
            self._collector.report_error(RedisStreamError(message))
