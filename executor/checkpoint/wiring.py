"""How a topology with a stateful bolt is wired for checkpoints (Storm's TopologyBuilder:
maybeAddCheckpointSpout, addCheckPointInputs), and the submit-time rules, as pure functions."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_FIELDS, CHECKPOINT_STREAM
from executor.errors import InvalidTopologyError
from executor.structure import Grouping, StreamSpec, Subscription, TopologyStructure
from executor.tuple import Fields

CHECKPOINT_STREAM_SPEC = StreamSpec(Fields(list(CHECKPOINT_FIELDS)), False)


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
                      if c.conf.get("topology.bolts.stateful") or c.conf.get("topology.spouts.stateful"))
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
    plain = [cid for cid in spouts if not structure.components[cid].conf.get("topology.spouts.stateful")]
    if conf.get("topology.state.exactly.once"):
        if plain:
            raise InvalidTopologyError(
                f"topology.state.exactly.once needs every spout to be a BaseStatefulSpout (its read position "
                f"checkpointed); not: {', '.join(repr(c) for c in plain)}")
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
