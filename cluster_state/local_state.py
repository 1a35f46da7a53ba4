"""LocalState: a small versioned key/value store on local disk (design.md section 4).

Each write produces a whole new version file: the map is msgpack-encoded into a temp file in
the same directory, fsynced, renamed to `<version>.state` (atomic on POSIX) and the directory
is fsynced, so a crash leaves either the old or the new version, never a torn one. Older
versions beyond `keep_versions` and temp files left by crashed writers are pruned by the next
writer. A version file carries a magic, its payload length and a CRC32: a truncated or
corrupt newest version is detected and the previous good one is used, with a warning.

Writers (threads or processes) serialise on an fcntl lock on `<dir>/.lock`; readers take no
lock (rename makes every version file complete).
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
import uuid
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .codec import decode_value, encode_value
from .errors import DecodeError

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


def _encode_file(payload: bytes) -> bytes:
    return _HEADER.pack(_MAGIC[:4], _MAGIC[4], zlib.crc32(payload), len(payload)) + payload


def _decode_file(blob: bytes, path: str) -> dict[str, Any]:
    if len(blob) < _HEADER.size:
        raise DecodeError(path, f"truncated: {len(blob)} bytes, shorter than the header")
    magic, fmt, crc, length = _HEADER.unpack_from(blob)
    if magic + bytes([fmt]) != _MAGIC:
        raise DecodeError(path, "not a LocalState version file (bad magic)")
    payload = blob[_HEADER.size:]
    if len(payload) != length:
        raise DecodeError(path, f"truncated: payload is {len(payload)} bytes, header says {length}")
    if zlib.crc32(payload) != crc:
        raise DecodeError(path, "checksum mismatch")
    value = decode_value(payload, path)
    if not isinstance(value, dict):
        raise DecodeError(path, f"expected a map, found {type(value).__name__}")
    return value


class LocalState:
    """Versioned on-disk map; `get`/`put`/`remove` like Storm's LocalState."""

    def __init__(self, directory: str | os.PathLike, keep_versions: int = 4) -> None:
        if keep_versions < 2:
            raise ValueError("keep_versions must be >= 2 so a corrupt newest version has a fallback")
        self.directory = Path(directory)
        self.keep_versions = keep_versions
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._warned: set[int] = set()

    # -- reading -----------------------------------------------------------------------------

    def versions(self) -> list[int]:
        """Version numbers present on disk, oldest first (corrupt ones included)."""
        found = []
        for entry in os.listdir(self.directory):
            stem = entry[: -len(_SUFFIX)] if entry.endswith(_SUFFIX) else None
            if stem is not None and stem.isdigit():
                found.append(int(stem))
        return sorted(found)

    def _version_path(self, version: int) -> Path:
        return self.directory / f"{version:020d}{_SUFFIX}"

    def snapshot(self) -> dict[str, Any]:
        """The newest readable version's map (empty when there is none)."""
        for _ in range(10):
            versions = self.versions()
            try:
                return self._newest_good(versions)
            except FileNotFoundError:
                continue  # pruned by a writer while we looked: list again
        raise OSError(f"LocalState {self.directory}: versions keep disappearing while reading")

    def _newest_good(self, versions: list[int]) -> dict[str, Any]:
        for version in reversed(versions):
            path = self._version_path(version)
            try:
                return _decode_file(path.read_bytes(), str(path))
            except DecodeError as exc:
                if version not in self._warned:
                    self._warned.add(version)
                    log.warning("LocalState %s: %s; falling back to the previous version", self.directory, exc)
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
            self._write(state)

    def remove(self, key: str) -> None:
        with self._write_lock():
            state = self.snapshot()
            if key in state:
                del state[key]
                self._write(state)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        with self._lock:
            fd = os.open(self.directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def _write(self, state: dict[str, Any]) -> None:
        payload = encode_value(state)  # fails before touching disk if a value is not encodable
        versions = self.versions()
        version = (versions[-1] + 1) if versions else 1
        tmp = self.directory / f"{_TMP_PREFIX}{version}-{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encode_file(payload))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._version_path(version))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._fsync_dir()
        self._prune(versions + [version])

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _prune(self, versions: list[int]) -> None:
        # We hold the writer lock, so every temp file is the leftover of a crashed writer.
        for entry in os.listdir(self.directory):
            if entry.startswith(_TMP_PREFIX):
                log.info("LocalState %s: removing leftover temp file %s", self.directory, entry)
                (self.directory / entry).unlink(missing_ok=True)
        for version in versions[: -self.keep_versions]:
            self._version_path(version).unlink(missing_ok=True)
            self._warned.discard(version)

    def __repr__(self) -> str:
        return f"LocalState({str(self.directory)!r})"
