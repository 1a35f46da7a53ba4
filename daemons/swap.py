"""`storm-py savepoint`, `savepoints` and `swap`, and `jar submit --from-savepoint`: the steps,
against Nimbus (a `Nimbus` seam: the CLI's session) and the savepoint store
(executor/savepoints/). Decisions are executor/savepoints/plan.py's and keyed.py's; this module
only orders the steps and says, in one line, where a failed swap left things.

A swap (Flink's stop-with-savepoint, then a start from it):
1. refusals first, nothing touched: the topology in exactly-once mode, the new code's
   components able to take the state (plan.py) and, with Redis, keyed state checked on a read
   of the running state (keyed.py);
2. deactivate: each stateful spout stops emitting and passes on the next checkpoint's barrier
   behind everything it sent (`quiet_since_txid` in its stats); once that checkpoint commits,
   the topology's state holds every tuple it read and nothing moves any more;
3. keep that state as a savepoint: with Redis, kill the topology and read it at its last commit;
   with the memory provider, where it lives only in the workers, have them write it to the
   directory first (take_to_dir), check its move, then kill;
4. write it as the state the new code starts from (keyed state moved to its new tasks) and
   submit the new code under the same name.
If step 2 times out, or (memory) the state cannot move, the old topology is activated again;
once it is killed the savepoint is kept, so a later failure leaves it to start from (`jar submit
--from-savepoint`)."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from daemons.answers.details import TopologyDetails, records_by_component
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM, QUIET_SINCE
from executor.savepoints import SAVEPOINT_DIR_KEY, SAVEPOINT_KEY, files
from executor.savepoints.files import DirectoryStore
from executor.savepoints.keyed import redistribute
from executor.savepoints.plan import Move, SavepointRefused, Shape, keyed_by, plan_moves
from executor.savepoints.store import Manifest, SavepointStore, Snapshot, last_committed, new_id, record_of
from executor.state.provider import CONFIG_KEY
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

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


def store_for(client_conf: Mapping[str, Any], topology_conf: Mapping[str, Any],
              directory: str | None = None) -> SavepointStore | DirectoryStore:
    """Where the savepoints are: `directory` (the memory provider's, --dir), else the topology's
    Redis, its config as the topology has it completed by the command's own (a password is a
    secret the topology's stored conf leaves out)."""
    from executor.state.redis_client import RedisSettings

    if directory:
        return DirectoryStore(directory)
    config = dict(topology_conf.get(CONFIG_KEY) or {})
    for key, value in (client_conf.get(CONFIG_KEY) or {}).items():
        config.setdefault(key, value)
    try:
        return SavepointStore(RedisSettings.from_config(config))
    except (TypeError, ValueError) as exc:
        raise SavepointRefused(f"{CONFIG_KEY}: {exc}") from None


def check_mode(name: str, conf: Mapping[str, Any], which: str, directory: str | None = None) -> None:
    """Refuse a topology whose state cannot be kept by a savepoint (in Redis, or in `directory`
    for the memory provider)."""
    if not conf.get("topology.state.exactly.once"):
        raise SavepointRefused(f"{which} topology {name!r} is not in exactly-once mode "
                               f"(topology.state.exactly.once: true): savepoints are its checkpoints; "
                               f"kill and submit it instead")
    provider = str(conf.get("topology.state.provider") or "memory").lower()
    if provider == "memory" and directory is None:
        raise SavepointRefused(f"{which} topology {name!r} keeps its state with the 'memory' provider, only in its "
                               f"workers: give --dir DIR (a directory every worker can write) for its savepoints")
    if provider == "redis" and directory is not None:
        raise SavepointRefused(f"{which} topology {name!r} keeps its state in Redis, and its savepoints there: "
                               f"--dir is for the memory provider")
    if provider not in ("memory", "redis"):
        raise SavepointRefused(f"{which} topology {name!r} keeps its state with the {provider!r} provider: "
                               f"savepoints need redis or memory")


def take_to_dir(nimbus: Nimbus, store: DirectoryStore, name: str, run: Running, deadline: float,
                started_from: str | None = None, attempts: int = 5) -> tuple[Manifest, Snapshot]:
    """A directory savepoint of running topology `name` (the memory provider): its workers write
    their tasks' committed state, tried again until every task wrote the same checkpoint."""
    slots = {(e.node, e.port) for e in run.details.executors if e.port is not None}
    last_problem = "no worker answered"
    for _ in range(attempts):
        request = store.request_dir(name)
        request.mkdir(parents=True, exist_ok=True)
        nimbus.call("request_savepoint", name=name, dir=str(request))
        try:
            markers = _poll(f"the {len(slots)} worker(s) of {name!r} to write their state to {request}",
                            lambda r=request: (m if len(m := files.read_worker_markers(r)) >= len(slots) else None),
                            deadline)
        except TimeoutError as exc:
            raise SavepointRefused(f"topology {name!r}: timed out waiting for {exc}; nothing was kept") from None
        finally:
            nimbus.call("request_savepoint", name=name, dir=None)
        missing = sorted(f"{c}#{i}" for m in markers.values() for c, i in m.get("missing", ()))
        if missing:
            shutil.rmtree(request, ignore_errors=True)
            raise SavepointRefused(f"topology {name!r}: tasks {', '.join(missing)} could not write their state "
                                   f"(their workers' logs say why); nothing was kept")
        states: dict[str, list] = {}
        txids, record = set(), None
        for m in markers.values():
            for comp, index in m["tasks"]:
                txid, values = files.read_task(files.task_file(request, comp, index))
                if comp == CHECKPOINT_COMPONENT:
                    record = record_of(values)
                    continue
                txids.add(txid)
                states.setdefault(comp, [{} for _ in range(run.shapes[comp].tasks)])[index] = values
        last = last_committed(record)
        if last is not None and last >= 0 and txids <= {last}:
            manifest = Manifest(new_id(last), name, time.time(), last, run.shapes, tuple(sorted(states)),
                                started_from)
            store.keep(request, manifest)
            return manifest, Snapshot(last, states)
        last_problem = f"its tasks wrote checkpoints {sorted(map(str, txids))}, the last complete one being {last}"
        shutil.rmtree(request, ignore_errors=True)
    raise SavepointRefused(f"topology {name!r}: no consistent checkpoint in {attempts} tries ({last_problem})")


def mixed_hash(conf: Mapping[str, Any]) -> bool:
    return str(conf.get("topology.fields.grouping.hash", "mixed")).lower() != "crc32"


def new_states(snapshot: Snapshot, moves: Mapping[str, Move], new: Mapping[str, Shape],
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


def shaped(manifest: Manifest, snapshot: Snapshot, new: Mapping[str, Shape], conf: Mapping[str, Any],
           allow_dropped_state: bool) -> dict[str, list[Mapping[bytes, bytes]]]:
    """The savepoint's state shaped for the new code `new`; SavepointRefused if it cannot be."""
    moves = plan_moves(manifest.components, set(manifest.stateful), new, allow_dropped_state)
    return new_states(snapshot, moves, new, mixed_hash(conf))


def start_from(store: SavepointStore | DirectoryStore, manifest: Manifest, states: Mapping[str, list],
               new: Mapping[str, Shape]) -> dict[str, Any]:
    """Write `states` (shaped()) as the state `manifest.topology` starts from: in Redis a new
    generation (named by the savepoint's id), in a directory a start directory. The topology
    config that says so."""
    checkpoint = new.get(CHECKPOINT_COMPONENT)
    tasks = checkpoint.tasks if checkpoint else 1
    if isinstance(store, DirectoryStore):
        return {SAVEPOINT_KEY: manifest.id, SAVEPOINT_DIR_KEY: str(store.start(manifest, states, tasks))}
    store.restore(manifest.topology, manifest.id, manifest.txid, states, checkpoint_tasks=tasks)
    return {SAVEPOINT_KEY: manifest.id}


def swap(nimbus: Nimbus, store: SavepointStore | DirectoryStore, name: str, new: Mapping[str, Shape],
         new_conf: Mapping[str, Any], submit: Callable[[Mapping[str, Any]], str], wait_secs: float,
         allow_dropped_state: bool = False, say: Callable[[str], None] = lambda line: None) -> tuple[Manifest, str]:
    """Stop `name` at a checkpoint and start `submit`'s new code from it (`submit` gets the
    topology config saying which savepoint); (the savepoint, the new topology's id)."""
    deadline = time.monotonic() + wait_secs
    run = running(nimbus, name)
    directory = str(store.root) if isinstance(store, DirectoryStore) else None
    check_mode(name, run.details.conf, "the running", directory)
    check_mode(name, new_conf, "the new", directory)
    if directory is not None:
        return _swap_from_workers(nimbus, store, name, run, new, new_conf, submit, deadline, allow_dropped_state, say)
    # Refusals before anything stops: the plan, and the keyed state's move on a read of it now.
    probe = store.snapshot(name, run.tasks)
    new_states(probe, plan_moves(run.shapes, set(probe.states), new, allow_dropped_state), new, mixed_hash(new_conf))
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
        return manifest, submit(start_from(store, manifest, shaped(manifest, snap, new, new_conf, allow_dropped_state),
                                           new))
    except Exception as exc:
        raise _kept(exc, name, manifest, "") from None


def _kept(exc: Exception, name: str, manifest: Manifest, dir_option: str) -> SavepointRefused:
    """A failure after the kill, in one line with the savepoint to start from."""
    return SavepointRefused(f"{exc} (topology {name!r} is stopped; its state is savepoint {manifest.id}: "
                            f"`storm-py jar submit FILE --name {name} --from-savepoint {manifest.id}{dir_option}` "
                            f"starts from it)")


def _swap_from_workers(nimbus: Nimbus, store: DirectoryStore, name: str, run: Running, new, new_conf, submit,
                       deadline: float, allow_dropped_state: bool, say) -> tuple[Manifest, str]:
    """A swap of a memory-provider topology: its workers write the stopped state (before the
    kill: it lives only in them), checked against the new code while the old one can still be
    activated again."""
    say(f"stopping topology {name!r} at a checkpoint")
    txid = stop_at_barrier(nimbus, name, deadline)
    try:
        manifest, snap = take_to_dir(nimbus, store, name, run, deadline, started_from=run.details.id)
        states = shaped(manifest, snap, new, new_conf, allow_dropped_state)
    except SavepointRefused as exc:
        nimbus.call("activate", name=name)
        raise SavepointRefused(f"{exc}; topology {name!r} was activated again and runs as before") from None
    say(f"topology {name!r} stopped at checkpoint {max(txid, snap.txid)}; kept as savepoint {manifest.id} in "
        f"{store.root}")
    nimbus.call("kill", name=name, wait_secs=0)
    try:
        wait_gone(nimbus, name, deadline + 30)
    except TimeoutError:
        raise SavepointRefused(f"topology {name!r} was stopped and killed, but Nimbus still lists it; its state is "
                               f"savepoint {manifest.id} in {store.root}: submit the new code from it once it is "
                               f"gone") from None
    try:
        return manifest, submit(start_from(store, manifest, states, new))
    except Exception as exc:
        raise _kept(exc, name, manifest, f" --dir {store.root}") from None

