"""TopologyBuilder, its declarers, and the validated StormTopology it creates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from executor.components import OutputFieldsDeclarer
from executor.errors import InvalidTopologyError
from executor.tuple import DEFAULT_STREAM, Fields, as_fields

GROUPING_KINDS = ("shuffle", "fields", "all", "global", "none", "direct", "local_or_shuffle",
                  "partial_key", "custom")


@dataclass(frozen=True)
class Grouping:
    kind: str
    fields: Fields | None = None
    custom: Any = None


@dataclass(frozen=True)
class Subscription:
    source: str
    stream: str
    grouping: Grouping


@dataclass(frozen=True)
class StreamSpec:
    fields: Fields
    direct: bool


@dataclass
class ComponentSpec:
    id: str
    kind: str  # "spout" or "bolt"
    obj: Any
    parallelism: int
    num_tasks: int | None = None
    conf: dict[str, Any] = field(default_factory=dict)
    inputs: list[Subscription] = field(default_factory=list)
    streams: dict[str, StreamSpec] = field(default_factory=dict)

    @property
    def tasks(self) -> int:
        return self.num_tasks if self.num_tasks is not None else self.parallelism


class StormTopology:
    """A validated topology: components with their streams and subscriptions."""

    def __init__(self, components: dict[str, ComponentSpec]):
        self.components = components
        consumers: dict[tuple[str, str], list[tuple[str, Grouping]]] = {}
        for spec in components.values():
            for sub in spec.inputs:
                consumers.setdefault((sub.source, sub.stream), []).append((spec.id, sub.grouping))
        self._consumers = consumers

    def consumers(self, component_id: str, stream: str) -> list[tuple[str, Grouping]]:
        """(target component, grouping) for every subscriber of a component's stream."""
        return self._consumers.get((component_id, stream), [])

    @property
    def spouts(self) -> dict[str, ComponentSpec]:
        return {k: v for k, v in self.components.items() if v.kind == "spout"}

    @property
    def bolts(self) -> dict[str, ComponentSpec]:
        return {k: v for k, v in self.components.items() if v.kind == "bolt"}

    def stream_fields(self, component_id: str, stream: str) -> Fields:
        return self.components[component_id].streams[stream].fields

    def __repr__(self) -> str:
        return f"StormTopology({list(self.components)})"


class _Declarer:
    def __init__(self, builder: "TopologyBuilder", spec: ComponentSpec):
        self._builder = builder
        self._spec = spec

    def set_num_tasks(self, n: int):
        self._spec.num_tasks = n
        return self

    def add_configuration(self, key: str, value: Any):
        self._spec.conf[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any]):
        self._spec.conf.update(conf)
        return self


class SpoutDeclarer(_Declarer):
    """Returned by set_spout; spouts subscribe to nothing."""


class BoltDeclarer(_Declarer):
    """Returned by set_bolt: subscribe the bolt to other components' streams."""

    def _sub(self, component: str, stream: str, grouping: Grouping):
        self._spec.inputs.append(Subscription(component, stream, grouping))
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("shuffle"))

    def fields_grouping(self, component: str, fields, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("fields", fields=self._fields(fields)))

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("all"))

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("global"))

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("none"))

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("direct"))

    def local_or_shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("local_or_shuffle"))

    def partial_key_grouping(self, component: str, fields, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("partial_key", fields=self._fields(fields)))

    def custom_grouping(self, component: str, grouping: Any, stream: str = DEFAULT_STREAM):
        return self._sub(component, stream, Grouping("custom", custom=grouping))

    def _fields(self, fields) -> Fields:
        try:
            return as_fields(fields)
        except (TypeError, ValueError) as exc:
            raise InvalidTopologyError(f"bolt {self._spec.id!r}: bad grouping fields: {exc}") from None


class TopologyBuilder:
    def __init__(self):
        self._specs: dict[str, ComponentSpec] = {}
        self._problems: list[str] = []

    def set_spout(self, id: str, spout: Any, parallelism_hint: int = 1) -> SpoutDeclarer:
        return SpoutDeclarer(self, self._add(id, "spout", spout, parallelism_hint))

    def set_bolt(self, id: str, bolt: Any, parallelism_hint: int = 1) -> BoltDeclarer:
        return BoltDeclarer(self, self._add(id, "bolt", bolt, parallelism_hint))

    def _add(self, id: str, kind: str, obj: Any, parallelism: int) -> ComponentSpec:
        spec = ComponentSpec(id=id, kind=kind, obj=obj, parallelism=parallelism)
        if id in self._specs:
            self._problems.append(f"duplicate component id {id!r}")
        else:
            self._specs[id] = spec
        return spec

    def create_topology(self) -> StormTopology:
        """Validate everything and return the topology; raises InvalidTopologyError."""
        if self._problems:
            raise InvalidTopologyError(self._problems[0])
        for spec in self._specs.values():
            _check_component(spec)
            spec.streams = _declared_streams(spec)
        for spec in self._specs.values():
            for sub in spec.inputs:
                _check_subscription(spec, sub, self._specs)
        return StormTopology(dict(self._specs))


def _check_component(spec: ComponentSpec) -> None:
    cid = spec.id
    if not isinstance(cid, str) or not cid:
        raise InvalidTopologyError(f"component id must be a non-empty string, got {cid!r}")
    if cid.startswith("__"):
        raise InvalidTopologyError(f"component id {cid!r} starts with '__', which is reserved for system components")
    if not isinstance(spec.parallelism, int) or isinstance(spec.parallelism, bool) or spec.parallelism < 1:
        raise InvalidTopologyError(f"component {cid!r}: parallelism must be an integer >= 1, got {spec.parallelism!r}")
    if spec.num_tasks is not None and (not isinstance(spec.num_tasks, int) or isinstance(spec.num_tasks, bool)
                                      or spec.num_tasks < 1):
        raise InvalidTopologyError(f"component {cid!r}: number of tasks must be an integer >= 1, got {spec.num_tasks!r}")
    needed = ("next_tuple",) if spec.kind == "spout" else ("execute",)
    for attr in needed:
        if not callable(getattr(spec.obj, attr, None)):
            raise InvalidTopologyError(
                f"{spec.kind} {cid!r}: {type(spec.obj).__name__} has no {attr}() method "
                f"(pass an instance of a Spout/Bolt/BasicBolt subclass)")
    if spec.kind == "spout" and spec.inputs:
        raise InvalidTopologyError(f"spout {cid!r} cannot subscribe to streams")
    if not isinstance(spec.conf, dict):
        raise InvalidTopologyError(f"component {cid!r}: configuration must be a dict")
    extra = getattr(spec.obj, "get_component_configuration", None)
    if callable(extra):
        more = extra()
        if more:
            spec.conf = {**dict(more), **spec.conf}
    from cluster_state.config import ConfigError, validate_config

    try:
        validate_config(spec.conf, f"component {cid!r} configuration")
    except ConfigError as exc:
        raise InvalidTopologyError(str(exc)) from None


def _declared_streams(spec: ComponentSpec) -> dict[str, StreamSpec]:
    declarer = OutputFieldsDeclarer(spec.id)
    try:
        spec.obj.declare_output_fields(declarer)
    except InvalidTopologyError:
        raise
    except Exception as exc:  # user code: name the component
        raise InvalidTopologyError(
            f"component {spec.id!r}: declare_output_fields raised {type(exc).__name__}: {exc}") from exc
    for stream in declarer.streams:
        if stream.startswith("__"):
            raise InvalidTopologyError(
                f"component {spec.id!r} declares stream {stream!r}; ids starting with '__' are reserved")
    return {s: StreamSpec(f, d) for s, (f, d) in declarer.streams.items()}


def _check_subscription(spec: ComponentSpec, sub: Subscription, specs: dict[str, ComponentSpec]) -> None:
    where = f"bolt {spec.id!r}"
    source = specs.get(sub.source)
    if source is None:
        raise InvalidTopologyError(f"{where} subscribes to unknown component {sub.source!r}")
    stream = source.streams.get(sub.stream)
    if stream is None:
        raise InvalidTopologyError(
            f"{where} subscribes to stream {sub.stream!r} of {sub.source!r}, which declares only "
            f"{sorted(source.streams)}")
    g = sub.grouping
    if g.kind in ("fields", "partial_key"):
        if len(g.fields) == 0:
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
    if g.kind == "custom" and not callable(getattr(g.custom, "choose_tasks", None)):
        raise InvalidTopologyError(
            f"{where}: custom grouping on {sub.source!r} must have a choose_tasks(task_id, values) method")
