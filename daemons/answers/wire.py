"""Reading one map of an answer off the wire, naming where a missing key or a malformed part is
(pure)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


class AnswerError(ValueError):
    """A Nimbus answer without a key its definition requires, or with a part of the wrong form."""


class WireMap:
    """One map of an answer; `where` names it in errors (e.g. "topology_details.executors[3]")."""

    __slots__ = ("data", "where")

    def __init__(self, data: Any, where: str):
        if not isinstance(data, Mapping):
            raise AnswerError(f"{where}: expected a map, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def req(self, key: str) -> Any:
        if key not in self.data:
            raise AnswerError(f"{self.where}: no key {key!r} (it has {', '.join(sorted(map(str, self.data))) or 'none'})")
        return self.data[key]

    def opt(self, key: str, default: Any = None) -> Any:
        """A key older answers or test fixtures may leave out."""
        return self.data.get(key, default)

    def mapping(self, key: str) -> Mapping[str, Any]:
        """A map kept as it is (a topology's conf)."""
        return WireMap(self.req(key), f"{self.where}.{key}").data

    def seq(self, key: str, read: Callable[[Any, str], T], required: bool = True) -> tuple[T, ...]:
        """A list of parts, each read by `read(part, where)`; an optional one absent or null is ()."""
        return parts(self.req(key) if required else self.data.get(key) or (), f"{self.where}.{key}", read)

    def table(self, key: str, read: Callable[[Any, str], T], required: bool = True) -> dict[str, T]:
        """A map of parts by string key; an optional one absent or null is {}."""
        value = WireMap(self.req(key) if required else self.data.get(key) or {}, f"{self.where}.{key}")
        return {k: read(v, f"{value.where}[{k!r}]") for k, v in value.data.items()}


def parts(value: Any, where: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    """A list on the wire, each item read by `read(item, where)`."""
    if not isinstance(value, (list, tuple)):
        raise AnswerError(f"{where}: expected a list, got {type(value).__name__}")
    return tuple(read(v, f"{where}[{i}]") for i, v in enumerate(value))


def fixed(value: Any, where: str, size: int) -> tuple:
    """A list of `size` items on the wire (an executor's [start, end], a restart's [id, port, n])."""
    if not isinstance(value, (list, tuple)) or len(value) != size:
        raise AnswerError(f"{where}: expected a list of {size}, got {value!r}")
    return tuple(value)
