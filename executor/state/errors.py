"""What a state's user sees when a state operation cannot be done: one line each, naming the
state's namespace (and for Redis the server's host:port), never a client library's traceback."""

from __future__ import annotations

from executor.errors import ClearError


class StateError(ClearError):
    """Base of the state layer's errors."""


class StateValueError(StateError, TypeError):
    """A key or value msgpack cannot carry (raised at `put`/`get`/`delete`, naming the key)."""


class StateTransactionError(StateError):
    """The checkpoint protocol was not followed (a second txid prepared before the first was
    committed or rolled back, a commit of a txid other than the prepared one), or the provider
    no longer holds the prepared transaction (a Redis server that lost its data)."""


class StateUnavailableError(StateError):
    """The provider cannot be reached or refused the request (Redis down, wrong password, ...).

    The state is left as it was before the failed call: once the provider is back the same call
    (or a rollback) can be made again."""

    rpc_kind = "unavailable"  # from Nimbus (a swap, a submit from a savepoint): try again once it is back
