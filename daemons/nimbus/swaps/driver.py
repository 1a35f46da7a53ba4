"""A swap's steps carried out on Nimbus (daemons/nimbus/swaps/__init__.py has the sequence;
steps.py decides each one). The leader's swap thread calls `round`; the RPC handlers `begin`,
`status` and `start_from_savepoint` (a submit `--from-savepoint`)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Protocol

from cluster_state.records import (
    SWAP_DONE,
    SWAP_ENDED,
    SWAP_FAILED,
    SWAP_KILLED,
    SWAP_PARKING,
    SWAP_SAVED,
    SWAP_STOPPING,
    SWAP_WRITING,
    SwapRecord,
)
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.swaps import steps
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, last_committed_of
from executor.checkpoint.wiring import STATEFUL_BOLT, STATEFUL_SPOUT
from executor.errors import NotAliveError
from executor.savepoints import files
from executor.savepoints.plan import SavepointRefused, plan_moves
from executor.savepoints.shaping import check_shapes, fields_in, shaped, shapes_of
from executor.savepoints.store import Manifest
from executor.savepoints.stores import SavepointStores, check_mode, store_for
from executor.state.errors import StateUnavailableError
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

NOTE = "swap in progress: its spouts stop at a checkpoint; the new code starts from it (storm-py swap)"


def savepoint_id(storm_id: str, now: float) -> str:
    """A swap's savepoint id, chosen before the new code is installed (its conf names it): when,
    and the new code's counter (`NAME-COUNTER-LAUNCHTIME`)."""
    counter = storm_id.rsplit("-", 2)[-2] if storm_id.count("-") >= 2 else "0"
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"-swap{counter}"


def stateful_components(structure: TopologyStructure) -> tuple[str, ...]:
    """The components whose tasks keep state (what a savepoint holds), the checkpoint spout aside."""
    return tuple(sorted(cid for cid, c in structure.components.items()
                        if c.conf.get(STATEFUL_BOLT) or c.conf.get(STATEFUL_SPOUT)))


class CodeCopies(Protocol):
    """The other registered Nimbus daemons' copies of a topology's code (daemons/nimbus/code_sync.py)."""

    def everywhere(self, storm_id: str) -> bool:
        """Whether every other registered Nimbus holds it (a swap removes the old topology only
        then, so that a Nimbus taking over can start the new one)."""

    def elsewhere(self, storm_id: str) -> bool:
        """Whether another registered Nimbus holds it (this one can copy it)."""


class NoOtherNimbus:
    """A LocalCluster's Nimbus: there is no other."""

    def everywhere(self, storm_id: str) -> bool:
        return True

    def elsewhere(self, storm_id: str) -> bool:
        return False


class SwapDriver:
    def __init__(self, core: NimbusCore, copies: CodeCopies | None = None):
        self.core = core
        self.cluster = core.cluster
        self._copies = copies or NoOtherNimbus()
        # Per topology: the provider config its swap's client sent (a password the stored confs
        # leave out); a Nimbus taking over has its own conf's.
        self._client_conf: dict[str, Mapping[str, Any]] = {}

    # ------------------------------------------------------------------ the request
    def begin(self, name: str, package: Path, overrides: Mapping[str, Any], wait_secs: float,
              allow_dropped_state: bool = False, directory: str | None = None,
              client_conf: Mapping[str, Any] | None = None) -> SwapRecord:
        """Check the swap, install the new code and stop the old topology; its record. Every
        refusal (SavepointRefused, one line) leaves everything as it was."""
        core = self.core
        old_id = core.resolve(name)
        current = self.cluster.swap(name)
        if current is not None and current.phase not in SWAP_ENDED:
            package.unlink(missing_ok=True)
            raise SavepointRefused(f"topology {name!r} is being swapped already ({current.phase}); "
                                   f"`storm-py swap --resume {name}` follows it")
        old_structure, old_conf = core.topology_code(old_id)
        try:
            check_mode(name, old_conf, "the running", directory)
        except SavepointRefused:
            package.unlink(missing_ok=True)
            raise
        more = {**core.conf, **(client_conf or {})}
        store = store_for(old_conf, directory, more)
        now = core.clock()
        chosen: dict[str, str] = {}

        def start_conf(storm_id: str) -> Mapping[str, Any]:
            chosen["savepoint"] = savepoint_id(storm_id, now)
            return store.start_conf(name, chosen["savepoint"], storm_id)

        new_id, new_structure, new_conf = core.install_pending(name, package, overrides, start_conf)
        try:
            check_mode(name, new_conf, "the new", directory)
            self._check_state(name, old_id, old_structure, old_conf, new_structure, new_conf, store,
                              allow_dropped_state)
            core.stop(name, wait_secs, NOTE)
        except BaseException:
            core.drop_pending(new_id)
            raise
        finally:
            store.close()
        record = SwapRecord(name=name, old_id=old_id, new_id=new_id, savepoint=chosen["savepoint"],
                            phase=SWAP_STOPPING, started_secs=now, deadline_secs=now + wait_secs,
                            options={"allow_dropped_state": bool(allow_dropped_state), "dir": directory},
                            message="its spouts stop at a checkpoint")
        self._client_conf[name] = dict(client_conf or {})
        self.cluster.set_swap(record)
        log.info("swap of topology %s: %s stops at a checkpoint, %s starts from savepoint %s", name, old_id, new_id,
                 record.savepoint)
        return record

    def _check_state(self, name, old_id, old_structure, old_conf, new_structure, new_conf, store: SavepointStores,
                     allow_dropped_state: bool) -> None:
        """Refusals before anything stops: where each component's state goes, and with Redis a
        read of the running state moved onto the new code (every key where its grouping puts it)."""
        old_shapes, new_shapes = shapes_of(old_structure, old_conf), shapes_of(new_structure, new_conf)
        stateful = stateful_components(old_structure)
        if store.workers_write:
            plan_moves(old_shapes, set(stateful), new_shapes, allow_dropped_state)
            return
        probe = store.snapshot(name, {c: old_shapes[c].tasks for c in (*stateful, CHECKPOINT_COMPONENT)
                                      if c in old_shapes})
        manifest = Manifest("probe", name, 0.0, probe.txid, old_shapes, tuple(sorted(probe.states)), old_id)
        check_shapes(manifest, probe, new_shapes, fields_in(new_structure), new_conf, allow_dropped_state)

    # ------------------------------------------------------------------ the steps
    @property
    def busy(self) -> bool:
        """Whether a swap is under way (its thread then runs every half second)."""
        try:
            return any(r.phase not in SWAP_ENDED for r in self.cluster.swaps().values())
        except Exception:  # noqa: BLE001 - ZooKeeper away: the next round tells
            return False

    def round(self) -> None:
        """One step of every swap under way (the leader's swap thread)."""
        for name, record in sorted(self.cluster.swaps().items()):
            try:
                self._step(record)
            except (SavepointRefused, StateUnavailableError, OSError) as exc:
                self._note(record, str(exc))
            except Exception:
                log.exception("swap of topology %s: step %s failed (tried again)", name, record.phase)

    def _facts(self, record: SwapRecord) -> steps.Facts:
        core = self.core
        status = core.status_of(record.old_id)
        marks, spouts = {}, frozenset()
        if status is not None:
            structure, _conf = core.topology_code(record.old_id)
            spouts = frozenset(cid for cid, c in structure.components.items() if c.conf.get(STATEFUL_SPOUT))
            marks = core.checkpoint_marks(record.old_id)
        replicated = record.phase == SWAP_PARKING and self._copies.everywhere(record.new_id)
        if core.holds_code(record.new_id):
            where = steps.CODE_HERE
        else:
            where = steps.CODE_ELSEWHERE if self._copies.elsewhere(record.new_id) else steps.CODE_LOST
        return steps.Facts(now=core.clock(), old_status=status, marks=marks, stateful_spouts=spouts,
                           checkpoint_component=CHECKPOINT_COMPONENT, replicated=replicated,
                           new_running=core.status_of(record.new_id) is not None, new_code=where)

    def _step(self, record: SwapRecord) -> None:
        step = steps.next_step(record, self._facts(record))
        kind = step.kind
        if kind == steps.WAIT:
            if step.message and step.message != record.message:
                self._save(replace(record, message=step.message))
        elif kind == steps.FORGET:
            self.cluster.remove_swap(record.name)
            self._client_conf.pop(record.name, None)
        elif kind == steps.FAIL:
            self._fail(record, step.message, undo=step.undo)
        elif kind == steps.PARK:
            self.core.park(record.old_id)
            self._save(replace(record, phase=SWAP_PARKING, txid=step.txid,
                               message=f"stopped at checkpoint {step.txid}; its checkpoint spout parks"))
        elif kind == steps.TAKE:
            self._take(record, step.txid)
        elif kind == steps.COLLECT:
            self._collect(record)
        elif kind == steps.KILL:
            self.core.remove_now(record.old_id)
            self._save(replace(record, phase=SWAP_KILLED, message=f"{record.old_id} removed; the new code starts"))
        elif kind == steps.START:
            self._start(record)
        elif kind == steps.DONE:
            self._end(record, SWAP_DONE, f"{record.new_id} started from savepoint {record.savepoint} "
                                         f"(checkpoint {record.txid})")

    # ---- taking the savepoint (the old topology parked: its state does not move) ----
    def _store(self, record: SwapRecord, conf: Mapping[str, Any]) -> SavepointStores:
        more = {**self.core.conf, **self._client_conf.get(record.name, {})}
        return store_for(conf, record.options.get("dir"), more)

    def _take(self, record: SwapRecord, txid: int) -> None:
        structure, conf = self.core.topology_code(record.old_id)
        store = self._store(record, conf)
        try:
            if store.workers_write:
                request = store.request_dir(record.name)
                request.mkdir(parents=True, exist_ok=True)
                self.core.request_savepoint(record.name, str(request))
                self._save(replace(record, phase=SWAP_WRITING, txid=txid, request_dir=str(request),
                                   message=f"its workers write their state at checkpoint {txid}"))
                return
            shapes = shapes_of(structure, conf)
            tasks = {c: shapes[c].tasks for c in (*stateful_components(structure), CHECKPOINT_COMPONENT) if c in shapes}
            snap = store.snapshot(record.name, tasks)
            self._keep(record, store, Manifest(record.savepoint, record.name, self.core.clock(), snap.txid, shapes,
                                               tuple(sorted(snap.states)), record.old_id, snap.generation), snap)
        finally:
            store.close()

    def _collect(self, record: SwapRecord) -> None:
        """Memory provider: once every worker of the old topology wrote its tasks' state."""
        structure, conf = self.core.topology_code(record.old_id)
        request = Path(record.request_dir or "")
        markers = files.read_worker_markers(request)
        if len(markers) < len(self.core.slots_of(record.old_id)):
            return
        store = self._store(record, conf)
        try:
            missing = sorted(f"{c}#{i}" for m in markers.values() for c, i in m.get("missing", ()))
            if missing:
                self._fail(record, f"topology {record.name!r}: tasks {', '.join(missing)} could not write their state "
                                   f"(their workers' logs say why); the swap is given up", undo=True)
                return
            shapes = shapes_of(structure, conf)
            tx_record, txids, snap = store.read_request(request, {c: s.tasks for c, s in shapes.items()})
            last = last_committed_of(tx_record)
            if last is None or not txids <= {last}:
                self._fail(record, f"topology {record.name!r}: its workers wrote checkpoints {sorted(txids)} while "
                                   f"the last complete one is {last}; the swap is given up", undo=True)
                return
            manifest = Manifest(record.savepoint, record.name, self.core.clock(), last, shapes,
                                tuple(sorted(snap.states)), record.old_id)
            self._keep(record, store, manifest, replace(snap, txid=last), request)
        finally:
            self.core.request_savepoint(record.name, None)
            store.close()

    def _keep(self, record: SwapRecord, store: SavepointStores, manifest: Manifest, snap, request=None) -> None:
        """The state checked against the new code, then kept as the savepoint (refused: undone)."""
        new_structure, new_conf = self.core.topology_code(record.new_id)
        try:
            check_shapes(manifest, snap, shapes_of(new_structure, new_conf), fields_in(new_structure), new_conf,
                         bool(record.options.get("allow_dropped_state")))
        except SavepointRefused as exc:
            self._fail(record, f"{exc}; the swap is given up", undo=True)
            return
        if request is not None:
            store.keep(request, manifest)
        else:
            store.save(manifest, snap)
        self._save(replace(record, phase=SWAP_SAVED, txid=manifest.txid,
                           message=f"stopped at checkpoint {manifest.txid}; kept as savepoint {manifest.id}"))

    # ---- starting the new code ----
    def _start(self, record: SwapRecord) -> None:
        new_structure, new_conf = self.core.topology_code(record.new_id)
        store = self._store(record, new_conf)
        try:
            manifest = store.manifest(record.name, record.savepoint)
            states = shaped(manifest, store.load(manifest), shapes_of(new_structure, new_conf),
                            fields_in(new_structure), new_conf, bool(record.options.get("allow_dropped_state")))
            checkpoint = shapes_of(new_structure, new_conf).get(CHECKPOINT_COMPONENT)
            store.start_from(manifest, states, checkpoint.tasks if checkpoint else 1, record.new_id)
        finally:
            store.close()
        self.core.start_pending(record.name, record.new_id)
        if record.phase != SWAP_KILLED:
            record = replace(record, phase=SWAP_KILLED)
        self._end(record, SWAP_DONE, f"{record.new_id} started from savepoint {record.savepoint} "
                                     f"(checkpoint {record.txid})")

    # ---- the record ----
    def _save(self, record: SwapRecord) -> None:
        self.cluster.set_swap(record)
        log.info("swap of topology %s: %s (%s)", record.name, record.phase, record.message)

    def _note(self, record: SwapRecord, message: str) -> None:
        """A step that could not be done now (Redis away, a file not there yet): said, tried again."""
        log.warning("swap of topology %s (%s): %s; tried again", record.name, record.phase, message)
        if message != record.message:
            self.cluster.set_swap(replace(record, message=message))

    def _fail(self, record: SwapRecord, message: str, undo: bool) -> None:
        if undo:
            try:
                self.core.resume(record.old_id)
            except NotAliveError:
                pass
        self.core.drop_pending(record.new_id)
        self._end(record, SWAP_FAILED, message)

    def _end(self, record: SwapRecord, phase: str, message: str) -> None:
        self._save(replace(record, phase=phase, message=message, ended_secs=self.core.clock()))
        self._client_conf.pop(record.name, None)

    def status(self, name: str) -> SwapRecord | None:
        return self.cluster.swap(name)
