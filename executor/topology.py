"""TopologyBuilder, its declarers, and the validated StormTopology it creates."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from executor.checkpoint.api import BaseStatefulBolt, BaseStatefulSpout, RewindableSpout
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM
from executor.checkpoint.spout import CheckpointSpout
from executor.checkpoint.wiring import REWINDABLE_SPOUT, wire_checkpoints
from executor.checkpoint.wiring import for_mode as wiring_for_mode
from executor.components import OutputFieldsDeclarer
from executor.errors import InvalidTopologyError
from executor.structure import (
    GROUPING_KINDS,
    ComponentStructure,
    Grouping,
    StreamSpec,
    Subscription,
    TopologyStructure,
    check_component,
    check_subscription,
)
from executor.tuple import DEFAULT_STREAM, Fields, as_fields
from executor.windowing.bolt import BaseWindowedBolt
from executor.windowing.spec import LATE_TUPLE_FIELD, window_spec

__all__ = ["GROUPING_KINDS", "Grouping", "StreamSpec", "Subscription", "StormTopology", "TopologyBuilder",
           "SpoutDeclarer", "BoltDeclarer"]

log = logging.getLogger(__name__)


class StormTopology:
    """A validated topology: its structure (plain data) plus the live component instances and
    custom groupings the submitter or a worker built from the topology file."""

    def __init__(self, structure: TopologyStructure, objs: Mapping[str, Any],
                 custom_groupings: Mapping[tuple[str, int], Any] | None = None):
        self.structure = structure
        self.objs = dict(objs)
        # (subscribing component, index in its inputs) -> the user's CustomStreamGrouping
        self.custom_groupings = dict(custom_groupings or {})

    @property
    def components(self) -> dict[str, ComponentStructure]:
        return self.structure.components

    def consumers(self, component_id: str, stream: str) -> list[tuple[str, Grouping]]:
        return self.structure.consumers(component_id, stream)

    @property
    def spouts(self) -> dict[str, ComponentStructure]:
        return self.structure.spouts

    @property
    def bolts(self) -> dict[str, ComponentStructure]:
        return self.structure.bolts

    @property
    def cycles(self) -> list[str]:
        return self.structure.cycles

    @property
    def cycle_members(self) -> frozenset[str]:
        return self.structure.cycle_members

    def stream_fields(self, component_id: str, stream: str) -> Fields:
        return self.structure.stream_fields(component_id, stream)

    def with_objs(self, replacements: Mapping[str, Any]) -> "StormTopology":
        """The same structure with some component instances replaced (e.g. mock spouts)."""
        return StormTopology(self.structure, {**self.objs, **replacements}, self.custom_groupings)

    def __repr__(self) -> str:
        return f"StormTopology({list(self.components)})"


@dataclass
class _BuildSpec:
    """A component while the builder collects it (mutable; becomes a ComponentStructure)."""

    id: str
    kind: str
    obj: Any
    parallelism: int
    num_tasks: int | None = None
    conf: dict[str, Any] = field(default_factory=dict)
    inputs: list[tuple[Subscription, Any]] = field(default_factory=list)  # (subscription, custom obj)


class _Declarer:
    def __init__(self, builder: "TopologyBuilder", spec: _BuildSpec):
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

    def _sub(self, component: str, stream: str, grouping: Grouping, custom: Any = None):
        self._spec.inputs.append((Subscription(component, stream, grouping), custom))
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
        return self._sub(component, stream, Grouping("custom"), custom=grouping)

    def _fields(self, fields) -> Fields:
        try:
            return as_fields(fields)
        except (TypeError, ValueError) as exc:
            raise InvalidTopologyError(f"bolt {self._spec.id!r}: bad grouping fields: {exc}") from None


class TopologyBuilder:
    def __init__(self):
        self._specs: dict[str, _BuildSpec] = {}
        self._problems: list[str] = []

    def set_spout(self, id: str, spout: Any, parallelism_hint: int = 1) -> SpoutDeclarer:
        return SpoutDeclarer(self, self._add(id, "spout", spout, parallelism_hint))

    def set_bolt(self, id: str, bolt: Any, parallelism_hint: int = 1) -> BoltDeclarer:
        return BoltDeclarer(self, self._add(id, "bolt", bolt, parallelism_hint))

    def _add(self, id: str, kind: str, obj: Any, parallelism: int) -> _BuildSpec:
        spec = _BuildSpec(id=id, kind=kind, obj=obj, parallelism=parallelism)
        if id in self._specs:
            self._problems.append(f"duplicate component id {id!r}")
        else:
            self._specs[id] = spec
        return spec

    def create_topology(self) -> StormTopology:
        """Validate everything and return the topology; raises InvalidTopologyError."""
        if self._problems:
            raise InvalidTopologyError(self._problems[0])
        specs = self._specs
        # Storm's TopologyBuilder adds the checkpoint wiring when a component is stateful
        # (executor/checkpoint/wiring.py); a RewindableSpout is wired so only in exactly-once mode,
        # known at submit (for_mode).
        stateful = {cid for cid, spec in specs.items()
                    if isinstance(spec.obj, BaseStatefulBolt if spec.kind == "bolt" else BaseStatefulSpout)}
        if stateful and CHECKPOINT_COMPONENT in specs:
            raise InvalidTopologyError(f"component id {CHECKPOINT_COMPONENT!r} is reserved for the checkpoint spout "
                                       f"of a topology with stateful components")
        components: dict[str, ComponentStructure] = {}
        for spec in specs.values():
            _check_instance(spec)
            streams = _declared_streams(spec)
            if isinstance(spec.obj, BaseWindowedBolt):
                _windowed_streams(spec, streams)
            if stateful and (spec.kind == "bolt" or spec.id in stateful) and CHECKPOINT_STREAM in streams:
                raise InvalidTopologyError(f"{spec.kind} {spec.id!r} declares stream {CHECKPOINT_STREAM!r}, which is "
                                           f"reserved for checkpoints in a topology with stateful bolts")
            conf = _component_conf(spec)
            if spec.kind == "spout" and isinstance(spec.obj, RewindableSpout):
                conf[REWINDABLE_SPOUT] = True
            components[spec.id] = ComponentStructure(
                id=spec.id, kind=spec.kind, parallelism=spec.parallelism, num_tasks=spec.num_tasks,
                conf=conf, inputs=tuple(sub for sub, _custom in spec.inputs), streams=streams)
        objs = {cid: spec.obj for cid, spec in specs.items()}
        if stateful:
            components = wire_checkpoints(components, stateful)
            objs[CHECKPOINT_COMPONENT] = CheckpointSpout()
        for comp in components.values():
            check_component(comp)
        customs: dict[tuple[str, int], Any] = {}
        for comp in components.values():
            custom_of = dict(enumerate(c for _s, c in specs[comp.id].inputs)) if comp.id in specs else {}
            for i, sub in enumerate(comp.inputs):
                check_subscription(comp, sub, components)
                if sub.grouping.kind == "custom":
                    custom = custom_of.get(i)
                    if not callable(getattr(custom, "choose_tasks", None)):
                        raise InvalidTopologyError(
                            f"bolt {comp.id!r}: custom grouping on {sub.source!r} must have a "
                            f"choose_tasks(task_id, values) method")
                    customs[(comp.id, i)] = custom
        structure = TopologyStructure(components)
        for cycle in structure.cycles:
            log.warning("topology has a cycle: %s. Tuples can go round it, but with every queue on it "
                        "full it deadlocks unless topology.max.spout.pending bounds the tuples in flight",
                        cycle)
        return StormTopology(structure, objs, customs)


def for_mode(topology: StormTopology, conf: Mapping[str, Any]) -> StormTopology:
    """The topology to run under its effective `conf` (Nimbus's, a worker's): its RewindableSpouts
    wired as stateful spouts in exactly-once mode (executor/checkpoint/wiring.py, for_mode)."""
    structure = wiring_for_mode(topology.structure, conf)
    if structure is topology.structure:
        return topology
    objs = topology.objs if CHECKPOINT_COMPONENT in topology.objs else {**topology.objs,
                                                                       CHECKPOINT_COMPONENT: CheckpointSpout()}
    # user inputs keep their places (checkpoint subscriptions come after them): customs stay valid
    return StormTopology(structure, objs, topology.custom_groupings)


def _check_instance(spec: _BuildSpec) -> None:
    """The rules that need the live instance (the rest are in executor.structure)."""
    cid = spec.id
    if not isinstance(cid, str) or not cid:
        raise InvalidTopologyError(f"component id must be a non-empty string, got {cid!r}")
    if isinstance(spec.obj, type):  # set_bolt("x", MyBolt): every method call would fail unbound
        raise InvalidTopologyError(
            f"{spec.kind} {cid!r}: got the class {spec.obj.__name__}; pass an instance: "
            f"{spec.obj.__name__}()")
    needed = ("next_tuple",) if spec.kind == "spout" else ("execute",)
    for attr in needed:
        if not callable(getattr(spec.obj, attr, None)):
            raise InvalidTopologyError(
                f"{spec.kind} {cid!r}: {type(spec.obj).__name__} has no {attr}() method "
                f"(pass an instance of a Spout/Bolt/BasicBolt subclass)")
    if not isinstance(spec.conf, dict):
        raise InvalidTopologyError(f"component {cid!r}: configuration must be a dict")


def _component_conf(spec: _BuildSpec) -> dict[str, Any]:
    """add_configuration() entries over the instance's get_component_configuration()."""
    extra = getattr(spec.obj, "get_component_configuration", None)
    more = extra() if callable(extra) else None
    if more and not isinstance(more, Mapping):
        raise InvalidTopologyError(f"component {spec.id!r}: get_component_configuration() must return a dict, "
                                   f"got {type(more).__name__}")
    return {**dict(more or {}), **spec.conf}


def _windowed_streams(spec: _BuildSpec, streams: dict[str, StreamSpec]) -> None:
    """A windowed bolt's settings, checked now with its id; its late tuple stream declared."""
    ws = window_spec(spec.id, _component_conf(spec))
    if ws.late_stream is not None:
        declared = streams.get(ws.late_stream)
        if declared is None:
            streams[ws.late_stream] = StreamSpec(Fields([LATE_TUPLE_FIELD]), False)
        elif declared.fields.to_list() != [LATE_TUPLE_FIELD]:
            raise InvalidTopologyError(f"windowed bolt {spec.id!r}: its late tuple stream {ws.late_stream!r} must have "
                                       f"the one field {LATE_TUPLE_FIELD!r}, got {declared.fields.to_list()}")


def _declared_streams(spec: _BuildSpec) -> dict[str, StreamSpec]:
    declarer = OutputFieldsDeclarer(spec.id)
    try:
        spec.obj.declare_output_fields(declarer)
    except InvalidTopologyError:
        raise
    except Exception as exc:  # user code: name the component
        raise InvalidTopologyError(
            f"component {spec.id!r}: declare_output_fields raised {type(exc).__name__}: {exc}") from exc
    return {s: StreamSpec(f, d) for s, (f, d) in declarer.streams.items()}


def copy_for_task(obj: Any, component_id: str) -> Any:
    """The instance one task runs: a deep copy of the submitted one, as if deserialized (Storm
    serializes each component). Checked by the submitter too, so that a component holding a
    lock, socket or client is refused at submit instead of crash-looping its workers."""
    try:
        return copy.deepcopy(obj)
    except Exception as exc:
        raise InvalidTopologyError(
            f"component {component_id!r}: its instance cannot be copied per task ({type(exc).__name__}: {exc}); "
            f"create sockets, locks and clients in open()/prepare(), not in __init__") from exc
