"""The rules a topology must meet with its configuration, checked where it is submitted
(Nimbus, and LocalCluster through it) so that a mistake is one error line at submit instead of
workers that fail: windowed bolts (Storm's WindowedBoltExecutor.validate) and checkpoints."""

from __future__ import annotations

from typing import Any, Mapping

from executor.checkpoint.barrier_mode import barrier_only
from executor.checkpoint.wiring import check_checkpointing
from executor.errors import InvalidTopologyError
from executor.structure import TopologyStructure
from executor.tuple import is_system_id
from executor.windowing.spec import (
    MAX_EVENTS_KEY,
    TIMESTAMP_FIELD_KEY,
    check_against_topology,
    is_window_conf,
    window_spec,
)
from executor.worker_plan import component_conf


def check_topology(structure: TopologyStructure, conf: Mapping[str, Any]) -> None:
    """Raise InvalidTopologyError naming the component and the key of the first problem."""
    for cid, comp in sorted(structure.bolts.items()):
        if is_window_conf(comp.conf):
            check_windowed(structure, cid, component_conf(conf, structure, cid))
    check_checkpointing(structure, conf)


def check_windowed(structure: TopologyStructure, cid: str, conf: Mapping[str, Any]) -> None:
    """Storm's WindowedBoltExecutor.validate, and a timestamp field every input carries."""
    spec = window_spec(cid, conf)
    if spec.max_events_in_memory is None:
        # In exactly-once mode a window's tuples are neither timed out nor pending while it holds
        # them: they are in the bolt's checkpointed state (docs/topology-guide.md, "Windows with state").
        if not barrier_only(conf):
            check_against_topology(cid, spec, conf)
    elif not structure.components[cid].conf.get("topology.bolts.stateful"):
        raise InvalidTopologyError(
            f"windowed bolt {cid!r}: {MAX_EVENTS_KEY} (with_max_events_in_memory, with_persistence) is for a "
            f"BaseStatefulWindowedBolt: a plain windowed bolt has no state to keep its window in")
    else:
        # A persistent window acks its tuples once they are in a committed checkpoint, not when they
        # leave it (Storm's PersistentWindowedBoltExecutor.validate): the checkpoint must come first.
        interval = float(conf.get("topology.state.checkpoint.interval.ms", 1000))
        timeout_ms = float(conf.get("topology.message.timeout.secs", 30)) * 1000.0
        if conf.get("topology.enable.message.timeouts", True) and interval >= timeout_ms:
            raise InvalidTopologyError(
                f"windowed bolt {cid!r}: a persistent window's tuples are acked when a checkpoint commits, but "
                f"topology.state.checkpoint.interval.ms ({interval:g}) is not below topology.message.timeout.secs "
                f"({timeout_ms / 1000:g} s)")
    if spec.timestamp_field is None:
        return
    for sub in structure.components[cid].inputs:
        if is_system_id(sub.stream) or sub.source not in structure.components:
            continue
        fields = structure.stream_fields(sub.source, sub.stream)
        if spec.timestamp_field not in fields:
            raise InvalidTopologyError(
                f"windowed bolt {cid!r}: its timestamp field {spec.timestamp_field!r} ({TIMESTAMP_FIELD_KEY}) is not "
                f"a field of its input {sub.source}:{sub.stream} (fields {fields.to_list()})")
