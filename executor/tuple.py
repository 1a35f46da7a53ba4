"""Fields and the Tuple handed to bolts. Hot path: keep these lean (__slots__, no properties in loops)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

SYSTEM_COMPONENT = "__system"
SYSTEM_TASK_ID = -1
TICK_STREAM = "__tick"
DEFAULT_STREAM = "default"
# Prefixes of what the UI and stats hide unless asked (sys=1): Storm's "__" (the acker, ticks) and
# "$" (the checkpoint spout and stream, executor/checkpoint/).
SYSTEM_PREFIXES = ("__", "$")


def is_system_id(name: str) -> bool:
    """Whether a component or stream id is a system one."""
    return name.startswith(SYSTEM_PREFIXES)


class Fields:
    """An ordered list of field names with O(1) name -> index lookup."""

    __slots__ = ("_names", "_index")

    def __init__(self, names: Iterable[str] | "Fields" = ()):
        if isinstance(names, Fields):
            names = names._names
        elif isinstance(names, str):
            raise TypeError(f"Fields takes a list of names, not the string {names!r}")
        names = tuple(names)
        for n in names:
            if not isinstance(n, str) or not n:
                raise TypeError(f"field names must be non-empty strings, got {n!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {list(names)}")
        self._names = names
        self._index = {n: i for i, n in enumerate(names)}

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no field {name!r} in {list(self._names)}") from None

    def select(self, selector: "Fields | Iterable[str]", values: Sequence[Any]) -> list[Any]:
        return [values[self._index[n]] for n in selector]

    def to_list(self) -> list[str]:
        return list(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, i: int) -> str:
        return self._names[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        if isinstance(other, (list, tuple)):
            return list(self._names) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields({list(self._names)!r})"


def as_fields(fields: Iterable[str] | Fields) -> Fields:
    return fields if isinstance(fields, Fields) else Fields(fields)


class Tuple:
    """A tuple received by a bolt.

    anchors_to_ids maps root id -> edge id (None when unanchored); ack_val accumulates the
    XOR of edge ids of tuples anchored to this one, sent to the acker with the ack.
    """

    __slots__ = ("values", "source_task", "source_stream", "source_component", "fields",
                 "anchors_to_ids", "ack_val")

    def __init__(self, values, source_task, source_stream, source_component, fields, anchors_to_ids):
        self.values = values
        self.source_task = source_task
        self.source_stream = source_stream
        self.source_component = source_component
        self.fields = fields
        self.anchors_to_ids = anchors_to_ids
        self.ack_val = 0

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def get(self, field: str) -> Any:
        return self.values[self.fields.index(field)]

    def select(self, fields: Iterable[str] | Fields) -> list[Any]:
        return [self.get(f) for f in fields]

    def is_tick(self) -> bool:
        return self.source_stream == TICK_STREAM and self.source_component == SYSTEM_COMPONENT

    @property
    def message_id(self) -> dict[int, int]:
        return dict(self.anchors_to_ids or {})

    def __repr__(self) -> str:
        return (f"Tuple(source={self.source_component}:{self.source_task}, "
                f"stream={self.source_stream!r}, values={self.values!r})")


TICK_FIELDS = Fields(["rate_secs"])


def make_tick(rate_secs: float) -> Tuple:
    return Tuple([rate_secs], SYSTEM_TASK_ID, TICK_STREAM, SYSTEM_COMPONENT, TICK_FIELDS, None)
