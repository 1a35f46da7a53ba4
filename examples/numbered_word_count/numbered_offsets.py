"""The numbered source's durable state: one small JSON file per spout task, like a Kafka
consumer's committed offset per partition.

Task `index` of `tasks` owns the messages index, index + tasks, index + 2 * tasks, ... < total
(its partition), numbered by their sequence in it. Its file records `committed` (every sequence
below it is acked) and `emitted` (the highest sequence handed out so far, plus one), and is
replaced atomically (temp file + rename), so a SIGKILL leaves the old or the new version.
These functions are what an outside observer (the fault test, bench/chaos.py) reads too.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Offset:
    index: int
    tasks: int
    count: int       # messages in this task's partition
    committed: int   # sequences below this are acked
    emitted: int     # sequences below this were emitted at least once


def partition_size(total: int, index: int, tasks: int) -> int:
    return len(range(index, total, tasks))


def message_number(seq: int, index: int, tasks: int) -> int:
    return index + seq * tasks


def sequence_of(msg: int, index: int, tasks: int) -> int:
    return (msg - index) // tasks


def advance(committed: int, acked: set[int]) -> int:
    """The new committed offset: past every contiguous acked sequence (removed from `acked`)."""
    while committed in acked:
        acked.discard(committed)
        committed += 1
    return committed


def offset_path(directory: str | os.PathLike, index: int, tasks: int) -> Path:
    return Path(directory) / f"spout-{index}-of-{tasks}.json"


def load(path: Path, index: int, tasks: int, count: int) -> Offset:
    """The committed state, or a fresh one when the task never committed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Offset(index, tasks, count, 0, 0)
    committed = int(data["committed"])
    if not 0 <= committed <= count or data.get("count") != count:
        raise ValueError(f"offset file {path} does not fit a partition of {count} messages: {data}")
    return Offset(index, tasks, count, committed, max(committed, int(data.get("emitted", committed))))


def save(path: Path, offset: Offset) -> None:
    """Write `offset`, never lowering what the file already holds: acked messages stay acked,
    and two instances of one task can run at once (after a network partition the stale one on
    the cut-off host runs until its supervisor is back to stop it, and saves its older numbers
    when it stops), so the higher committed offset is the true one
    (tests/devcluster/test_multi_host.py)."""
    # No fsync: the state must survive a killed process, whose writes the page cache keeps; a
    # machine crash is out of scope for this example.
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the read-and-replace of one instance at a time
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            old = None
        if isinstance(old, dict) and old.get("count") == offset.count:
            offset = replace(offset, committed=max(offset.committed, int(old.get("committed", 0))),
                             emitted=max(offset.emitted, int(old.get("emitted", 0))))
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(offset.__dict__, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        os.close(fd)  # releases the lock


def read_all(directory: str | os.PathLike) -> list[Offset]:
    """Every task's committed state in `directory` (a half-written temp file is not read)."""
    out = []
    for path in sorted(Path(directory).glob("spout-*-of-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # replaced while we read it: the next poll sees it
        out.append(Offset(**{k: int(data[k]) for k in ("index", "tasks", "count", "committed", "emitted")}))
    return out


def committed_total(offsets: list[Offset]) -> int:
    return sum(o.committed for o in offsets)


def all_committed(offsets: list[Offset], total: int) -> bool:
    return committed_total(offsets) == total and sum(o.count for o in offsets) == total
