"""The pure decisions of `DirectorySpout` (executor/spouts/directory.py), free of I/O so they can be
unit-tested alone: which names are data files and which task reads them, how far a file's acked
prefix reaches when acks arrive out of order, when a file is done, how a line's bytes become its
text, and how a file's offsets are written to and read from its bookkeeping record."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from typing import NamedTuple

from executor.grouping import mix32

MARKER_SUFFIX = ".done"
RECORD_VERSION = 1


class LineId(NamedTuple):
    """A line's message id: the file's name in the directory and the byte offset the line starts at."""

    file: str
    offset: int


# ---- which files, which task ----

def stable_hash(name: str) -> int:
    """The same number in every process and run (Python's hash() of a str is salted per process):
    CRC-32 of the name through MurmurHash3's finalizer (executor/grouping.py says why)."""
    return mix32(zlib.crc32(name.encode("utf-8", "surrogateescape")))


def owner_index(name: str, num_tasks: int) -> int:
    return stable_hash(name) % num_tasks


def is_data_name(name: str) -> bool:
    """Spark's file-source rule (names starting with '.' or '_' are hidden or in progress), plus
    the markers this spout writes itself."""
    return bool(name) and name[0] not in "._" and not name.endswith(MARKER_SUFFIX)


def files_to_read(names: Iterable[str], task_index: int, num_tasks: int,
                  exclude: Iterable[str] = ()) -> list[str]:
    """The data files among `names` (the regular files of the directory) that this task reads, in
    name order: not excluded (already being read, say) and without a done marker beside them."""
    present = set(names)
    skip = set(exclude)
    return sorted(n for n in present
                  if is_data_name(n) and n not in skip and n + MARKER_SUFFIX not in present
                  and owner_index(n, num_tasks) == task_index)


# ---- one file's offsets ----

class FileLedger:
    """Which lines of one file are acked, as (a) the contiguous acked prefix `committed` (every line
    starting before it is acked; `committed_line` lines) and (b) the starts of acked lines beyond
    it (acks arrive out of order). The reader reports each line's extent (`line_read`), so a
    prefix can advance over lines acked earlier; after a restart, lines in `acked` are skipped
    as they are read again."""

    def __init__(self, committed: int = 0, committed_line: int = 0, acked: Iterable[int] = ()):
        self.committed = committed
        self.committed_line = committed_line
        self.acked = {a for a in acked if a >= committed}
        self._ends: dict[int, int] = {}  # start -> end of lines read and not yet in the prefix
        self.size: int | None = None     # where the reader found the file's end

    def line_read(self, start: int, end: int) -> bool:
        """The reader found the line [start, end). True: emit it; False: it was acked before a
        restart (it is now folded in)."""
        if start < self.committed:
            return False
        self._ends[start] = end
        if start in self.acked:
            self._advance()
            return False
        return True

    def ack(self, start: int) -> bool:
        """The line starting at `start` was acked; False when it is unknown or acked already."""
        if start not in self._ends or start in self.acked:
            return False
        self.acked.add(start)
        self._advance()
        return True

    def _advance(self) -> None:
        ends = self._ends
        while self.committed in self.acked and self.committed in ends:
            self.acked.discard(self.committed)
            self.committed = ends.pop(self.committed)
            self.committed_line += 1

    def reached_end(self, size: int) -> None:
        self.size = size

    @property
    def uncommitted(self) -> int:
        """Lines read and not yet in the acked prefix (in flight, or acked past a gap)."""
        return len(self._ends)

    @property
    def done(self) -> bool:
        """Every line was read and acked (an empty file is done as soon as its end is seen)."""
        return self.size is not None and self.committed >= self.size


# ---- lines ----

def strip_newline(raw: bytes) -> bytes:
    """A line's bytes without its `\\n` or `\\r\\n` (a lone `\\r` is content)."""
    if raw.endswith(b"\n"):
        return raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    return raw


def line_text(raw: bytes) -> tuple[str, bool]:
    """A line's text without its newline, and whether it was valid UTF-8 (else bad bytes became
    U+FFFD: a tuple's str must be valid UTF-8, and dropping the line would lose data)."""
    body = strip_newline(raw)
    try:
        return body.decode("utf-8"), True
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace"), False


# ---- the persisted record ----

def encode_record(name: str, identity: tuple[int, int], ledger: FileLedger) -> bytes:
    """`identity` is (size, mtime_ns) of the file when it was opened: a record left behind for a
    file since replaced by another of the same name must not apply to the new one."""
    size, mtime_ns = identity
    return json.dumps({"v": RECORD_VERSION, "file": name, "size": size, "mtime_ns": mtime_ns,
                       "committed": ledger.committed, "line": ledger.committed_line,
                       "acked": sorted(ledger.acked)}, separators=(",", ":")).encode()


def decode_record(data: bytes, name: str, identity: tuple[int, int]) -> FileLedger | None:
    """The ledger a record restores; None when the record is for another file (a different name,
    size or mtime). Raises ValueError when the record is not one this module wrote."""
    try:
        rec = json.loads(data)
        fields = (rec["v"], rec["file"], rec["size"], rec["mtime_ns"], rec["committed"], rec["line"], rec["acked"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"malformed offset record: {exc}") from None
    version, file, size, mtime_ns, committed, line, acked = fields
    ints = [size, mtime_ns, committed, line, *acked] if isinstance(acked, list) else None
    if version != RECORD_VERSION or ints is None or not all(type(i) is int and i >= 0 for i in ints):
        raise ValueError("malformed offset record: unexpected version or values")
    if file != name or (size, mtime_ns) != tuple(identity):
        return None
    if committed > size:
        raise ValueError(f"malformed offset record: committed offset {committed} beyond size {size}")
    return FileLedger(committed, line, acked)


def record_file_name(record: bytes) -> str | None:
    """The data file a record is about (None if unreadable), for pruning records left behind."""
    try:
        name = json.loads(record)["file"]
    except (ValueError, TypeError, KeyError):
        return None
    return name if isinstance(name, str) else None


# ---- reporting ----

class ErrorLatch:
    """Report a condition once while it lasts, and again only after it cleared and came back
    (a missing directory is reported once, not on every poll)."""

    def __init__(self):
        self._active: set = set()

    def trip(self, key) -> bool:
        """The condition holds; True when it just started (report it now)."""
        if key in self._active:
            return False
        self._active.add(key)
        return True

    def clear(self, key) -> bool:
        """The condition is over; True when it had been reported."""
        if key in self._active:
            self._active.discard(key)
            return True
        return False
