"""A topology's structure as plain data: components, streams, subscriptions, parallelism, conf.

This is the one description that validation, task layout and scheduling consume. It holds no
user objects, so Nimbus can validate and schedule a submitted topology from its package
manifest without importing user code; the live component instances stay with the
`StormTopology` a worker (or the submitter) builds from the topology file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from executor.errors import InvalidTopologyError
from executor.graph import cycles, describe_cycle
from executor.tuple import Fields

GROUPING_KINDS = ("shuffle", "fields", "all", "global", "none", "direct", "local_or_shuffle",
                  "partial_key", "custom")
COMPONENT_KINDS = ("spout", "bolt")
STRUCTURE_VERSION = 1


@dataclass(frozen=True)
class Grouping:
    kind: str
    fields: Fields | None = None


@dataclass(frozen=True)
class Subscription:
    source: str
    stream: str
    grouping: Grouping


@dataclass(frozen=True)
class StreamSpec:
    fields: Fields
    direct: bool


@dataclass(frozen=True)
class ComponentStructure:
    id: str
    kind: str  # "spout" or "bolt"
    parallelism: int
    num_tasks: int | None
    conf: Mapping[str, Any]
    inputs: tuple[Subscription, ...]
    streams: Mapping[str, StreamSpec]

    @property
    def tasks(self) -> int:
        return self.num_tasks if self.num_tasks is not None else self.parallelism


class TopologyStructure:
    """Components by id, with the derived consumer index and the stream cycles."""

    def __init__(self, components: Mapping[str, ComponentStructure]):
        self.components = dict(components)
        consumers: dict[tuple[str, str], list[tuple[str, Grouping, int]]] = {}
        for spec in self.components.values():
            for i, sub in enumerate(spec.inputs):
                consumers.setdefault((sub.source, sub.stream), []).append((spec.id, sub.grouping, i))
        self._consumers = consumers
        edges: dict[str, set[str]] = {cid: set() for cid in self.components}
        for (source, _stream), subs in consumers.items():
            edges.setdefault(source, set()).update(target for target, _g, _i in subs)
        found = cycles(edges)
        self.cycles = [describe_cycle(c, edges) for c in found]
        self.cycle_members = frozenset(cid for c in found for cid in c)

    def consumers(self, component_id: str, stream: str) -> list[tuple[str, Grouping]]:
        """(target component, grouping) for every subscriber of a component's stream."""
        return [(t, g) for t, g, _i in self._consumers.get((component_id, stream), [])]

    def subscriptions(self, component_id: str, stream: str) -> list[tuple[str, Grouping, int]]:
        """(target component, grouping, index in the target's inputs) for every subscriber."""
        return self._consumers.get((component_id, stream), [])

    @property
    def spouts(self) -> dict[str, ComponentStructure]:
        return {k: v for k, v in self.components.items() if v.kind == "spout"}

    @property
    def bolts(self) -> dict[str, ComponentStructure]:
        return {k: v for k, v in self.components.items() if v.kind == "bolt"}

    def stream_fields(self, component_id: str, stream: str) -> Fields:
        return self.components[component_id].streams[stream].fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopologyStructure) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.components)))

    def __repr__(self) -> str:
        return f"TopologyStructure({sorted(self.components)})"

    # ---- plain-data form (the package manifest) ----
    def to_dict(self) -> dict[str, Any]:
        return {"version": STRUCTURE_VERSION,
                "components": {cid: _component_to_dict(c) for cid, c in sorted(self.components.items())}}

    @classmethod
    def from_dict(cls, data: Any, source: str = "topology structure") -> "TopologyStructure":
        """Rebuild from to_dict()'s form; a malformed document raises InvalidTopologyError naming
        the element. Call validate_structure() for the topology rules."""
        d = _Reader(source)
        data = d.mapping(data, "")
        version = data.get("version")
        if version != STRUCTURE_VERSION:
            raise InvalidTopologyError(f"{source}: structure version {version!r} is not supported "
                                       f"(this storm-py reads version {STRUCTURE_VERSION})")
        comps = d.mapping(data.get("components"), "components")
        out = {}
        for cid, c in comps.items():
            where = f"components.{cid}"
            c = d.mapping(c, where)
            streams = {}
            for sid, s in d.mapping(c.get("streams", {}), f"{where}.streams").items():
                s = d.mapping(s, f"{where}.streams.{sid}")
                streams[sid] = StreamSpec(Fields(d.strings(s.get("fields"), f"{where}.streams.{sid}.fields")),
                                          d.boolean(s.get("direct", False), f"{where}.streams.{sid}.direct"))
            inputs = []
            for i, sub in enumerate(d.sequence(c.get("inputs", []), f"{where}.inputs")):
                w = f"{where}.inputs[{i}]"
                sub = d.mapping(sub, w)
                fields = sub.get("fields")
                inputs.append(Subscription(
                    d.string(sub.get("source"), f"{w}.source"), d.string(sub.get("stream"), f"{w}.stream"),
                    Grouping(d.string(sub.get("grouping"), f"{w}.grouping"),
                             None if fields is None else Fields(d.strings(fields, f"{w}.fields")))))
            out[cid] = ComponentStructure(
                id=cid, kind=d.string(c.get("kind"), f"{where}.kind"),
                parallelism=c.get("parallelism"), num_tasks=c.get("num_tasks"),
                conf=d.mapping(c.get("conf", {}), f"{where}.conf"), inputs=tuple(inputs), streams=streams)
        return cls(out)


def _component_to_dict(c: ComponentStructure) -> dict[str, Any]:
    return {
        "kind": c.kind,
        "parallelism": c.parallelism,
        "num_tasks": c.num_tasks,
        "conf": _plain(dict(c.conf)),
        "streams": {sid: {"fields": s.fields.to_list(), "direct": s.direct} for sid, s in sorted(c.streams.items())},
        "inputs": [{"source": s.source, "stream": s.stream, "grouping": s.grouping.kind,
                    "fields": None if s.grouping.fields is None else s.grouping.fields.to_list()}
                   for s in c.inputs],
    }


def _plain(value: Any) -> Any:
    """Tuples become lists, so the form survives a JSON or msgpack round trip unchanged."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def _bad(self, where: str, what: str, value: Any) -> InvalidTopologyError:
        return InvalidTopologyError(f"{self.source}: {where or 'document'} must be {what}, got {value!r:.80}")

    def mapping(self, v: Any, where: str) -> dict:
        if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
            raise self._bad(where, "a mapping with string keys", v)
        return v

    def sequence(self, v: Any, where: str) -> list:
        if not isinstance(v, (list, tuple)):
            raise self._bad(where, "a list", v)
        return list(v)

    def string(self, v: Any, where: str) -> str:
        if not isinstance(v, str):
            raise self._bad(where, "a string", v)
        return v

    def strings(self, v: Any, where: str) -> list[str]:
        return [self.string(x, f"{where}[{i}]") for i, x in enumerate(self.sequence(v, where))]

    def boolean(self, v: Any, where: str) -> bool:
        if not isinstance(v, bool):
            raise self._bad(where, "true or false", v)
        return v


# ---- validation: the rules create_topology() applies, on data alone ----
_BAD_NAME_CHARS = "/.:\\"


MAX_NAME_BYTES = 128  # the topology id (name-N-time) is a directory name: 255 bytes at most


def validate_topology_name(name: Any) -> None:
    """Storm's rule: a non-empty name without / . : \\ (it becomes part of paths and ids); and,
    as it names directories, no control characters and at most MAX_NAME_BYTES bytes."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidTopologyError(f"topology name must be a non-empty string, got {name!r}")
    bad = [c for c in _BAD_NAME_CHARS if c in name]
    if bad:
        raise InvalidTopologyError(
            f"topology name {name!r} contains {' '.join(repr(c) for c in bad)}; names cannot contain / . : \\")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidTopologyError(f"topology name {name!r} contains a control character; names are one line")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise InvalidTopologyError(f"topology name {name[:40]!r}... is {size} bytes long; names have at most "
                                   f"{MAX_NAME_BYTES} (they become part of directory names)")



def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def check_component(c: ComponentStructure) -> None:
    """The rules about one component that need no other component."""
    cid = c.id
    if not isinstance(cid, str) or not cid:
        raise InvalidTopologyError(f"component id must be a non-empty string, got {cid!r}")
    if cid.startswith("__"):
        raise InvalidTopologyError(f"component id {cid!r} starts with '__', which is reserved for system components")
    if c.kind not in COMPONENT_KINDS:
        raise InvalidTopologyError(f"component {cid!r}: kind must be spout or bolt, got {c.kind!r}")
    if not _is_count(c.parallelism):
        raise InvalidTopologyError(f"component {cid!r}: parallelism must be an integer >= 1, got {c.parallelism!r}")
    if c.num_tasks is not None and not _is_count(c.num_tasks):
        raise InvalidTopologyError(f"component {cid!r}: number of tasks must be an integer >= 1, got {c.num_tasks!r}")
    if c.kind == "spout" and c.inputs:
        raise InvalidTopologyError(f"spout {cid!r} cannot subscribe to streams")
    if not isinstance(c.conf, Mapping):
        raise InvalidTopologyError(f"component {cid!r}: configuration must be a dict")
    from cluster_state.config import ConfigError, validate_config

    try:
        validate_config(c.conf, f"component {cid!r} configuration")
    except ConfigError as exc:
        raise InvalidTopologyError(str(exc)) from None
    for stream in c.streams:
        if not isinstance(stream, str) or not stream:
            raise InvalidTopologyError(f"component {cid!r} declares a stream id {stream!r}; ids are non-empty strings")
        if stream.startswith("__"):
            raise InvalidTopologyError(
                f"component {cid!r} declares stream {stream!r}; ids starting with '__' are reserved")


def check_subscription(c: ComponentStructure, sub: Subscription,
                       components: Mapping[str, ComponentStructure]) -> None:
    where = f"bolt {c.id!r}"
    source = components.get(sub.source)
    if source is None:
        raise InvalidTopologyError(f"{where} subscribes to unknown component {sub.source!r}")
    stream = source.streams.get(sub.stream)
    if stream is None:
        raise InvalidTopologyError(
            f"{where} subscribes to stream {sub.stream!r} of {sub.source!r}, which declares only "
            f"{sorted(source.streams)}")
    g = sub.grouping
    if g.kind not in GROUPING_KINDS:
        raise InvalidTopologyError(f"{where}: unknown grouping {g.kind!r} on {sub.source!r} "
                                   f"(one of {', '.join(GROUPING_KINDS)})")
    if g.kind in ("fields", "partial_key"):
        if not g.fields:
            raise InvalidTopologyError(f"{where}: {g.kind} grouping on {sub.source!r} needs at least one field")
        for f in g.fields:
            if f not in stream.fields:
                raise InvalidTopologyError(
                    f"{where}: {g.kind} grouping on field {f!r}, but stream {sub.stream!r} of "
                    f"{sub.source!r} declares only {stream.fields.to_list()}")
    if g.kind == "direct" and not stream.direct:
        raise InvalidTopologyError(
            f"{where}: direct grouping on stream {sub.stream!r} of {sub.source!r}, which is not declared direct")
    if g.kind != "direct" and stream.direct:
        raise InvalidTopologyError(
            f"{where}: {g.kind} grouping on stream {sub.stream!r} of {sub.source!r}, which is declared "
            f"direct (use direct_grouping)")


def validate_structure(structure: TopologyStructure) -> None:
    """Every structural rule; raises InvalidTopologyError naming the culprit."""
    comps = structure.components
    for cid, c in comps.items():
        if cid != c.id:
            raise InvalidTopologyError(f"component {cid!r} is recorded with id {c.id!r}")
        check_component(c)
    for c in comps.values():
        for sub in c.inputs:
            check_subscription(c, sub, comps)

