"""The `memory` provider (Storm's InMemoryKeyValueStateProvider): the state lives in the task's
process only. Not durable: every open starts a new, empty state, so a restarted task (or
worker) starts from nothing and its prepared and committed values are gone.

A topology started from a directory savepoint (`topology.state.savepoint.dir`, a start
directory of executor/savepoints/files.py) opens each task's state with the savepoint's values
committed at its txid instead, and a reset goes back there rather than to nothing."""

from __future__ import annotations

import logging

from executor.state.kv import KeyValueState, namespace_parts

log = logging.getLogger(__name__)


class InMemoryKeyValueState(KeyValueState):
    """The base class's layers with nothing behind them: the committed cache is the committed
    state (complete from the start), and prepare/commit/rollback never fail."""

    _stores_bytes = False
    durable = False

    def __init__(self, namespace: str, start_dir: str | None = None, index: int | None = None):
        super().__init__(namespace, complete=True)
        self.start_txid: int | None = None   # the savepoint's txid this state started from
        self._start = None
        if start_dir:
            from executor.savepoints.files import start_txid, task_file

            self.start_txid = start_txid(start_dir)
            if self.start_txid is not None:
                component = namespace_parts(namespace)[1]
                self._start = task_file(start_dir, component, 0 if index is None else index)
                self._load()

    def _load(self) -> None:
        from executor.savepoints.files import read_task

        stored = read_task(self._start)[1] if self._start.exists() else {}
        self.load_committed(self.start_txid, stored)
        log.info("state %r: started from the savepoint at txid %d (%d values)", self.namespace, self.start_txid,
                 len(stored))

    def reset(self) -> None:
        super().reset()
        if self._start is not None:
            self._load()
