"""A task's committed state in a file, and the start directory the `memory` provider opens
(`topology.state.savepoint.dir`): the form executor/savepoints/files.py writes directory
savepoints in, kept here so that the provider reads it without looking at savepoints.

    DIR/COMPONENT#INDEX.msgpack   {"txid": the task's committed txid, "values": {msgpack key: value}}
    DIR/start.json                {"txid": ..., "savepoint": ...}: DIR is a start directory (written last)

The values are the form the redis provider stores, so that both providers' savepoints move alike.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

import msgpack

# The topology config of a start from a directory savepoint: its start directory.
START_DIR_KEY = "topology.state.savepoint.dir"
START = "start.json"


def task_file(directory: str | os.PathLike, component: str, index: int) -> Path:
    return Path(directory) / f"{quote(component, safe='$')}#{int(index)}.msgpack"


def atomic_write(path: Path, data: bytes) -> None:
    """`data` at `path` whole or not at all (written beside it, fsynced, renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_task(directory, component: str, index: int, txid: int | None, stored: Mapping[bytes, bytes]) -> None:
    atomic_write(task_file(directory, component, index),
                 msgpack.packb({"txid": txid, "values": dict(stored)}, use_bin_type=True))


def read_task(path: str | os.PathLike) -> tuple[int | None, dict[bytes, bytes]]:
    with open(path, "rb") as f:
        d = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    return d["txid"], dict(d["values"])


def start_txid(directory) -> int | None:
    """The txid a start directory starts from (None: not a start directory)."""
    try:
        return int(json.loads((Path(directory) / START).read_text())["txid"])
    except FileNotFoundError:
        return None


def mark_start(directory, txid: int, savepoint: str) -> None:
    """Make `directory` (its task files written) a start directory: start.json, last."""
    atomic_write(Path(directory) / START, json.dumps({"txid": txid, "savepoint": savepoint}).encode())
