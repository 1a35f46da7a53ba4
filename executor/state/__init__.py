"""Key-value state for stateful components (Storm's org.apache.storm.state): `KeyValueState`
(kv.py) and its providers, `memory` (memory.py) and `redis` (redis_kv.py), opened by
`open_state` (provider.py)."""

from executor.state.errors import (
    StateError,
    StateTransactionError,
    StateUnavailableError,
    StateValueError,
)
from executor.state.kv import KeyValueState
from executor.state.provider import check_provider, open_state, probe_provider

__all__ = [
    "KeyValueState",
    "StateError",
    "StateTransactionError",
    "StateUnavailableError",
    "StateValueError",
    "check_provider",
    "open_state",
    "probe_provider",
]
