"""Savepoints in a directory, for topologies whose state is in the `memory` provider (it lives
only in the workers, so the workers write it):

    D/NAME/.request-N/COMPONENT#INDEX.msgpack   a task's committed values, written by its worker
    D/NAME/.request-N/workers/HOST-PORT.json     a worker wrote all its tasks' files
    D/NAME/ID/...                                the same, renamed once consistent, and
    D/NAME/ID/manifest.json                      the manifest (store.Manifest), written last
    D/NAME/ID/start-T/...                        a start from it: the files shaped for the new
                                                 code, and start.json; the memory provider loads
                                                 them (topology.state.savepoint.dir)

A task's file holds {"txid": its committed txid, "values": {msgpack key: msgpack value}}, the
form the redis provider stores, so that plan.py and keyed.py move both alike."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

import msgpack

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT
from executor.savepoints.store import Manifest, Snapshot, checkpoint_record

START = "start.json"
MANIFEST = "manifest.json"
WORKERS = "workers"


def task_file(directory: str | os.PathLike, component: str, index: int) -> Path:
    return Path(directory) / f"{quote(component, safe='$')}#{int(index)}.msgpack"


def _atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_task(directory, component: str, index: int, txid: int | None, stored: Mapping[bytes, bytes]) -> None:
    _atomic(task_file(directory, component, index), msgpack.packb({"txid": txid, "values": dict(stored)},
                                                                   use_bin_type=True))


def read_task(path: str | os.PathLike) -> tuple[int | None, dict[bytes, bytes]]:
    with open(path, "rb") as f:
        d = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    return d["txid"], dict(d["values"])


def write_worker_marker(directory, worker: str, marker: Mapping) -> None:
    """`marker`: {"tasks": [[component, index], ...] written, "missing": [...] that could not be}."""
    _atomic(Path(directory) / WORKERS / f"{worker}.json", json.dumps(marker).encode())


def read_worker_markers(directory) -> dict[str, dict]:
    out = {}
    for p in (Path(directory) / WORKERS).glob("*.json"):
        out[p.stem] = json.loads(p.read_text())
    return out


def start_txid(directory) -> int | None:
    """The txid a start directory starts from (None: not a start directory)."""
    try:
        return int(json.loads((Path(directory) / START).read_text())["txid"])
    except FileNotFoundError:
        return None


class DirectoryStore:
    """Savepoints of topologies under `root` (the --dir)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).absolute()  # the workers' working directories are not the client's

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

    def keep(self, request: Path, manifest: Manifest) -> Path:
        """The request's files become savepoint `manifest.id` (the manifest written last)."""
        final = self.root / manifest.topology / manifest.id
        os.replace(request, final)
        _atomic(final / MANIFEST, manifest.to_json().encode())
        return final

    def start(self, manifest: Manifest, states: Mapping[str, list[Mapping[bytes, bytes]]],
              checkpoint_tasks: int = 1) -> Path:
        """A start directory for the new code: its tasks' files, the checkpoint spout's record
        COMMITTED at the savepoint's txid, start.json last."""
        d = self.root / manifest.topology / manifest.id / f"start-{time.time_ns()}"
        for comp, per_task in states.items():
            for index, values in enumerate(per_task):
                write_task(d, comp, index, manifest.txid, values)
        record = checkpoint_record(manifest.txid)
        for index in range(checkpoint_tasks):
            write_task(d, CHECKPOINT_COMPONENT, index, manifest.txid, record)
        _atomic(d / START, json.dumps({"txid": manifest.txid, "savepoint": manifest.id}).encode())
        return d

    def delete(self, topology: str, savepoint: str) -> None:
        import shutil

        self.manifest(topology, savepoint)
        shutil.rmtree(self.root / topology / savepoint)
