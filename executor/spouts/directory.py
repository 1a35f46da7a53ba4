"""`DirectorySpout`: a reliable spout over complete files appearing in a directory (Spark's file
source, Storm's storm-hdfs HdfsSpout). The decisions are pure functions in directory_ledger.py;
this module is the orchestration and the file I/O."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import deque

from executor.checkpoint.api import RewindableSpout
from executor.checkpoint.barrier_mode import barrier_only
from executor.errors import ClearError, InvalidTopologyError
from executor.spouts.directory_ledger import (
    MARKER_SUFFIX,
    ErrorLatch,
    FileLedger,
    LineId,
    decode_record,
    encode_record,
    files_to_read,
    line_text,
    owner_index,
    record_file_name,
    strip_newline,
)
from executor.spouts.in_flight import in_flight_limit

log = logging.getLogger(__name__)

DONE_MODES = ("marker", "move", "delete")
OFFSETS_DIR = ".storm-py-offsets"  # hidden, so never taken for data
DONE_DIR = "done"
_FLUSH_SECS = 0.05       # offsets are written at most this often (and on deactivate/close/done)
_BATCH = 64              # lines read or replayed per next_tuple call: it must return quickly
_UNCOMMITTED_PER_IN_FLIGHT = 10  # read-ahead past an unacked line, as storm-kafka-client's maxUncommittedOffsets
_SKIP_CHUNK = 1 << 16    # bytes read at a time while skipping an over-long line
_POSITION = "read position:"      # + a file's name: its state key (exactly-once)
SOURCE_KEY = "$source"            # where it reads: executor/savepoints/sources.py


class DirectorySpoutError(ClearError):
    """What DirectorySpout reports through collector.report_error (it never raises at run time)."""


class _File:
    """A file this task has opened: its ledger, and its handle while lines remain to be read."""

    __slots__ = ("name", "path", "handle", "ledger", "identity", "ino", "pos", "line_no", "bad_utf8", "too_long")

    def __init__(self, name, path, handle, ledger: FileLedger, st: os.stat_result):
        self.name = name
        self.path = path
        self.handle = handle
        self.ledger = ledger
        self.identity = (st.st_size, st.st_mtime_ns)
        self.ino = (st.st_dev, st.st_ino)
        self.pos = ledger.committed          # where the next line starts
        self.line_no = ledger.committed_line + 1
        self.bad_utf8 = 0
        self.too_long = 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class OffsetStore:
    """One small JSON record per file being read, in the hidden bookkeeping directory. A record's
    file name is a digest of the data file's name (any name fits; the name is inside)."""

    def __init__(self, directory: str):
        self.dir = directory

    def path(self, name: str) -> str:
        digest = hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.dir, digest + ".json")

    def load(self, name: str) -> bytes | None:
        try:
            with open(self.path(name), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def save(self, name: str, data: bytes) -> None:
        """Atomic: a reader (or a restart after SIGKILL) sees the old record or the new one. Not
        fsynced: a process kill loses nothing written, a machine crash may lose the last writes
        (lines replayed: still at-least-once)."""
        path = self.path(name)
        tmp = path + ".tmp"  # one writer per record (the task owning the file): a fixed name is safe
        try:
            self._write(tmp, data)
        except FileNotFoundError:
            try:
                os.mkdir(self.dir)  # mkdir, not makedirs: never create the watched directory itself
            except FileExistsError:
                pass
            self._write(tmp, data)
        os.replace(tmp, path)

    @staticmethod
    def _write(path: str, data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data)

    def remove(self, name: str) -> None:
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass

    def records(self) -> list[str]:
        try:
            return [os.path.join(self.dir, n) for n in os.listdir(self.dir) if n.endswith(".json")]
        except OSError:  # none yet, or unusable (reported when a record is written)
            return []


def _validated(path, done, max_in_flight, poll_secs, max_line_bytes) -> str:
    def bad(param, allowed, value):
        return InvalidTopologyError(f"DirectorySpout: {param} must be {allowed}, got {value!r}")

    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text:
        raise bad("path", "a non-empty str or os.PathLike naming a directory", path)
    if done not in DONE_MODES:
        raise bad("done", " or ".join(repr(m) for m in DONE_MODES), done)
    if max_in_flight is not None and (type(max_in_flight) is not int or max_in_flight < 1):
        raise bad("max_in_flight", "None or an int >= 1", max_in_flight)
    if isinstance(poll_secs, bool) or not isinstance(poll_secs, (int, float)) or not poll_secs > 0:
        raise bad("poll_secs", "a number of seconds > 0", poll_secs)
    if max_line_bytes is not None and (type(max_line_bytes) is not int or max_line_bytes < 1):
        raise bad("max_line_bytes", "None or an int >= 1", max_line_bytes)
    return text


def _task_position(context) -> tuple[int, int]:
    """(this task's index among the component's tasks, their count). TopologyContext offers both
    as properties; a context offering methods, or only component_tasks(), works too."""
    def value(v):
        return v() if callable(v) else v

    index = value(context.this_task_index)
    tasks = getattr(context, "this_component_tasks", None)
    tasks = value(tasks) if tasks is not None else context.component_tasks(context.this_component_id)
    return int(index), len(tasks)


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


class DirectorySpout(RewindableSpout):
    """Emits `[line]` (field `line`, default stream) for each line of each complete file in `path`.

    **Files must be complete when they appear**, as for Spark's file source: write a file
    elsewhere (or under a name starting with `.` or `_`) and rename it into `path`. A file is read
    once, to the end it has when reached: what is appended later is not read.

    - Skipped: names starting with `.` or `_` (hidden, in-progress), directories, `*.done`
      markers, and the spout's bookkeeping (`path/.storm-py-offsets/`).
    - Files are read in name order (among those present at a directory scan), one after another
      per task (the next one while the last one's lines await acks); the directory is scanned
      when there is nothing left to read, at most every `poll_secs`.
    - Lines: UTF-8 text without the trailing `\\n` or `\\r\\n`; a last line without a newline
      counts; empty lines are emitted as `""`. A line that is not valid UTF-8 is emitted with
      U+FFFD for the bad bytes, and the first such line of a file is reported (file, line number,
      byte offset). A line longer than `max_line_bytes` (default: a quarter of
      `topology.max.tuple.size.bytes`) is reported the same way and skipped (counted as acked).
    - Message id: `LineId(file, offset)`, a named tuple of the file's name and the line's byte
      offset. A failed (or timed-out) line is emitted again; lines emitted and not yet acked are
      kept in memory, at most `max_in_flight` (lowered by `topology.max.spout.pending`).
    - Done: once every line of a file was acked, `done="marker"` creates an empty `<name>.done`
      beside it (a file with a marker is never read), `done="move"` moves it into `path/done/`
      (a free name `<name>.1`, ... if taken), `done="delete"` deletes it. An empty file is done at
      once.
    - Restart: per file, the contiguous acked byte offset and the acked lines beyond it are
      written atomically to `path/.storm-py-offsets/` at most every 50 ms, on deactivate/close
      and before a file is marked done; a restarted topology resumes there and emits no line
      acked before the last write. At-least-once: a line acked within 50 ms before the worker was
      killed (SIGKILL) may be emitted again.
    - Parallelism: a file is read by task `stable_hash(name) % tasks` (CRC-32, mixed), so no
      line is read by two tasks and each record has one writer. Run one DirectorySpout component
      per directory.
    - Exactly-once (`topology.state.exactly.once: true`): a stateful spout. Its read position
      (per file not yet done: the byte offset and line after the last line emitted) is its
      checkpointed state instead of the offset records; a line is acked, and a file marked done,
      once the checkpoint after it commits; at start and after a rollback it reads on from the
      committed positions. `max_in_flight` defaults to 100,000 there (lines count until a
      commit; 1,000 in acked mode).
    - Trouble is reported through `collector.report_error` once per occurrence, never raised: a
      missing or unreadable directory (polled until it is back), an unreadable file (retried at
      later scans), a file deleted or replaced while being read (its unacked lines are dropped).
    """

    def __init__(self, path, done: str = "marker", *, max_in_flight: int | None = None, poll_secs: float = 0.2,
                 max_line_bytes: int | None = None):
        self.path = _validated(path, done, max_in_flight, poll_secs, max_line_bytes)
        self.done = done
        self.max_in_flight = max_in_flight
        self.poll_secs = float(poll_secs)
        self.max_line_bytes = max_line_bytes

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(["line"])

    # ---- lifecycle ----
    def open(self, conf, context, collector) -> None:
        self._collector = collector
        self._dir = os.path.abspath(self.path)
        self._store = OffsetStore(os.path.join(self._dir, OFFSETS_DIR))
        self._task_index, self._num_tasks = _task_position(context)
        self._exactly_once = barrier_only(conf)
        self._limit = in_flight_limit(self.max_in_flight, conf.get("topology.max.spout.pending"), self._exactly_once)
        self._state = None
        self._positions: dict[str, list] = {}  # exactly-once: the committed ones, by file name
        self._finished: set[str] = set()       # exactly-once: files done since the last prepare
        tuple_max = int(conf.get("topology.max.tuple.size.bytes") or 16 << 20)
        # U+FFFD takes 3 bytes for 1 bad byte: a quarter of the tuple bound always fits in a tuple
        self._max_line = self.max_line_bytes or max(1, tuple_max // 4)
        self._files: dict[str, _File] = {}       # opened and not done: reading, or awaiting acks
        self._unmarked: dict[str, _File] = {}    # all acked, marking done failed: retried at polls
        self._queue: deque[str] = deque()        # names to read next, in name order
        self._reading: _File | None = None
        self._in_flight: dict[LineId, str] = {}  # emitted, not acked: the text, for replay
        self._replay: deque[LineId] = deque()
        self._dirty: set[str] = set()
        self._latch = ErrorLatch()
        self._pruned = False
        self._next_scan = self._next_check = self._last_flush = 0.0
        log.info("DirectorySpout task %d/%d reading %s (done=%s, in flight <= %d)",
                 self._task_index, self._num_tasks, self._dir, self.done, self._limit)
        if not os.path.isdir(self._dir):  # said at once; the scans keep polling for it
            self._report(("dir",), f"DirectorySpout: the directory {self._dir} does not exist (or is not a "
                                   f"directory); polling until it is there")

    def activate(self) -> None:
        self._next_scan = 0.0  # look at the directory at once

    def deactivate(self) -> None:
        self._flush(time.monotonic(), force=True)

    def close(self) -> None:
        self._flush(time.monotonic(), force=True)
        for f in self._files.values():
            f.close()
        self._reading = None

    # ---- exactly-once (executor/checkpoint/spout_side.py calls these) ----
    def init_state(self, state) -> None:
        """At start and after every rollback: forget what was read since the committed positions
        and read on from them (the files are opened again at the next scan)."""
        self._state = state
        self._positions = {key[len(_POSITION):]: value for key, value in state.items()
                           if isinstance(key, str) and key.startswith(_POSITION)}
        # A file is marked done once a commit covers it, and never read again: a start from an
        # older savepoint cannot read it again (executor/savepoints/sources.py refuses one)
        source = {"kind": "directory", "path": self._dir, "done": self.done}
        if state.get(SOURCE_KEY) != source:
            state.put(SOURCE_KEY, source)
        for f in self._files.values():
            f.close()
        self._files.clear()
        self._queue.clear()
        self._reading = None
        self._in_flight.clear()
        self._replay.clear()
        self._dirty.clear()
        self._finished.clear()
        self._next_scan = 0.0

    def pre_prepare(self, txid: int) -> None:
        """The read positions into the state the checkpoint stores (once per checkpoint)."""
        state = self._state
        for name in self._finished:
            state.delete(_POSITION + name)
        self._finished.clear()
        for f in self._files.values():
            state.put(_POSITION + f.name, [f.pos, f.line_no - 1, *f.identity])

    # ---- the spout loop ----
    def next_tuple(self) -> None:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.poll_secs
            self._check_tracked()
        steps = self._emit_replays(_BATCH)
        if steps < _BATCH:
            self._read_lines(_BATCH - steps)
        if self._reading is None and not self._queue and now >= self._next_scan:
            self._next_scan = now + self.poll_secs
            self._scan()
        self._flush(now)

    def ack(self, msg_id) -> None:
        lid = _line_id(msg_id)
        if lid is None or self._in_flight.pop(lid, None) is None:
            return  # its file vanished (bookkeeping dropped), or not ours
        f = self._files.get(lid.file)
        if f is None:
            return
        if f.ledger.ack(lid.offset):
            self._dirty.add(f.name)
        self._finish_if_done(f)
        self._flush(time.monotonic())

    def fail(self, msg_id) -> None:
        lid = _line_id(msg_id)
        if lid is not None and lid in self._in_flight:
            self._replay.append(lid)

    # ---- emitting ----
    def _emit_replays(self, budget: int) -> int:
        n = 0
        while self._replay and n < budget:
            lid = self._replay.popleft()
            text = self._in_flight.get(lid)
            if text is None:
                continue  # acked meanwhile, or its file vanished
            n += 1
            self._collector.emit([text], msg_id=lid)
        return n

    def _read_lines(self, budget: int) -> None:
        # Read ahead past an unacked line only so far: its acked successors are held (in memory
        # and in the offset record) until the gap closes.
        uncommitted = sum(f.ledger.uncommitted for f in self._files.values())
        max_uncommitted = self._limit * _UNCOMMITTED_PER_IN_FLIGHT
        for _ in range(budget):
            if len(self._in_flight) >= self._limit or uncommitted >= max_uncommitted:
                return
            f = self._reading or self._open_next()
            if f is None:
                return
            if self._read_line(f):
                uncommitted += 1

    def _read_line(self, f: _File) -> bool:
        """Read one line of the file being read and emit it if due; False at its end or on an error."""
        start = f.pos
        try:
            raw = f.handle.readline(self._max_line + 2)  # + room for "\r\n"
            end = start + len(raw)
            truncated = len(raw) == self._max_line + 2 and not raw.endswith(b"\n")
            if truncated:
                end += self._skip_rest(f.handle)  # never hold an over-long line in memory
        except OSError as exc:
            self._lose(f, "could not be read", exc)
            return False
        if not raw:
            self._end_of_file(f)
            return False
        f.pos, line_no = end, f.line_no
        f.line_no += 1
        if not f.ledger.line_read(start, end):
            return True  # acked before a restart
        if truncated or len(strip_newline(raw)) > self._max_line:
            self._skip_long_line(f, start, end, line_no)
            return True
        text, valid = line_text(raw)
        if not valid:
            self._note_bad_utf8(f, start, line_no)
        lid = LineId(f.name, start)
        # before emit: without ackers, emit acks at once; exactly-once never replays (a rollback
        # reads again), so the text is not kept
        self._in_flight[lid] = True if self._exactly_once else text
        self._collector.emit([text], msg_id=lid)
        return True

    @staticmethod
    def _skip_rest(handle) -> int:
        skipped = 0
        while True:
            chunk = handle.readline(_SKIP_CHUNK)
            skipped += len(chunk)
            if not chunk or chunk.endswith(b"\n"):
                return skipped

    def _skip_long_line(self, f: _File, start: int, end: int, line_no: int) -> None:
        f.too_long += 1
        if f.too_long == 1:
            self._report_now(f"DirectorySpout: {f.path}: line {line_no} (byte offset {start}) has "
                             f"{end - start} bytes, more than max_line_bytes={self._max_line}; skipped "
                             f"(further such lines of this file are only counted in the log)")
        f.ledger.ack(start)  # consumed: the file can still complete
        self._dirty.add(f.name)

    def _note_bad_utf8(self, f: _File, start: int, line_no: int) -> None:
        f.bad_utf8 += 1
        if f.bad_utf8 == 1:
            self._report_now(f"DirectorySpout: {f.path}: line {line_no} (byte offset {start}) is not valid "
                             f"UTF-8; emitted with U+FFFD for the bad bytes (further such lines of this "
                             f"file are only counted in the log)")

    def _end_of_file(self, f: _File) -> None:
        f.close()
        f.ledger.reached_end(f.pos)
        self._reading = None
        self._finish_if_done(f)

    # ---- files ----
    def _scan(self) -> None:
        try:
            with os.scandir(self._dir) as entries:
                names = [e.name for e in entries if _is_file(e)]
        except OSError as exc:
            self._report(("dir",), f"DirectorySpout: cannot list the directory {self._dir}: {exc}; "
                                   f"polling until it is back")
            return
        if self._latch.clear(("dir",)):
            log.info("DirectorySpout: directory %s is readable again", self._dir)
        if not self._pruned:
            self._prune_records(names)
            self._pruned = True
        busy = set(self._files) | set(self._unmarked)
        self._queue = deque(files_to_read(names, self._task_index, self._num_tasks, exclude=busy))
        if self._positions:  # exactly-once: the positions of files done (or gone) leave the state
            present = set(names)
            gone = [n for n in self._positions if n not in present or n + MARKER_SUFFIX in present]
            for name in gone:
                del self._positions[name]
            self._finished.update(gone)

    def _open_next(self) -> _File | None:
        while self._queue:
            name = self._queue.popleft()
            path = os.path.join(self._dir, name)
            try:
                handle = open(path, "rb")
            except FileNotFoundError:
                log.info("DirectorySpout: %s vanished before it was read", path)
                continue
            except OSError as exc:
                self._report(("open", name), f"DirectorySpout: cannot open {path}: {exc}; "
                                             f"skipped for now, tried again at later scans")
                continue
            try:
                f = self._start(name, path, handle)
            except OSError as exc:
                handle.close()
                self._report(("open", name), f"DirectorySpout: cannot read {path}: {exc}; "
                                             f"skipped for now, tried again at later scans")
                continue
            self._latch.clear(("open", name))
            self._latch.clear(("lost", name))
            self._files[name] = self._reading = f
            return f
        return None

    def _start(self, name: str, path: str, handle) -> _File:
        st = os.fstat(handle.fileno())
        ledger = self._load(name, (st.st_size, st.st_mtime_ns))
        handle.seek(ledger.committed)
        return _File(name, path, handle, ledger, st)

    def _load(self, name: str, identity: tuple[int, int]) -> FileLedger:
        """The file's ledger from its record, or a fresh one (from the beginning: at-least-once);
        in exactly-once mode from its committed position."""
        if self._exactly_once:
            return self._committed(name, identity)
        try:
            data = self._store.load(name)
            ledger = decode_record(data, name, identity) if data is not None else FileLedger()
        except (OSError, ValueError) as exc:
            # an unusable store is one condition (writes fail too); a corrupt record is the file's
            key = ("offsets",) if isinstance(exc, OSError) else ("record", name)
            self._report(key, f"DirectorySpout: offset record of {name} in {self._store.dir} "
                              f"is unreadable ({exc}); reading the file from its beginning")
            return FileLedger()
        if ledger is None:
            log.warning("DirectorySpout: the offset record of %s is for an earlier file of that name; "
                        "reading it from its beginning", name)
            return FileLedger()
        if ledger.committed or ledger.acked:
            log.info("DirectorySpout: resuming %s at byte %d (line %d), %d lines beyond acked already",
                     name, ledger.committed, ledger.committed_line + 1, len(ledger.acked))
        return ledger

    def _committed(self, name: str, identity: tuple[int, int]) -> FileLedger:
        position = self._positions.get(name)
        if position is None:
            return FileLedger()
        offset, line, *seen = position
        if tuple(seen) != identity:
            log.warning("DirectorySpout: the committed position of %s is for an earlier file of that name; "
                        "reading it from its beginning", name)
            return FileLedger()
        log.info("DirectorySpout: reading %s from its committed position, byte %d (line %d)", name, offset, line + 1)
        return FileLedger(offset, line)

    def _check_tracked(self) -> None:
        """Every poll: notice files deleted or replaced under us, retry marking files done."""
        for f in list(self._files.values()):
            try:
                st = os.stat(f.path)
            except FileNotFoundError:
                self._lose(f, "vanished while being read")
                continue
            except OSError:
                continue  # the directory itself is in trouble: the scan reports that
            if (st.st_dev, st.st_ino) != f.ino:
                self._lose(f, "was replaced by another file while being read")
        for f in list(self._unmarked.values()):
            self._mark_done(f)

    def _lose(self, f: _File, what: str, exc: BaseException | None = None) -> None:
        """Forget a file we can no longer read: its in-flight lines are dropped (their acks and
        fails are ignored), its record removed."""
        lost = [lid for lid in self._in_flight if lid.file == f.name]
        for lid in lost:
            del self._in_flight[lid]
        self._replay = deque(lid for lid in self._replay if lid.file != f.name)
        f.close()
        self._files.pop(f.name, None)
        self._dirty.discard(f.name)
        if self._reading is f:
            self._reading = None
        cause = f" ({exc})" if exc is not None else ""
        self._report(("lost", f.name), f"DirectorySpout: file {f.path} {what}{cause}; "
                                       f"dropped it and its {len(lost)} unacked lines")
        self._remove_record(f.name)

    # ---- done ----
    def _finish_if_done(self, f: _File) -> None:
        if not f.ledger.done or self._files.get(f.name) is not f:
            return
        del self._files[f.name]
        self._dirty.discard(f.name)
        if self._exactly_once:
            self._finished.add(f.name)  # its position leaves the state at the next checkpoint
        else:
            self._save(f)  # first: a crash before the marking must not replay the file
        self._unmarked[f.name] = f
        self._mark_done(f)

    def _mark_done(self, f: _File) -> None:
        try:
            how = self._apply_done(f)
        except OSError as exc:
            self._report(("mark", f.name), f"DirectorySpout: every line of {f.path} was acked but "
                                           f"marking it done (done={self.done!r}) failed: {exc}; "
                                           f"tried again at later polls")
            return
        self._latch.clear(("mark", f.name))
        del self._unmarked[f.name]
        self._remove_record(f.name)
        extra = "".join(f", {n} {what}" for n, what in ((f.bad_utf8, "lines not valid UTF-8"),
                                                        (f.too_long, "over-long lines skipped")) if n)
        log.info("DirectorySpout: %s done (%s): %d lines%s", f.path, how, f.ledger.committed_line, extra)

    def _apply_done(self, f: _File) -> str:
        """Mark, move or delete the file; what happened. A file that is gone or is another file
        now is left alone (everything of ours was acked)."""
        try:
            st = os.stat(f.path)
        except FileNotFoundError:
            return "vanished after all its lines were acked"
        if (st.st_dev, st.st_ino) != f.ino:
            return "replaced by another file after all its lines were acked; left alone"
        if self.done == "marker":
            open(f.path + MARKER_SUFFIX, "ab").close()
            return "marker written"
        if self.done == "delete":
            os.unlink(f.path)
            return "deleted"
        target_dir = os.path.join(self._dir, DONE_DIR)
        try:
            os.mkdir(target_dir)
        except FileExistsError:
            pass
        target = _free_path(target_dir, f.name)
        os.rename(f.path, target)
        return f"moved to {target}"

    # ---- offsets ----
    def _flush(self, now: float, force: bool = False) -> None:
        if not self._dirty or self._exactly_once or (not force and now - self._last_flush < _FLUSH_SECS):
            return
        self._last_flush = now
        for name in sorted(self._dirty):
            f = self._files.get(name)
            if f is not None and not self._save(f):
                return  # still dirty: written at the next flush
            self._dirty.discard(name)

    def _save(self, f: _File) -> bool:
        try:
            self._store.save(f.name, encode_record(f.name, f.identity, f.ledger))
        except OSError as exc:
            self._report(("offsets",), f"DirectorySpout: cannot write offsets under {self._store.dir}: "
                                       f"{exc}; lines acked since may be emitted again after a restart")
            return False
        if self._latch.clear(("offsets",)):
            log.info("DirectorySpout: offsets under %s are written again", self._store.dir)
        return True

    def _remove_record(self, name: str) -> None:
        try:
            self._store.remove(name)
        except OSError as exc:
            log.warning("DirectorySpout: could not remove the offset record of %s: %s", name, exc)

    def _prune_records(self, names: list[str]) -> None:
        """Once, at the first scan: drop this task's records of files that are gone or marked done
        (left behind when the worker died between marking a file done and removing its record)."""
        present = set(names)
        for path in self._store.records():
            try:
                with open(path, "rb") as fh:
                    name = record_file_name(fh.read())
                if name is None or owner_index(name, self._num_tasks) != self._task_index:
                    continue
                if name not in present or name + MARKER_SUFFIX in present:
                    os.unlink(path)
            except OSError as exc:
                log.debug("DirectorySpout: pruning %s: %s", path, exc)

    # ---- reporting ----
    def _report(self, key, message: str) -> None:
        """Report a condition once, until it cleared (ErrorLatch)."""
        if self._latch.trip(key):
            self._report_now(message)

    def _report_now(self, message: str) -> None:
        log.error("%s", message)
        self._collector.report_error(DirectorySpoutError(message))


def _line_id(msg_id) -> LineId | None:
    try:
        return LineId(*msg_id)
    except TypeError:
        return None


def _free_path(directory: str, name: str) -> str:
    """`directory/name`, or `name.1`, `name.2`, ... if taken: a moved file never overwrites another."""
    target = os.path.join(directory, name)
    n = 0
    while os.path.lexists(target):
        n += 1
        target = os.path.join(directory, f"{name}.{n}")
    return target
