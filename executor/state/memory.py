"""The `memory` provider (Storm's InMemoryKeyValueStateProvider): the state lives in the task's
process only. Not durable: every open starts a new, empty state, so a restarted task (or
worker) starts from nothing and its prepared and committed values are gone."""

from __future__ import annotations

from executor.state.kv import KeyValueState


class InMemoryKeyValueState(KeyValueState):
    """The base class's layers with nothing behind them: the committed cache is the committed
    state (complete from the start), and prepare/commit/rollback never fail."""

    _stores_bytes = False
    durable = False

    def __init__(self, namespace: str):
        super().__init__(namespace, complete=True)
