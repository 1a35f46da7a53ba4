"""The table log: which data a sink table holds, as a sequence of atomic commits. No Spark here.

    <table>/_storm_log/
      00000000000000000007.json        commit 7: {"op", "time", "add": [entry...], "remove": [path...]}
      00000000000000000050.checkpoint.json   the whole state at version 50: a line of entries,
                                             then a line of tombstones (readers stop at the first)
      _last_checkpoint                 {"version": 50}: the newest checkpoint (Delta's file of
                                             that name); it only moves forward

A reader takes the newest checkpoint, replays the commits after it and gets a Snapshot: the
entries (batch directories and compacted directories) committed at one instant. It then reads
exactly those files, so a commit or a compaction during the read changes nothing it returns.
Readers and writers find the newest checkpoint through `_last_checkpoint` and the newest commit
by opening the commits after it one by one, so neither lists the log directory, whose commits
of the retention period can number hundreds of thousands.
Files are deleted only once no snapshot can still need them: an entry a commit removed is kept
for the retention period (Delta's VACUUM has the same rule), and so are log files.

Commit `N` is created with link(2) from a temporary file: exactly one writer gets each version
(link fails on an existing name, also over NFS), so writers in several processes and hosts need
no central process. A writer that loses the race reads the newer commits and tries the next
version; a compaction whose inputs another commit removed meanwhile gives up (Conflict).

Entry paths are relative to the table. An entry's `batches` maps each batch id it holds to its
rows (what verify_table checks) and `files` maps each data file to its size (what check_files
checks without reading data).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

log = logging.getLogger(__name__)

LOG_DIR = "_storm_log"
HINT = "_last_checkpoint"
_HINT_LOCK = ".last_checkpoint.lock"
CHECKPOINT_EVERY = 50
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.json$")
LOG_VERSION = 1


class LogError(RuntimeError):
    """The table log cannot be read or written; the message names the file."""


class Conflict(Exception):
    """A commit's precondition no longer holds (e.g. a compaction's inputs were removed)."""


class PackedBatches(Mapping[str, int]):
    """A compacted entry's batch map as the log stores it, one JSON string, parsed on first use:
    reading the data needs only an entry's files, and parsing the 100,000 batch ids of a large
    compaction costs ~60 ms, on every read of the table."""

    __slots__ = ("text", "_map")

    def __init__(self, text: str):
        self.text = text
        self._map: dict[str, int] | None = None

    def _get(self) -> dict[str, int]:
        if self._map is None:
            self._map = json.loads(self.text)
        return self._map

    def __getitem__(self, key: str) -> int:
        return self._get()[key]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return f"PackedBatches({len(self)} batches)"


@dataclass(frozen=True)
class Entry:
    path: str                       # relative to the table: storm_batch_id=X or _storm_compacted/...
    kind: str                       # "batch" or "compacted"
    batches: Mapping[str, int]      # batch id -> rows
    files: Mapping[str, int]        # data file relative to `path` -> size in bytes

    @property
    def rows(self) -> int:
        return sum(self.batches.values())

    @property
    def size(self) -> int:
        return sum(self.files.values())

    def to_json(self) -> dict[str, Any]:
        if isinstance(self.batches, PackedBatches):
            batches: Any = self.batches.text
        elif self.kind == "compacted":
            batches = json.dumps(dict(self.batches), separators=(",", ":"))
        else:
            batches = dict(self.batches)
        return {"path": self.path, "kind": self.kind, "batches": batches, "files": dict(self.files)}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> "Entry":
        # JSON keys are strings and the log's own writer wrote the values: no conversion.
        raw = doc["batches"]
        batches = PackedBatches(raw) if isinstance(raw, str) else dict(raw)
        return Entry(str(doc["path"]), str(doc["kind"]), batches, dict(doc["files"]))


@dataclass(frozen=True)
class Snapshot:
    version: int                                    # -1: an empty table
    entries: Mapping[str, Entry] = field(default_factory=dict)
    # removed path -> when; read_snapshot(..., tombstones=False) leaves out the checkpoint's
    # (readers need only the entries; vacuum and checkpoints need all of them)
    tombstones: Mapping[str, float] = field(default_factory=dict)

    @property
    def batch_rows(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries.values():
            out.update(e.batches)
        return out

    def by_kind(self, kind: str) -> list[Entry]:
        return sorted((e for e in self.entries.values() if e.kind == kind), key=lambda e: e.path)


# ---- pure: applying commits ----

def apply(snapshot: Snapshot, version: int, commit: Mapping[str, Any]) -> Snapshot:
    """The state after `commit` (version `version`). Adding an entry already there is a no-op
    (a log bootstrap may list a batch its writer commits again); removing one records a tombstone."""
    entries = dict(snapshot.entries)
    tombstones = dict(snapshot.tombstones)
    when = float(commit.get("time", 0.0))
    for path in commit.get("remove", ()):
        if entries.pop(path, None) is not None or path not in tombstones:
            tombstones[path] = when
    for doc in commit.get("add", ()):
        entry = Entry.from_json(doc)
        entries.setdefault(entry.path, entry)
        tombstones.pop(entry.path, None)
    return Snapshot(version, entries, tombstones)


def replay(start: Snapshot, commits: Iterable[tuple[int, Mapping[str, Any]]]) -> Snapshot:
    state = start
    for version, commit in commits:
        state = apply(state, version, commit)
    return state


def removable(snapshot: Snapshot, now: float, retention_secs: float) -> list[str]:
    """Tombstoned paths no snapshot younger than the retention period can need."""
    return sorted(p for p, when in snapshot.tombstones.items()
                  if now - when >= retention_secs and p not in snapshot.entries)


# ---- files ----

def log_dir(table: Path) -> Path:
    return table / LOG_DIR


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.json"


def _listing(table: Path) -> tuple[list[int], list[int]]:
    try:
        names = os.listdir(log_dir(table))
    except FileNotFoundError:
        return [], []
    commits, checkpoints = [], []
    for name in names:
        m = _COMMIT.match(name)
        if m:
            commits.append(int(m.group(1)))
            continue
        m = _CHECKPOINT.match(name)
        if m:
            checkpoints.append(int(m.group(1)))
    return sorted(commits), sorted(checkpoints)


def exists(table: Path) -> bool:
    return log_dir(table).is_dir()


def read_hint(table: Path) -> int | None:
    """The newest checkpoint's version as `_last_checkpoint` says, None without one."""
    try:
        return int(json.loads((log_dir(table) / HINT).read_text(encoding="utf-8"))["version"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LogError(f"table log file {log_dir(table) / HINT} cannot be read: {exc}") from None


def _write_hint(table: Path, version: int) -> None:
    """Move `_last_checkpoint` to `version` unless it is already further: it never goes back,
    which is what lets a reader trust the commits after it (clean_log removes only files
    before it). Writers serialise on a lock file; readers never take it."""
    fd = os.open(log_dir(table) / _HINT_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = read_hint(table)
        if current is None or version > current:
            tmp = _write_tmp(table, {"version": version})
            os.replace(tmp, log_dir(table) / HINT)
    finally:
        os.close(fd)  # drops the lock


def _probe(table: Path, after: int, read: bool) -> list[tuple[int, dict[str, Any] | None]]:
    """The commits after version `after`, opened in order until one does not exist (with
    `read`, their contents)."""
    out: list[tuple[int, dict[str, Any] | None]] = []
    version = after + 1
    while True:
        path = log_dir(table) / commit_name(version)
        if read:
            try:
                out.append((version, _read_json(path)))
            except FileNotFoundError:
                return out
        elif path.exists():
            out.append((version, None))
        else:
            return out
        version += 1


def latest_version(table: Path, attempts: int = 5) -> int:
    for _attempt in range(attempts):
        hint = read_hint(table)
        if hint is None:
            break
        found = _probe(table, hint, read=False)
        if read_hint(table) == hint:  # else a cleanup may have removed what was probed
            return found[-1][0] if found else hint
    commits, checkpoints = _listing(table)
    return max(commits[-1:] + checkpoints[-1:], default=-1)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise LogError(f"table log file {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(doc, dict):
        raise LogError(f"table log file {path} is not a JSON object")
    return doc


def _read_checkpoint(table: Path, version: int, tombstones: bool) -> Snapshot:
    """A checkpoint: its first line (entries), and with `tombstones` its second (a checkpoint
    written before the split holds both in one line)."""
    path = log_dir(table) / checkpoint_name(version)
    try:
        with open(path, encoding="utf-8") as f:
            lines = [f.readline()] + ([f.readline()] if tombstones else [])
        docs = [json.loads(line) for line in lines if line.strip()]
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise LogError(f"table log file {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise LogError(f"table log file {path} is not a checkpoint")
    removed = {} if not tombstones else {str(p): float(t) for d in docs for p, t in d.get("tombstones", {}).items()}
    return Snapshot(version, {e["path"]: Entry.from_json(e) for e in docs[0].get("entries", [])}, removed)


def _from_hint(table: Path, tombstones: bool) -> Snapshot | None:
    """The newest state through `_last_checkpoint`, None when there is none or it moved."""
    hint = read_hint(table)
    if hint is None:
        return None
    try:
        start = _read_checkpoint(table, hint, tombstones)
    except FileNotFoundError:
        return None  # cleaned after a newer one: the caller tries again
    commits = _probe(table, hint, read=True)
    if read_hint(table) != hint:
        return None  # a cleanup may have removed commits after the old checkpoint
    return replay(start, commits)  # type: ignore[arg-type]


def read_snapshot(table: Path, attempts: int = 5, tombstones: bool = True) -> Snapshot:
    """The state at the newest commit: newest checkpoint, then the commits after it. Without
    `tombstones`, only the commits' (what a reader needs: the entries)."""
    for _attempt in range(attempts):
        snap = _from_hint(table, tombstones)
        if snap is not None:
            return snap
        if read_hint(table) is None:
            break
    return _read_listed(table, attempts, tombstones)


def _read_listed(table: Path, attempts: int, tombstones: bool) -> Snapshot:
    """read_snapshot by listing the log (a log without `_last_checkpoint`)."""
    for attempt in range(attempts):
        commits, checkpoints = _listing(table)
        if not commits and not checkpoints:
            return Snapshot(-1)
        base = checkpoints[-1] if checkpoints else None
        try:
            if base is None:
                start, after = Snapshot(-1), commits
            else:
                start = _read_checkpoint(table, base, tombstones)
                after = [c for c in commits if c > base]
            expected = list(range(start.version + 1, max(commits[-1:] + [start.version]) + 1))
            if after != expected:
                missing = sorted(set(expected) - set(after))
                raise LogError(f"table {table}: its log lacks commit(s) {missing[:5]} (in {log_dir(table)}); "
                               f"the table was damaged or its log cleaned by hand")
            return replay(start, ((v, _read_json(log_dir(table) / commit_name(v))) for v in after))
        except FileNotFoundError:
            # A log cleanup removed a file between the listing and the read: list again.
            if attempt == attempts - 1:
                raise LogError(f"table {table}: its log changed under every read attempt") from None
    raise AssertionError("unreachable")


def _write_tmp(table: Path, doc: Mapping[str, Any]) -> Path:
    tmp = log_dir(table) / f".tmp-{os.getpid()}-{secrets.token_hex(6)}.json"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, sort_keys=True, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    return tmp


def commit(table: Path, op: str, add: Iterable[Entry] = (), remove: Iterable[str] = (),
           check: Callable[[Snapshot], None] | None = None, attempts: int = 1000,
           clock: Callable[[], float] = time.time) -> int:
    """Append one commit; return its version. `check(snapshot)` (run on the state the commit
    goes after, whenever another writer got there first) raises Conflict to give up."""
    log_dir(table).mkdir(parents=True, exist_ok=True)
    add, remove = list(add), list(remove)
    version = latest_version(table) + 1
    tmp = _write_tmp(table, {"log": LOG_VERSION, "op": op, "time": clock(),
                             "add": [e.to_json() for e in add], "remove": remove})
    try:
        for _attempt in range(attempts):
            try:
                os.link(tmp, log_dir(table) / commit_name(version))
            except FileExistsError:
                version = latest_version(table) + 1
                if check is not None:
                    check(read_snapshot(table, tombstones=False))
                continue
            if version and version % CHECKPOINT_EVERY == 0:
                try:
                    write_checkpoint(table, read_snapshot(table))
                except (OSError, LogError) as exc:  # the next one will do; readers replay meanwhile
                    log.warning("table %s: checkpoint %d not written: %s", table, version, exc)
            return version
        raise LogError(f"table {table}: no free log version after {attempts} attempts")
    finally:
        tmp.unlink(missing_ok=True)


def write_checkpoint(table: Path, snapshot: Snapshot) -> None:
    """The whole state at the snapshot's version (read with tombstones), then `_last_checkpoint`;
    tombstones of directories already deleted (vacuumed) are left out, so the checkpoint does
    not grow with the table's age. Entries and tombstones go on two lines: a reader parses only
    the first (after a compaction of 100,000 batches the second holds 100,000 paths)."""
    tombstones = {p: t for p, t in sorted(snapshot.tombstones.items()) if (table / p).exists()}
    head = {"log": LOG_VERSION, "version": snapshot.version,
            "entries": [e.to_json() for _p, e in sorted(snapshot.entries.items())]}
    tmp = log_dir(table) / f".tmp-{os.getpid()}-{secrets.token_hex(6)}.json"
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in (head, {"tombstones": tombstones}):
            json.dump(doc, f, sort_keys=True, separators=(",", ":"))
            f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, log_dir(table) / checkpoint_name(snapshot.version))
    _write_hint(table, snapshot.version)


def clean_log(table: Path, now: float, retention_secs: float) -> int:
    """Remove log files older than the retention period that the newest checkpoint made
    unnecessary; return how many."""
    commits, checkpoints = _listing(table)
    # The checkpoint `_last_checkpoint` names, not the newest listed: readers trust the commits
    # after the one it names (a checkpoint file can be there before its hint is).
    newest = read_hint(table)
    if newest is None:
        if not checkpoints:
            return 0
        newest = checkpoints[-1]
    # Commits the newest checkpoint covers, except its own version's: the newest commit file
    # always stays, so a writer listing the log never takes a version that was already used.
    names = [commit_name(c) for c in commits if c < newest] + [checkpoint_name(c) for c in checkpoints if c < newest]
    removed = 0
    for name in names:
        path = log_dir(table) / name
        try:
            if now - path.stat().st_mtime >= retention_secs:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            pass
    return removed
