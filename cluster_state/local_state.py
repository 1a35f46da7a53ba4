"""LocalState: a small versioned key/value store on local disk (Storm's LocalState.java; docs/architecture.md, "Local disk layout").

Each write produces a whole new version file: the map is msgpack-encoded into a temp file in
the same directory, fsynced, renamed to `<version>.state` (atomic on POSIX) and the directory
is fsynced, so a crash leaves either the old or the new version, never a torn one. Older
versions beyond `keep_versions` and temp files left by crashed writers are pruned by the next
writer. A version file carries a magic, its payload length and a CRC32: a truncated or
corrupt newest version is detected and the previous good one is used, with a warning.

Damage is survived, not propagated: an entry this store did not write (a stray `7.state`, a
directory or symlink named like a version) is ignored with one warning naming it and is never
pruned; a version file that cannot be read (permission denied, garbage, wrong size) counts as
corrupt; new versions are numbered past every name in use, so a write succeeds whenever the
directory is writable. Only a directory that cannot be used at all raises LocalStateError,
naming it.

Writers (threads or processes) serialise on an fcntl lock on `<dir>/.lock`; readers take no
lock (rename makes every version file complete).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import stat
import struct
import threading
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .codec import decode_value, encode_value
from .errors import DecodeError, LocalStateError

log = logging.getLogger(__name__)

# Keys Storm's supervisor and workers use.
LS_ID = "supervisor-id"
LS_LOCAL_ASSIGNMENTS = "local-assignments"
LS_APPROVED_WORKERS = "approved-workers"
LS_WORKER_HEARTBEAT = "worker-heartbeat"

_MAGIC = b"SPLS\x01"
_HEADER = struct.Struct(">4sBIQ")  # magic(4) + format(1), crc32, payload length
_SUFFIX = ".state"
_TMP_PREFIX = ".tmp-"
_LOCK_NAME = ".lock"
_VERSION_RE = re.compile(r"\A([0-9]{20,})\.state\Z")
_TMP_RE = re.compile(r"\A\.tmp-[0-9]+-[0-9a-f]+\Z")
_NAME_MAX = 255
# Entries already warned about, process-wide: a daemon may open the same directory many times
# (e.g. every worker's heartbeat dir on each sync) and must still warn once per damaged entry.
_WARNED: set[str] = set()
_WARNED_MAX = 10000
# Kinds of directory entries, as classify() sees them.
FILE, DIRECTORY, SYMLINK, OTHER = "file", "directory", "symlink", "other"


def version_name(version: int) -> str:
    """The file name of a version: zero-padded to 20 digits so names sort like numbers."""
    return f"{version:020d}{_SUFFIX}"


def parse_version(name: str) -> int | None:
    """The version number `name` holds, or None when this store would never write that name."""
    match = _VERSION_RE.match(name)
    if match is None:
        return None
    version = int(match.group(1))
    # Exactly our spelling: `7.state` or `000...0007.state` with extra zeros are someone else's.
    return version if version >= 1 and version_name(version) == name else None


@dataclass
class Listing:
    """What a LocalState directory holds, sorted out by classify()."""

    versions: list[int] = field(default_factory=list)  # version files (regular), oldest first
    highest_name: int = 0  # highest version number any entry's name takes, whatever its kind
    temps: list[str] = field(default_factory=list)  # leftover temp files of crashed writers
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (name, why): ignored, never deleted


def classify(entries: Iterable[tuple[str, str]]) -> Listing:
    """Sort `(name, kind)` directory entries into ours and foreign ones (pure)."""
    listing = Listing()
    for name, kind in entries:
        version = parse_version(name)
        if version is not None:
            listing.highest_name = max(listing.highest_name, version)
            if kind == FILE:
                listing.versions.append(version)
            else:
                listing.foreign.append((name, f"a {kind} where a version file belongs"))
        elif _TMP_RE.match(name) and kind == FILE:
            listing.temps.append(name)
        elif name == _LOCK_NAME and kind == FILE:
            pass
        elif name == _LOCK_NAME:
            listing.foreign.append((name, f"a {kind} where the writer lock file belongs"))
        else:
            listing.foreign.append((name, "not a file this store writes"))
    listing.versions.sort()
    return listing


def next_version(listing: Listing) -> int:
    """Past every name in use, so the rename never lands on a stray entry."""
    return listing.highest_name + 1


def _kind(entry: os.DirEntry) -> str:
    try:
        if entry.is_symlink():
            return SYMLINK
        if entry.is_file(follow_symlinks=False):
            return FILE
        if entry.is_dir(follow_symlinks=False):
            return DIRECTORY
    except OSError:
        pass
    return OTHER


def _encode_file(payload: bytes) -> bytes:
    return _HEADER.pack(_MAGIC[:4], _MAGIC[4], zlib.crc32(payload), len(payload)) + payload


def _decode_header(header: bytes, file_size: int, path: str) -> tuple[int, int]:
    """(crc, payload length) from a version file's header; checks the file's size against it."""
    if len(header) < _HEADER.size:
        raise DecodeError(path, f"truncated: {file_size} bytes, shorter than the header")
    magic, fmt, crc, length = _HEADER.unpack_from(header)
    if magic + bytes([fmt]) != _MAGIC:
        raise DecodeError(path, "not a LocalState version file (bad magic)")
    if file_size != _HEADER.size + length:
        raise DecodeError(path, f"truncated or padded: payload is {file_size - _HEADER.size} bytes, "
                                f"header says {length}")
    return crc, length


def _decode_payload(payload: bytes, crc: int, path: str) -> dict[str, Any]:
    if zlib.crc32(payload) != crc:
        raise DecodeError(path, "checksum mismatch")
    value = decode_value(payload, path)
    if not isinstance(value, dict):
        raise DecodeError(path, f"expected a map, found {type(value).__name__}")
    return value


def _read_version_file(path: Path) -> dict[str, Any]:
    """One version's map. FileNotFoundError when it vanished; any other failure is a DecodeError."""
    # O_NOFOLLOW: never read through a link; O_NONBLOCK: a FIFO in its place must not hang us.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DecodeError(str(path), f"cannot open: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise DecodeError(str(path), "not a regular file")
            # The header first: a wrong-size or foreign file is refused without reading it all.
            crc, length = _decode_header(f.read(_HEADER.size), st.st_size, str(path))
            payload = f.read(length)
        except OSError as exc:
            raise DecodeError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if len(payload) != length:
        raise DecodeError(str(path), f"truncated while reading: {len(payload)} of {length} payload bytes")
    return _decode_payload(payload, crc, str(path))


class LocalState:
    """Versioned on-disk map; `get`/`put`/`remove` like Storm's LocalState."""

    def __init__(self, directory: str | os.PathLike, keep_versions: int = 4, durable: bool = True,
                 create: bool = True) -> None:
        """`durable=False` skips the fsyncs: for values that mean nothing after a crash of the
        machine (a worker's heartbeat, as Storm's, which does not sync either) and must not wait
        on the disk. The rename still shows readers only complete versions. `create=False` is for
        a reader of someone else's state: it never makes the directory (a reader that did could
        bring back a worker directory its supervisor had just removed) and reads a missing one
        as empty, quietly."""
        if isinstance(keep_versions, bool) or not isinstance(keep_versions, int) or keep_versions < 2:
            raise ValueError("keep_versions must be an int >= 2 so a corrupt newest version has a fallback, "
                             f"got {keep_versions!r}")
        self.directory = Path(directory)
        self.keep_versions = keep_versions
        self.durable = durable
        self._lock = threading.RLock()
        self._create = create
        if create:
            self._ensure_directory()

    def _ensure_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # exist_ok still refuses a non-directory
            raise LocalStateError(str(self.directory), "exists but is not a directory") from None
        except OSError as exc:
            # e.g. a parent is a regular file, or permission denied.
            raise LocalStateError(str(self.directory), f"cannot create the directory: {exc.strerror or exc}") from None

    def _warn_once(self, name: str, message: str, *args: Any) -> None:
        key = str(self.directory / name)
        if key not in _WARNED:
            if len(_WARNED) >= _WARNED_MAX:
                _WARNED.clear()  # bounded memory; at worst a damaged entry is warned about again
            _WARNED.add(key)
            log.warning(message, *args)

    # -- reading -----------------------------------------------------------------------------

    def _listing(self, missing_ok: bool = True) -> Listing:
        try:
            with os.scandir(self.directory) as entries:
                found = [(e.name, _kind(e)) for e in entries]
        except FileNotFoundError:
            if not missing_ok:
                raise LocalStateError(str(self.directory), "the directory has disappeared") from None
            if not self._create:
                return Listing()
            self._warn_once("", "LocalState %s: the directory has disappeared; reading it as empty",
                            self.directory)
            return Listing()
        except NotADirectoryError:
            raise LocalStateError(str(self.directory), "exists but is not a directory") from None
        except OSError as exc:
            raise LocalStateError(str(self.directory), f"cannot list the directory: {exc.strerror or exc}") from None
        listing = classify(found)
        for name, why in listing.foreign:
            self._warn_once(name, "LocalState: ignoring %s: %s", self.directory / name, why)
        return listing

    def versions(self) -> list[int]:
        """Version numbers of the version files on disk, oldest first (corrupt ones included)."""
        return self._listing().versions

    def _version_path(self, version: int) -> Path:
        return self.directory / version_name(version)

    def snapshot(self) -> dict[str, Any]:
        """The newest readable version's map (empty when there is none)."""
        for _ in range(10):
            versions = self.versions()
            try:
                return self._newest_good(versions)
            except FileNotFoundError:
                continue  # pruned by a writer while we looked: list again
        raise LocalStateError(str(self.directory), "versions keep disappearing while reading")

    def _newest_good(self, versions: list[int]) -> dict[str, Any]:
        for version in reversed(versions):
            path = self._version_path(version)
            try:
                return _read_version_file(path)
            except DecodeError as exc:
                self._warn_once(path.name, "LocalState %s: %s; falling back to the previous version",
                                self.directory, exc)
        if versions:
            log.error("LocalState %s: no readable version among %d; starting empty", self.directory, len(versions))
        return {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.snapshot().get(key, default)

    # -- writing -----------------------------------------------------------------------------

    def put(self, key: str, value: Any) -> None:
        self.update({key: value})

    def update(self, values: dict[str, Any]) -> None:
        """Set several keys in one new version."""
        with self._write_lock():
            state = self.snapshot()
            state.update(values)
            self._write(state, values)

    def remove(self, key: str) -> None:
        with self._write_lock():
            state = self.snapshot()
            if key in state:
                del state[key]
                self._write(state, {})

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        with self._lock:
            if not self.directory.is_dir():
                self._ensure_directory()  # removed meanwhile: a writable parent lets us go on
                _WARNED.discard(str(self.directory))  # warn again if it disappears again
            lock_path = self.directory / _LOCK_NAME
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            except OSError as exc:
                raise LocalStateError(str(lock_path), f"cannot open the writer lock: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def _encode(self, state: dict[str, Any], new_values: dict[str, Any]) -> bytes:
        try:
            return encode_value(state)
        except (TypeError, ValueError, OverflowError) as exc:
            # Name the key at fault (nothing was written).
            for key, value in new_values.items():
                try:
                    encode_value(value)
                except (TypeError, ValueError, OverflowError) as key_exc:
                    raise TypeError(f"LocalState {self.directory}: cannot store key {key!r}: {key_exc}") from None
            raise TypeError(f"LocalState {self.directory}: cannot encode the state: {exc}") from None

    def _write(self, state: dict[str, Any], new_values: dict[str, Any]) -> None:
        payload = self._encode(state, new_values)  # fails before touching disk
        listing = self._listing(missing_ok=False)
        version = next_version(listing)
        target = self._version_path(version)
        if len(target.name) > _NAME_MAX:
            raise LocalStateError(str(self.directory / version_name(listing.highest_name)),
                                  "version numbers are exhausted by this entry; remove it")
        tmp = self.directory / f"{_TMP_PREFIX}{version}-{uuid.uuid4().hex}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_encode_file(payload))
                    f.flush()
                    if self.durable:
                        os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            if self.durable:
                self._fsync_dir()
        except OSError as exc:
            raise LocalStateError(str(target), f"cannot write a new version: {exc.strerror or exc}") from None
        self._prune(listing, version)

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _prune(self, listing: Listing, written: int) -> None:
        """Remove old versions and crashed writers' temp files: only files this store wrote."""
        # We hold the writer lock, so every temp file is the leftover of a crashed writer.
        doomed = [(name, "leftover temp file") for name in listing.temps]
        doomed += [(version_name(v), "old version") for v in (listing.versions + [written])[: -self.keep_versions]]
        for name, what in doomed:
            try:
                os.unlink(self.directory / name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                # The new version is written; an unprunable file only costs disk space.
                self._warn_once(name, "LocalState: cannot remove %s %s: %s", what, self.directory / name,
                                exc.strerror or exc)
                continue
            _WARNED.discard(str(self.directory / name))
            if what == "leftover temp file":
                log.info("LocalState %s: removed leftover temp file %s", self.directory, name)

    def __repr__(self) -> str:
        return f"LocalState({str(self.directory)!r})"
