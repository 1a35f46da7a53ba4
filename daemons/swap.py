"""The client's part of `storm-py savepoint` and `storm-py swap` (daemons/cli_savepoint.py): a
savepoint of a running topology, taken here, and following a swap, which Nimbus runs
(daemons/nimbus/swaps/: a client that dies leaves the topology on the old code or the new one).
`jar submit --from-savepoint` is Nimbus's too (daemons/nimbus/swaps/starts.py)."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from cluster_state.records import SWAP_DONE, SWAP_ENDED, SWAP_FAILED
from daemons.answers.details import TopologyDetails
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM, last_committed_of
from executor.savepoints import files
from executor.savepoints.plan import SavepointRefused, Shape, keyed_by
from executor.savepoints.store import Manifest, Snapshot, new_id
from executor.savepoints.stores import SavepointStores, check_mode

log = logging.getLogger(__name__)

POLL_SECS = 0.5


class Nimbus(Protocol):
    def call(self, op: str, **args) -> Any: ...


@dataclass(frozen=True)
class Running:
    """What a savepoint needs of a running topology (from Nimbus's topology_details)."""

    details: TopologyDetails
    shapes: dict[str, Shape]
    stateful: tuple[str, ...]


def running(nimbus: Nimbus, name: str) -> Running:
    details = TopologyDetails.from_wire(nimbus.call("topology_details", name=name))
    shapes = {c.id: Shape(c.kind, c.tasks, keyed_by([(s.grouping, s.fields) for s in c.inputs
                                                      if s.stream != CHECKPOINT_STREAM]), c.window)
              for c in details.components if c.kind in ("spout", "bolt")}
    return Running(details, shapes, tuple(sorted(c.id for c in details.components if c.stateful)))


def take(store: SavepointStores, name: str, run: Running, conf: Mapping[str, Any]) -> tuple[Manifest, Snapshot]:
    """A savepoint of running topology `name` (its last complete checkpoint, read from Redis, with
    its streams' cuts: executor/savepoints/sources.py), kept; `conf`: the command's."""
    from executor.savepoints.sources import take_with_cuts

    check_mode(name, run.details.conf, "the")
    tasks = {c: run.shapes[c].tasks for c in (*run.stateful, CHECKPOINT_COMPONENT) if c in run.shapes}
    snap = take_with_cuts(lambda: store.snapshot(name, tasks), lambda: store.committed_txid(name),
                          {**conf, **run.details.conf})
    manifest = Manifest(new_id(snap.txid), name, time.time(), snap.txid, run.shapes, tuple(sorted(snap.states)),
                        None, snap.generation)
    store.save(manifest, snap)
    return manifest, snap


def take_to_dir(nimbus: Nimbus, store: SavepointStores, name: str, run: Running, deadline: float,
                attempts: int = 5) -> tuple[Manifest, Snapshot]:
    """A directory savepoint of running topology `name` (the memory provider): its workers write
    their tasks' committed state, tried again until every task wrote the same checkpoint."""
    slots = {(e.node, e.port) for e in run.details.executors if e.port is not None}
    tasks = {c: s.tasks for c, s in run.shapes.items()}
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
        record, txids, snap = store.read_request(request, tasks)
        last = last_committed_of(record)
        if last is not None and txids <= {last}:
            manifest = Manifest(new_id(last), name, time.time(), last, run.shapes, tuple(sorted(snap.states)), None)
            store.keep(request, manifest)
            return manifest, Snapshot(last, snap.states)
        last_problem = f"its tasks wrote checkpoints {sorted(map(str, txids))}, the last complete one being {last}"
        shutil.rmtree(request, ignore_errors=True)
    raise SavepointRefused(f"topology {name!r}: no consistent checkpoint in {attempts} tries ({last_problem})")


def _poll(what: str, ready: Callable[[], Any], deadline: float, sleep: Callable[[float], None] = time.sleep):
    while True:
        value = ready()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(what)
        sleep(POLL_SECS)


# ---------------------------------------------------------------------- following a swap
def follow(status: Callable[[], Mapping[str, Any] | None], say: Callable[[str], None], deadline: float,
           seen: Mapping[str, Any] | None = None, sleep: Callable[[float], None] = time.sleep) -> Mapping[str, Any]:
    """Poll a swap's record (`status`: Nimbus's swap_status; an exception is an outage the next
    poll may not have) until it ends, saying each step once; the last record. TimeoutError at
    `deadline` (the swap goes on in Nimbus)."""
    said: set[str] = set()
    record = seen
    while True:
        try:
            record = status() or record
        except Exception as exc:  # noqa: BLE001 - a Nimbus failing over: its successor answers next
            log.debug("swap status: %s", exc)
        if record is not None:
            for line in _lines(record):
                if line not in said:
                    said.add(line)
                    say(line)
            if record["phase"] in SWAP_ENDED:
                return record
        if time.monotonic() >= deadline:
            raise TimeoutError(record["phase"] if record else "unknown")
        sleep(POLL_SECS)


def _lines(record: Mapping[str, Any]) -> list[str]:
    """What the client says of a swap so far (the lines of the old client-run swap, kept)."""
    name, phase = record["name"], record["phase"]
    lines = [f"stopping topology {name!r} at a checkpoint"]
    if record.get("txid") is not None and phase in ("saved", "killed", SWAP_DONE):
        lines.append(f"topology {name!r} stopped at checkpoint {record['txid']}; kept as savepoint "
                     f"{record['savepoint']}")
    if phase == SWAP_FAILED:
        return lines[:1]
    return lines


def outcome(record: Mapping[str, Any]) -> str:
    """The last line of a swap that ended; SavepointRefused for one that failed."""
    if record["phase"] == SWAP_FAILED:
        raise SavepointRefused(record.get("message") or f"the swap of {record['name']!r} failed")
    return (f"swapped topology {record['name']}: {record['new_id']} started from savepoint {record['savepoint']} "
            f"(checkpoint {record['txid']})")
