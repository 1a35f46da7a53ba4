"""What the UI is given to reach Nimbus: anything with `call(op, **args)`.

`storm-py ui` passes an `RpcClient` (daemons/rpc/client.py); `storm-py local --ui-port` passes
`LocalCalls` over the in-process Nimbus's handlers, which goes through the same encoding and the
same typed errors, so the UI has one data path in both."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from daemons.rpc.protocol import decode_reply, encode_error, encode_ok, error_kind, error_message


class NimbusCalls(Protocol):
    def call(self, op: str, /, **args: Any) -> Any: ...


class LocalCalls:
    """Nimbus's RPC handlers called in this process, with the RPC's encoding and errors."""

    def __init__(self, handlers: Mapping[str, Callable[[dict], Any]], address: str = "local Nimbus"):
        self._handlers = dict(handlers)
        self.addresses = [address]

    def call(self, op: str, /, **args: Any) -> Any:
        handler = self._handlers.get(op)
        if handler is None:
            return decode_reply(encode_error("bad-request", f"unknown operation {op!r}"))
        try:
            result = handler(dict(args))
        except Exception as exc:  # the same typed error the RPC client would raise
            kind = error_kind(exc)
            if kind is None:
                raise
            return decode_reply(encode_error(kind, error_message(exc)))
        return decode_reply(encode_ok(result))
