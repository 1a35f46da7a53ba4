"""Savepoints in a directory, for topologies whose state is in the `memory` provider (it lives
only in the workers, so the workers write it):

    D/NAME/.request-N/COMPONENT#INDEX.msgpack   a task's committed values, written by its worker
    D/NAME/.request-N/workers/HOST-PORT.json     a worker wrote all its tasks' files
    D/NAME/ID/...                                the same, renamed once consistent, and
    D/NAME/ID/manifest.json                      the manifest (store.Manifest), written last
    D/NAME/ID/start-T/...                        a start from it: the files shaped for the new
                                                 code, and start.json; the memory provider loads
                                                 them (topology.state.savepoint.dir)

A task's file and the start directory are executor/state/task_files.py's (the memory provider
opens a start directory without looking here)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, TxState
from executor.savepoints import SAVEPOINT_DIR_KEY, SAVEPOINT_KEY
from executor.savepoints.store import Manifest, Snapshot, checkpoint_record
from executor.state.task_files import atomic_write, mark_start, read_task, task_file, write_task

MANIFEST = "manifest.json"
WORKERS = "workers"


def write_worker_marker(directory, worker: str, marker: Mapping) -> None:
    """`marker`: {"tasks": [[component, index], ...] written, "missing": [...] that could not be}."""
    atomic_write(Path(directory) / WORKERS / f"{worker}.json", json.dumps(marker).encode())


def read_worker_markers(directory) -> dict[str, dict]:
    out = {}
    for p in (Path(directory) / WORKERS).glob("*.json"):
        out[p.stem] = json.loads(p.read_text())
    return out


class DirectoryStore:
    """Savepoints of topologies under `root` (the --dir; SavepointStores, executor/savepoints/stores.py)."""

    workers_write = True  # the state lives only in the workers: they write it (request_dir)

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).absolute()  # the workers' working directories are not the client's
        self.where = f"the savepoint directory {self.root}"

    def close(self) -> None:
        pass

    def __enter__(self) -> "DirectoryStore":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def request_dir(self, topology: str) -> Path:
        return self.root / topology / f".request-{time.time_ns()}"

    def manifests(self, topology: str) -> list[Manifest]:
        out = []
        for m in sorted((self.root / topology).glob(f"*/{MANIFEST}")):
            out.append(Manifest.from_json(m.read_text()))
        return sorted(out, key=lambda m: (m.time_secs, m.id))

    def manifest(self, topology: str, savepoint: str) -> Manifest:
        from executor.savepoints.plan import SavepointRefused

        path = self.root / topology / savepoint / MANIFEST
        if not path.is_file():
            known = [m.id for m in self.manifests(topology)]
            raise SavepointRefused(f"topology {topology!r} has no savepoint {savepoint!r} in {self.root}"
                                   + (f" (it has: {', '.join(known[-5:])})" if known else " (it has none)"))
        return Manifest.from_json(path.read_text())

    def load(self, manifest: Manifest) -> Snapshot:
        d = self.root / manifest.topology / manifest.id
        states = {}
        for comp in manifest.stateful:
            per = []
            for index in range(manifest.components[comp].tasks):
                path = task_file(d, comp, index)
                per.append(read_task(path)[1] if path.exists() else {})
            states[comp] = per
        return Snapshot(manifest.txid, states)

    def read_request(self, request: Path, tasks: Mapping[str, int]) -> tuple[TxState | None, set, Snapshot | None]:
        """What the workers wrote to `request` (component -> its number of tasks): the checkpoint
        spout's record, the txids the other tasks wrote, and their state (None while a task
        named in a worker's marker has no file)."""
        from executor.savepoints.store import record_of

        states: dict[str, list] = {}
        txids, record = set(), None
        for marker in read_worker_markers(request).values():
            for comp, index in marker["tasks"]:
                txid, values = read_task(task_file(request, comp, index))
                if comp == CHECKPOINT_COMPONENT:
                    record = record_of(values)
                    continue
                txids.add(txid)
                states.setdefault(comp, [{} for _ in range(tasks[comp])])[index] = values
        return record, txids, Snapshot(-1, states)

    def start_conf(self, topology: str, savepoint: str, storm_id: str) -> dict:
        """SavepointStores.start_conf: the start directory of `storm_id` (written by start_from)."""
        return {SAVEPOINT_KEY: savepoint, SAVEPOINT_DIR_KEY: str(self._start_dir(topology, savepoint, storm_id))}

    def _start_dir(self, topology: str, savepoint: str, storm_id: str) -> Path:
        return self.root / topology / savepoint / f"start-{storm_id}"

    def start_from(self, manifest: Manifest, states: Mapping[str, list[Mapping[bytes, bytes]]],
                   checkpoint_tasks: int, storm_id: str) -> None:
        """SavepointStores.start_from: the start directory start_conf named."""
        self.start(manifest, states, checkpoint_tasks, self._start_dir(manifest.topology, manifest.id, storm_id))

    def keep(self, request: Path, manifest: Manifest) -> Path:
        """The request's files become savepoint `manifest.id` (the manifest written last)."""
        final = self.root / manifest.topology / manifest.id
        os.replace(request, final)
        atomic_write(final / MANIFEST, manifest.to_json().encode())
        return final

    def start(self, manifest: Manifest, states: Mapping[str, list[Mapping[bytes, bytes]]],
              checkpoint_tasks: int = 1, d: Path | None = None) -> Path:
        """A start directory for the new code: its tasks' files, the checkpoint spout's record
        COMMITTED at the savepoint's txid, start.json last."""
        d = d or self.root / manifest.topology / manifest.id / f"start-{time.time_ns()}"
        for comp, per_task in states.items():
            for index, values in enumerate(per_task):
                write_task(d, comp, index, manifest.txid, values)
        record = checkpoint_record(manifest.txid, manifest.time_secs)
        for index in range(checkpoint_tasks):
            write_task(d, CHECKPOINT_COMPONENT, index, manifest.txid, record)
        mark_start(d, manifest.txid, manifest.id)
        return d

    def delete(self, topology: str, savepoint: str) -> None:
        import shutil

        self.manifest(topology, savepoint)
        shutil.rmtree(self.root / topology / savepoint)
