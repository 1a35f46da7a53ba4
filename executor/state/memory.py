"""The `memory` provider (Storm's InMemoryKeyValueStateProvider): the state lives in the task's
process only. Not durable: every open starts a new, empty state, so a restarted task (or
worker) starts from nothing and its prepared and committed values are gone.

A topology started from a directory savepoint (`topology.state.savepoint.dir`, a start
directory, executor/state/task_files.py) opens each task's state with the savepoint's values
committed at its txid instead, and a reset goes back there rather than to nothing."""

from __future__ import annotations

import logging

from executor.state.kv import KeyValueState, namespace_parts
from executor.state.task_files import read_task, start_txid, task_file

log = logging.getLogger(__name__)


class InMemoryKeyValueState(KeyValueState):
    """The base class's layers with nothing behind them: the committed cache is the committed
    state (complete from the start), and prepare/commit/rollback never fail."""

    _stores_bytes = False
    durable = False

    def __init__(self, namespace: str, start_dir: str | None = None):
        super().__init__(namespace, complete=True)
        self.start_txid: int | None = None   # the savepoint's txid this state started from
        self._start = None
        if start_dir:
            self.start_txid = start_txid(start_dir)
            if self.start_txid is not None:
                _topology, component, index = namespace_parts(namespace)
                self._start = task_file(start_dir, component, 0 if index is None else index)
                self._load()

    def _load(self) -> None:
        stored = read_task(self._start)[1] if self._start.exists() else {}
        self.load_committed(self.start_txid, stored)
        log.info("state %r: started from the savepoint at txid %d (%d values)", self.namespace, self.start_txid,
                 len(stored))

    def reset(self) -> None:
        super().reset()
        if self._start is not None:
            self._load()
