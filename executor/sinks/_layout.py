"""On-disk layout of a sink table, its staging area and its metadata file. No Spark here.

    <table>/
      _storm_sink.json                      table metadata: columns, schema, partitioning, dedupe key
      storm_batch_id=<batch id>/            one committed batch (what Spark writes, renamed in whole)
        _storm_batch.json                   its manifest: rows and data file sizes (see _integrity.py)
        [<partition col>=<value>/]part-*.parquet
      _staging/
        <owner>.lock                        flock held by a live sink task for as long as it runs
        <owner>/<batch id>/                 a batch being written by that task

A batch is written by Spark into the owner's staging directory and then committed by one
rename(2) of that directory to `storm_batch_id=<batch id>`: readers see all of it or none of
it. Spark (and pyarrow) skip paths starting with "_" or ".", so neither staging nor the
metadata file is ever read as data. A task killed mid-write leaves its staging directory
behind with an unlocked lock file (the kernel drops flocks of dead processes); the next sink
task to open the table removes it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from executor.errors import ClearError

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
META_FILE = "_storm_sink.json"
BATCH_COLUMN = "storm_batch_id"
WRITTEN_AT_COLUMN = "storm_written_at"
TASK_COLUMN = "storm_task_id"
AUDIT_COLUMNS = (WRITTEN_AT_COLUMN, TASK_COLUMN, BATCH_COLUMN)
META_VERSION = 1
FORMATS = ("parquet", "orc", "json")


class SinkTableError(ClearError, RuntimeError):
    """The table on disk cannot be used as configured (or is not a sink table); the message names
    the table, so it is reported as one line."""


def table_dir(path: str | os.PathLike) -> Path:
    """The absolute local directory of a table path (plain path or file:// URL)."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif "://" in text:
        raise SinkTableError(f"sink table path {text!r}: only local paths (or file:// URLs) are supported")
    return Path(text).expanduser().absolute()


def spark_uri(path: Path) -> str:
    # Explicit scheme: a Spark whose default filesystem is HDFS must still write locally, because
    # the commit is a local rename.
    return "file://" + str(path)


def format_options(fmt: str) -> dict[str, str]:
    """Writer and reader options of a table format."""
    if fmt == "json":  # the default keeps milliseconds only
        return {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"}
    return {}


def batch_dir_name(batch_id: str) -> str:
    return f"{BATCH_COLUMN}={batch_id}"


def committed_batches(table: Path) -> list[str]:
    """Batch ids of the committed batches, oldest first (batch ids sort by commit time)."""
    prefix = BATCH_COLUMN + "="
    try:
        names = os.listdir(table)
    except FileNotFoundError:
        return []
    return sorted(n[len(prefix):] for n in names if n.startswith(prefix))


def new_owner(task_id: int) -> str:
    return f"t{task_id}-p{os.getpid()}-{secrets.token_hex(3)}"


class BatchIds:
    """Batch ids that sort by creation time and are unique across tasks, processes and restarts."""

    def __init__(self, owner: str):
        self._owner = owner
        self._seq = 0

    def next(self) -> str:
        self._seq += 1
        now = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}Z"
        # The letters in it keep Spark's partition-value inference from turning it into a number.
        return f"{stamp}-{self._owner}-{self._seq:06d}"


# ---- staging ----

def try_lock(path: Path, create: bool = False) -> int | None:
    """Open (with `create`, creating it) and exclusively flock `path` without blocking; the fd,
    or None when held elsewhere (or missing). The kernel drops the lock when its holder dies."""
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def clean_staging(table: Path) -> list[str]:
    """Remove the staging leftovers of sink tasks that are no longer running; return their names.

    An owner is dead when its lock file can be locked. A staging directory without a lock file
    is a leftover too: owners create the lock before the directory and remove it after.
    """
    staging = table / STAGING_DIR
    try:
        names = set(os.listdir(staging))
    except FileNotFoundError:
        return []
    removed = []
    for name in sorted(names):
        if name.endswith(".lock"):
            owner = name[:-len(".lock")]
            fd = try_lock(staging / name)
            if fd is None:
                continue  # a live task holds it (or it vanished meanwhile)
            try:
                shutil.rmtree(staging / owner, ignore_errors=True)
                os.unlink(staging / name)
            except FileNotFoundError:
                pass  # another task cleaned it at the same time
            finally:
                os.close(fd)
            removed.append(owner)
        elif (staging / name).is_dir() and f"{name}.lock" not in names:
            shutil.rmtree(staging / name, ignore_errors=True)
            removed.append(name)
    if removed:
        log.warning("Spark sink %s: removed staging leftovers of stopped writers: %s", table, removed)
    return removed


class Staging:
    """One sink task's private staging directory, guarded by an flock for as long as it is open."""

    def __init__(self, table: Path, owner: str):
        self.table = table
        self.owner = owner
        self.dir = table / STAGING_DIR / owner
        self._lock_path = table / STAGING_DIR / f"{owner}.lock"
        self._fd: int | None = None

    def open(self) -> None:
        if self._fd is not None:
            return
        (self.table / STAGING_DIR).mkdir(parents=True, exist_ok=True)
        for _attempt in range(5):
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)  # our own fresh name: at most a cleaner holds it, briefly
            # A cleaner may have locked the new file between our create and our flock, taken it
            # for a dead owner's and unlinked it; a lock on an unlinked file protects nothing.
            try:
                same = os.fstat(fd).st_ino == os.stat(self._lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                self.dir.mkdir(exist_ok=True)
                return
            os.close(fd)
        raise SinkTableError(f"could not take the staging lock {self._lock_path}")

    def batch_dir(self, batch_id: str) -> Path:
        return self.dir / batch_id

    def close(self) -> None:
        if self._fd is None:
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self._lock_path)
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None


def commit_batch(staged: Path, table: Path, batch_id: str) -> Path:
    """Make a fully written staged batch visible, atomically (one rename on one filesystem)."""
    final = table / batch_dir_name(batch_id)
    os.rename(staged, final)
    return final


# ---- metadata ----

# Keys every metadata file has, and the JSON type of each (None: null allowed).
_META_KEYS = {"version": (int,), "format": (str,), "columns": (list,), "partition_by": (list,),
              "dedupe_fields": (list, type(None)), "schema": (str,)}


def check_table_path(table: Path) -> None:
    """Raise SinkTableError unless `table` is (or can become) a directory this process can write.

    Only what the file system says, no Spark: a regular file in the way, a parent that is a file
    or not writable, a table directory that is not writable.
    """
    if table.exists() and not table.is_dir():
        raise SinkTableError(f"table {table}: the path is a regular file, not a directory")
    probe = table
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe != table and not probe.is_dir():
        raise SinkTableError(f"table {table}: cannot create it, {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "the table directory" if probe == table else f"its parent {probe}"
        raise SinkTableError(f"table {table}: {what} is not writable by this user")


def read_meta(table: Path) -> dict[str, Any] | None:
    """The table's metadata, None when it has none; SinkTableError (naming the file) when it
    cannot be read or is not metadata this code understands."""
    path = table / META_FILE
    if table.exists() and not table.is_dir():
        raise SinkTableError(f"table {table}: the path is a regular file, not a directory")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SinkTableError(f"table {table}: cannot read its metadata {path}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise SinkTableError(f"table {table}: metadata {path} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise SinkTableError(f"table {table}: metadata {path} is not a JSON object")
    problem = meta_problem(meta)
    if problem:
        raise SinkTableError(f"table {table}: metadata {path} {problem}")
    return meta


def meta_problem(meta: dict[str, Any]) -> str | None:
    """What is wrong with a metadata dict (a phrase), or None. A pure function."""
    version = meta.get("version")
    if "version" not in meta:
        return "has no 'version' key (not a storm-py sink table?)"
    if isinstance(version, bool) or not isinstance(version, int):
        return f"has version {version!r}, not a number"
    if version > META_VERSION:
        return (f"has format version {version}, newer than this storm-py reads (up to {META_VERSION}); "
                f"upgrade storm-py")
    if version < 1:
        return f"has version {version}, not a storm-py sink table version"
    for key, types in _META_KEYS.items():
        if key not in meta:
            return f"lacks the key {key!r}"
        if not isinstance(meta[key], types):
            return f"key {key!r} holds {meta[key]!r:.60}, not a {' or '.join(t.__name__ for t in types)}"
    if meta["format"] not in FORMATS:
        return f"has format {meta['format']!r}, not one of {list(FORMATS)}"
    for key in ("columns", "partition_by", "dedupe_fields"):
        if not all(isinstance(n, str) for n in meta[key] or []):
            return f"key {key!r} holds {meta[key]!r:.60}, not a list of names"
    try:
        schema = json.loads(meta["schema"])
    except ValueError:
        return "key 'schema' does not hold a JSON schema"
    names = [f.get("name") for f in schema.get("fields", [])] if isinstance(schema, dict) else None
    if names != meta["columns"]:
        return f"key 'schema' names the columns {names}, but key 'columns' says {meta['columns']}"
    return None


def create_meta(table: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Write the table metadata unless it exists; return the metadata in force (first writer wins)."""
    tmp = table / f"{META_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        table.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")
        try:
            os.link(tmp, table / META_FILE)  # fails if it exists: sink tasks racing agree on one
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    except OSError as exc:
        raise SinkTableError(f"table {table}: cannot write its metadata {table / META_FILE}: "
                             f"{exc.strerror or exc}") from None
    existing = read_meta(table)
    assert existing is not None
    return existing


def check_meta(meta: dict[str, Any], *, table: Path, columns: list[str], format: str,
               partition_by: list[str], dedupe_fields: list[str] | None) -> None:
    """Raise SinkTableError when an existing table was created with another layout."""
    want = {"columns": columns, "format": format, "partition_by": partition_by, "dedupe_fields": dedupe_fields}
    diffs = [f"{k}: table has {meta.get(k)!r}, sink has {v!r}" for k, v in want.items() if meta.get(k) != v]
    if diffs:
        raise SinkTableError(f"sink table {table} was created with another layout ({'; '.join(diffs)}); "
                             f"write to a new path or configure the sink like the table")
