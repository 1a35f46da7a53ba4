"""How a topology with a stateful bolt is wired for checkpoints (Storm's TopologyBuilder:
maybeAddCheckpointSpout, addCheckPointInputs), and the submit-time rules, as pure functions.

The wiring is a function of the structure alone, so that it can follow the topology's mode
where the mode is known: TopologyBuilder wires what is stateful whatever the mode, and Nimbus
and every worker wire a RewindableSpout as a stateful spout once the effective config says
exactly-once (`for_mode`); the package keeps the structure as the builder made it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Collection, Iterable, Mapping

from executor.checkpoint.barrier_mode import barrier_only
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_FIELDS, CHECKPOINT_STREAM
from executor.errors import InvalidTopologyError
from executor.structure import ComponentStructure, Grouping, StreamSpec, Subscription, TopologyStructure
from executor.tuple import Fields

CHECKPOINT_STREAM_SPEC = StreamSpec(Fields(list(CHECKPOINT_FIELDS)), False)
# The marks a component of a topology with checkpoints carries in its conf (set here, and by
# TopologyBuilder for a RewindableSpout).
STATEFUL_BOLT = "topology.bolts.stateful"
STATEFUL_SPOUT = "topology.spouts.stateful"
REWINDABLE_SPOUT = "topology.spouts.rewindable"


def wire_checkpoints(components: Mapping[str, ComponentStructure], stateful: Collection[str]
                     ) -> dict[str, ComponentStructure]:
    """The components with Storm's checkpoint wiring for the `stateful` ones (bolts and spouts):
    the `$checkpointspout` added (last), every bolt declaring `$checkpoint` and reading it from
    its inputs (checkpoint_inputs), each stateful component marked in its conf, each stateful
    spout declaring `$checkpoint` (it passes the steps on in line with its tuples). A structure
    wired before is wired again from its own inputs (its `$checkpoint` subscriptions recomputed)."""
    spouts = [cid for cid, c in components.items() if c.kind == "spout" and cid != CHECKPOINT_COMPONENT]
    plain_spouts = [cid for cid in spouts if cid not in stateful]
    out: dict[str, ComponentStructure] = {}
    for cid, c in components.items():
        if cid == CHECKPOINT_COMPONENT:
            continue
        streams = {**c.streams, CHECKPOINT_STREAM: CHECKPOINT_STREAM_SPEC}
        if c.kind == "bolt":
            own = [sub for sub in c.inputs if sub.stream != CHECKPOINT_STREAM]
            conf = {**c.conf, STATEFUL_BOLT: True} if cid in stateful else c.conf
            c = replace(c, inputs=(*own, *checkpoint_inputs(own, plain_spouts)), conf=conf, streams=streams)
        elif cid in stateful:
            c = replace(c, conf={**c.conf, STATEFUL_SPOUT: True}, streams=streams)
        out[cid] = c
    out[CHECKPOINT_COMPONENT] = ComponentStructure(
        id=CHECKPOINT_COMPONENT, kind="spout", parallelism=1, num_tasks=None, conf={}, inputs=(),
        streams={CHECKPOINT_STREAM: CHECKPOINT_STREAM_SPEC})
    return out


def for_mode(structure: TopologyStructure, conf: Mapping[str, Any]) -> TopologyStructure:
    """The structure to run under `conf`: as given, or, in exactly-once mode, with its
    RewindableSpouts wired as stateful spouts (their read position checkpointed; the bolts
    reading them take the checkpoint from them). Idempotent."""
    if not barrier_only(conf):
        return structure
    comps = structure.components
    rewinding = {cid for cid, c in comps.items() if c.kind == "spout" and c.conf.get(REWINDABLE_SPOUT)
                 and not c.conf.get(STATEFUL_SPOUT)}
    if not rewinding:
        return structure
    stateful = {cid for cid, c in comps.items() if c.conf.get(STATEFUL_BOLT) or c.conf.get(STATEFUL_SPOUT)}
    return TopologyStructure(wire_checkpoints(comps, stateful | rewinding))


def checkpoint_inputs(inputs: Iterable[Subscription], spouts: Iterable[str]) -> list[Subscription]:
    """The `$checkpoint` subscriptions a bolt gets, all-grouped, so that the checkpoint follows
    the data: from each bolt and stateful spout it reads (a stateful spout passes the checkpoint
    on in line with its tuples), from the checkpoint spout for the other spouts it reads."""
    spouts = set(spouts)  # the spouts that do not pass checkpoints on
    out: list[Subscription] = []
    for sub in inputs:
        if sub.stream == CHECKPOINT_STREAM:
            continue
        source = CHECKPOINT_COMPONENT if sub.source in spouts else sub.source
        cp = Subscription(source, CHECKPOINT_STREAM, Grouping("all"))
        if cp not in out:
            out.append(cp)
    return out


def is_checkpointed(structure: TopologyStructure) -> bool:
    return CHECKPOINT_COMPONENT in structure.components


def check_checkpointing(structure: TopologyStructure, conf: Mapping[str, Any]) -> None:
    """Submit-time rules of a topology with checkpoints (one line naming what is wrong)."""
    if not is_checkpointed(structure):
        if conf.get("topology.state.exactly.once"):
            raise InvalidTopologyError(
                "topology.state.exactly.once is set but the topology has no stateful component: its "
                f"spouts ({', '.join(repr(c) for c in sorted(structure.spouts))}) must be BaseStatefulSpouts")
        return
    stateful = sorted(c.id for c in structure.components.values()
                      if c.conf.get(STATEFUL_BOLT) or c.conf.get(STATEFUL_SPOUT))
    what = ", ".join(repr(s) for s in stateful) or "stateful components"
    ackers = conf.get("topology.acker.executors")
    if ackers is not None and int(ackers) == 0:
        raise InvalidTopologyError(
            f"topology has stateful component(s) {what} but topology.acker.executors is 0: checkpoints "
            f"need ackers (as in Storm); remove the setting or set it to 1 or more")
    if not conf.get("topology.enable.message.timeouts", True):
        raise InvalidTopologyError(
            f"topology has stateful component(s) {what} but topology.enable.message.timeouts is false: "
            f"a lost checkpoint would stop every later one")
    spouts = [cid for cid in sorted(structure.spouts) if cid != CHECKPOINT_COMPONENT]
    plain = [cid for cid in spouts if not structure.components[cid].conf.get(STATEFUL_SPOUT)]
    if barrier_only(conf):
        if plain:
            raise InvalidTopologyError(
                f"topology.state.exactly.once needs every spout to rewind to a checkpoint: a BaseStatefulSpout "
                f"or a RewindableSpout (RedisStreamSpout, DirectorySpout); not: {', '.join(repr(c) for c in plain)}")
    elif len(plain) < len(spouts):
        raise InvalidTopologyError(
            f"stateful spout(s) {', '.join(repr(c) for c in spouts if c not in plain)} rewind on a rollback, "
            f"which only topology.state.exactly.once: true does; set it")
    from executor.state.provider import check_provider, probe_provider
    check_provider(conf)
    problem = probe_provider(conf)
    if problem is not None:
        raise InvalidTopologyError(f"topology with stateful component(s) {what}: {problem} "
                                   f"(topology.state.provider.config)")
