"""`storm-py savepoint`, `savepoints` and `swap`, and `jar submit --from-savepoint`: the steps,
against Nimbus (a `Nimbus` seam: the CLI's session) and the savepoint store
(executor/savepoints/). Decisions are executor/savepoints/plan.py's and keyed.py's; this module
only orders the steps and says, in one line, where a failed swap left things.

A swap (Flink's stop-with-savepoint, then a start from it):
1. refusals first, nothing touched: the topology in exactly-once mode with the redis provider,
   the new code's components able to take the state (plan.py), keyed state checked on a read of
   the running state (keyed.py);
2. deactivate: each stateful spout stops emitting and passes on the next checkpoint's barrier
   behind everything it sent (`quiet_since_txid` in its stats); once that checkpoint commits,
   the topology's state holds every tuple it read and nothing moves any more;
3. kill it (at once: nothing is in flight) and read its state at its last commit;
4. keep that as a savepoint, write it as a new generation of the topology's state (keyed state
   moved to its new tasks), and submit the new code under the same name, which starts from it.
If step 2 times out the old topology is activated again; after step 3 the savepoint is kept
first, so a later failure leaves it to start from (`jar submit --from-savepoint`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from daemons.answers.details import TopologyDetails, records_by_component
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM, QUIET_SINCE
from executor.savepoints.keyed import redistribute
from executor.savepoints.plan import Move, SavepointRefused, Shape, keyed_by, plan_moves
from executor.savepoints.store import Manifest, SavepointStore, Snapshot, new_id
from executor.state.provider import CONFIG_KEY
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

SAVEPOINT_KEY = "topology.state.savepoint"   # the savepoint a topology started from (list, UI)
POLL_SECS = 0.5


class Nimbus(Protocol):
    def call(self, op: str, **args) -> Any: ...


@dataclass(frozen=True)
class Running:
    """What a swap needs of a running topology (from Nimbus's topology_details)."""

    details: TopologyDetails
    shapes: dict[str, Shape]
    tasks: dict[str, list[int]]


def running(nimbus: Nimbus, name: str) -> Running:
    details = TopologyDetails.from_wire(nimbus.call("topology_details", name=name))
    tasks: dict[str, list[int]] = {}
    for e in details.executors:
        tasks.setdefault(e.component, []).extend(range(e.executor[0], e.executor[1] + 1))
    shapes = {c.id: Shape(c.kind, c.tasks, keyed_by([(s.grouping, s.fields) for s in c.inputs
                                                      if s.stream != CHECKPOINT_STREAM]))
              for c in details.components if c.kind in ("spout", "bolt")}
    return Running(details, shapes, {c: sorted(t) for c, t in tasks.items()})


def structure_shapes(structure: TopologyStructure, conf: Mapping[str, Any]) -> dict[str, Shape]:
    """The shapes of a topology about to be submitted (tasks as Nimbus lays them out)."""
    cap = conf.get("topology.max.task.parallelism")
    return {cid: Shape(c.kind, c.tasks if cap is None else min(c.tasks, int(cap)),
                       keyed_by([(s.grouping.kind, tuple(s.grouping.fields.to_list()) if s.grouping.fields else None)
                                 for s in c.inputs if s.stream != CHECKPOINT_STREAM]))
            for cid, c in structure.components.items()}


def store_for(client_conf: Mapping[str, Any], topology_conf: Mapping[str, Any]) -> SavepointStore:
    """The savepoint store in the topology's redis provider: its config as the topology has it,
    completed by the command's own (a password is a secret the topology's stored conf leaves out)."""
    from executor.state.redis_client import RedisSettings

    config = dict(topology_conf.get(CONFIG_KEY) or {})
    for key, value in (client_conf.get(CONFIG_KEY) or {}).items():
        config.setdefault(key, value)
    try:
        return SavepointStore(RedisSettings.from_config(config))
    except (TypeError, ValueError) as exc:
        raise SavepointRefused(f"{CONFIG_KEY}: {exc}") from None


def check_mode(name: str, conf: Mapping[str, Any], which: str) -> None:
    """Refuse a topology whose state cannot be kept by a savepoint."""
    if not conf.get("topology.state.exactly.once"):
        raise SavepointRefused(f"{which} topology {name!r} is not in exactly-once mode "
                               f"(topology.state.exactly.once: true): savepoints are its checkpoints; "
                               f"kill and submit it instead")
    provider = str(conf.get("topology.state.provider") or "memory").lower()
    if provider != "redis":
        raise SavepointRefused(f"{which} topology {name!r} keeps its state with the {provider!r} provider: "
                               f"savepoints need a durable one (topology.state.provider: redis)")


def mixed_hash(conf: Mapping[str, Any]) -> bool:
    return str(conf.get("topology.fields.grouping.hash", "mixed")).lower() != "crc32"


def new_states(manifest: Manifest, snapshot: Snapshot, moves: Mapping[str, Move], new: Mapping[str, Shape],
               mixed: bool) -> dict[str, list[Mapping[bytes, bytes]]]:
    """Per component of the new topology, its tasks' state (index order)."""
    out: dict[str, list[Mapping[bytes, bytes]]] = {}
    for comp, move in moves.items():
        old = snapshot.states.get(comp) or [{} for _ in range(move.old_tasks)]
        if move.redistributed:
            out[comp] = redistribute(comp, new[comp].keyed_by or (), old, move.new_tasks, mixed)
        else:
            out[comp] = list(old)
    return out


def take(store: SavepointStore, name: str, run: Running, started_from: str | None = None) -> tuple[Manifest, Snapshot]:
    """A savepoint of topology `name` (`run`: its layout; its last complete checkpoint), kept."""
    check_mode(name, run.details.conf, "the")
    snap = store.snapshot(name, run.tasks)
    manifest = Manifest(new_id(snap.txid), name, time.time(), snap.txid, run.shapes,
                        tuple(sorted(snap.states)), started_from)
    store.save(manifest, snap)
    return manifest, snap


def _poll(what: str, ready: Callable[[], Any], deadline: float, sleep: Callable[[float], None] = time.sleep):
    while True:
        value = ready()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(what)
        sleep(POLL_SECS)


def stop_at_barrier(nimbus: Nimbus, name: str, deadline: float) -> int:
    """Deactivate `name` and wait until a checkpoint behind every stateful spout's last tuple has
    committed; its txid. On a timeout the topology is activated again and SavepointRefused raised."""
    nimbus.call("deactivate", name=name, note="swap in progress: its spouts stop at a checkpoint; the new code "
                                              "starts from it (storm-py swap)")

    def quiet() -> int | None:
        details = TopologyDetails.from_wire(nimbus.call("topology_details", name=name))
        by_comp = records_by_component(details)
        since = []
        for comp in details.components:
            if comp.kind != "spout" or comp.id == CHECKPOINT_COMPONENT:
                continue
            records = by_comp.get(comp.id) or []
            executors = sum(1 for e in details.executors if e.component == comp.id)
            marks = [r.extra.get(QUIET_SINCE) for r in records]
            if len(records) < executors or any(m is None for m in marks):
                return None
            since += marks
        committed = [r.extra.get("last_committed_txid") for r in by_comp.get(CHECKPOINT_COMPONENT, [])]
        target = max(since, default=0)
        if committed and committed[0] is not None and committed[0] >= target:
            return int(committed[0])
        return None

    try:
        return _poll("the spouts to stop at a checkpoint", quiet, deadline)
    except TimeoutError:
        nimbus.call("activate", name=name)
        raise SavepointRefused(f"topology {name!r}: its spouts did not stop at a committed checkpoint in time "
                               f"(is a checkpoint failing? see its checkpoints in the UI); it was activated "
                               f"again and runs as before") from None


def wait_gone(nimbus: Nimbus, name: str, deadline: float) -> None:
    def gone():
        names = {t["name"] for t in nimbus.call("cluster_info")["topologies"]}
        return True if name not in names else None

    _poll(f"topology {name!r} to be removed", gone, deadline)


def start_from(store: SavepointStore, manifest: Manifest, snapshot: Snapshot, new: Mapping[str, Shape],
               conf: Mapping[str, Any], allow_dropped_state: bool) -> str:
    """Write the savepoint as a new generation of `manifest.topology`'s state shaped for `new`
    (refusals first: nothing written then); the generation's name (the savepoint's id)."""
    moves = plan_moves(manifest.components, set(manifest.stateful), new, allow_dropped_state)
    states = new_states(manifest, snapshot, moves, new, mixed_hash(conf))
    checkpoint = new.get(CHECKPOINT_COMPONENT)
    store.restore(manifest.topology, manifest.id, manifest.txid, states,
                  checkpoint_tasks=checkpoint.tasks if checkpoint else 1)
    return manifest.id


def swap(nimbus: Nimbus, store: SavepointStore, name: str, new: Mapping[str, Shape], new_conf: Mapping[str, Any],
         submit: Callable[[str], str], wait_secs: float, allow_dropped_state: bool = False,
         say: Callable[[str], None] = lambda line: None) -> tuple[Manifest, str]:
    """Stop `name` at a checkpoint and start `submit`'s new code from it; (savepoint, new id)."""
    deadline = time.monotonic() + wait_secs
    run = running(nimbus, name)
    check_mode(name, run.details.conf, "the running")
    check_mode(name, new_conf, "the new")
    # Refusals before anything stops: the plan, and the keyed state's move on a read of it now.
    probe = store.snapshot(name, run.tasks)
    probe_manifest = Manifest("probe", name, time.time(), probe.txid, run.shapes, tuple(sorted(probe.states)))
    moves = plan_moves(run.shapes, set(probe.states), new, allow_dropped_state)
    new_states(probe_manifest, probe, moves, new, mixed_hash(new_conf))
    say(f"stopping topology {name!r} at a checkpoint")
    txid = stop_at_barrier(nimbus, name, deadline)
    nimbus.call("kill", name=name, wait_secs=0)
    try:
        wait_gone(nimbus, name, deadline + 30)
    except TimeoutError:
        raise SavepointRefused(f"topology {name!r} was stopped at checkpoint {txid} and killed, but Nimbus still "
                               f"lists it; nothing else was changed: submit the new code once it is gone") from None
    manifest, snap = take(store, name, run, started_from=run.details.id)
    say(f"topology {name!r} stopped at checkpoint {snap.txid}; kept as savepoint {manifest.id}")
    try:
        start_from(store, manifest, snap, new, new_conf, allow_dropped_state)
        storm_id = submit(manifest.id)
    except Exception as exc:
        raise SavepointRefused(f"{exc} (topology {name!r} is stopped; its state is savepoint {manifest.id}: "
                               f"`storm-py jar submit FILE --name {name} --from-savepoint {manifest.id}` starts "
                               f"from it)") from None
    return manifest, storm_id

