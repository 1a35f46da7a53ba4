"""The Redis stream spout's per-tuple path: the next entry to emit, and an ack.

Compiled with the per-tuple core (stream_cursor.pxd; executor/core/__init__.py lists it; this
file is its pure twin): the spout's next_tuple and ack run once per tuple on the worker's
executor thread, which the whole topology shares (bench/sources.py). The decisions stay in
StreamLedger (stream_ledger.py); this only moves entries from the fetcher's batches to the
collector and acks back to the fetcher (executor/spouts/stream_fetcher.py).
"""

from __future__ import annotations

from executor.spouts.stream_fetcher import GONE, NEW, REWOUND
from executor.spouts.stream_ledger import StreamLedger, UnmappableEntry, later_id, map_fields

DEFAULT_STREAM = "default"


class StreamCursor:
    """Owned by the executor thread. `emit` is the spout collector's emit; `on_problems` is
    called when the fetcher has queued problem lines (the spout reports them)."""

    def __init__(self, ledger: StreamLedger, fetcher, emit, streams: tuple, wake_at: int, on_problems):
        self.ledger = ledger
        self.fetcher = fetcher
        self.ready = fetcher.ready
        self.acks = fetcher.acks
        self.problems = fetcher.problems
        self.on_problems = on_problems
        self.emit = emit
        self.stream0 = streams[0]
        self.multi = len(streams) > 1
        self.wake_at = wake_at
        self.taken = 0          # entries taken from the fetcher's batches (it counts `offered`)
        self.batch = []         # the entries of the batch being emitted, from `pos` on
        self.pos = 0
        self.kind = NEW
        self.stream = streams[0]
        # exactly-once: per stream, the newest entry of the batches emitted (a batch is in id
        # order); and the number of the rewind whose REWOUND item the cursor waits for (0: none)
        self.last = {}
        self.rewinds = 0
        self.awaiting = 0

    def budget(self) -> int:
        """What the spout could take now: the ledger's free slots less the entries handed over
        and not yet taken (the fetcher thread reads it: int reads, safe under the GIL)."""
        return self.ledger.budget(self.fetcher.offered - self.taken)

    def next_tuple(self) -> bool:
        """Emit the next entry (one a call, as Storm asks); whether one was emitted."""
        if self.problems:
            self.on_problems()
        ledger = self.ledger
        while True:
            if self.pos >= len(self.batch):
                if self.batch:
                    self.last[self.stream] = self.batch[-1][0]
                    self.batch = []
                    self.pos = 0
                if not self.ready:
                    return False
                fetched = self.ready.popleft()
                if self.awaiting:  # what the fetcher had before the rewind: the rolled-back past
                    if fetched[0] == REWOUND and fetched[1] == self.awaiting:
                        self.awaiting = 0
                    else:
                        self.taken += len(fetched[2])
                    continue
                self.kind, self.stream, self.batch = fetched
                self.pos = 0
                if not self.ready:
                    self.fetcher.wake()  # read ahead before this batch runs out
                continue
            entry = self.batch[self.pos]
            self.pos += 1
            self.taken += 1
            entry_id = entry[0]
            key = (self.stream, entry_id)
            if self.kind == NEW:
                if not ledger.take(key):
                    continue  # claimed back while already in flight here
            elif self.kind == GONE:
                ledger.forget(key)
                continue
            elif key not in ledger.in_flight:  # a replay of an entry given up on meanwhile
                continue
            try:
                fields = map_fields(entry[1])
            except UnmappableEntry as exc:
                ledger.forget(key)
                self.fetcher.dead.append((key, entry[1], f"its fields cannot be mapped to text: {exc}"))
                self.fetcher.wake()
                continue
            self.emit([entry_id, fields], DEFAULT_STREAM, key if self.multi else entry_id)
            return True

    def ack(self, msg_id) -> None:
        key = self.key(msg_id)
        if self.ledger.acked(key):
            self.acks.append(key)  # sent with the next read (stream_fetcher.py)
            if self.budget() == self.wake_at:  # acks free one slot each: it passes this once
                self.fetcher.wake()

    def rewind(self) -> int:
        """Exactly-once, at the spout's init_state: forget what was emitted or read ahead (the
        spout emits again from its committed position); the number the fetcher's REWOUND item
        will carry, after which its batches are the rewound reads."""
        self.taken += len(self.batch) - self.pos
        self.batch = []
        self.pos = 0
        self.ledger.clear()
        self.last = {}
        self.rewinds += 1
        self.awaiting = self.rewinds
        return self.rewinds

    def positions(self) -> dict:
        """Exactly-once: per stream, the id of the newest entry emitted since the last rewind."""
        last = dict(self.last)
        if self.pos > 0:
            last[self.stream] = later_id(last.get(self.stream), self.batch[self.pos - 1][0])
        return last

    def key(self, msg_id) -> tuple:
        """The (stream, entry id) of a message id."""
        return tuple(msg_id) if self.multi else (self.stream0, msg_id)
