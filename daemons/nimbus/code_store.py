"""Nimbus's code store: `nimbus/stormdist/{id}/` and the upload inbox (Storm's layout).

A topology's directory holds the package as uploaded (`stormjar.zip`, its manifest checked)
and the effective topology conf Nimbus computed (`stormconf.json`). It is written into a
temporary directory and renamed into place, so a reader never sees half of it. Uploads are
written chunk by chunk into `nimbus/inbox/{upload-id}.part`; an upload that is not finished
within `nimbus.inbox.jar.expiration.secs`, or that fails its checks, is removed, and the inbox
is emptied when Nimbus starts (nothing half written survives a crash).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from daemons.rpc.code_transfer import CONF_FILE, DOWNLOADABLE, PACKAGE_FILE
from executor.package import read_manifest
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

_ID_OK = re.compile(r"^[^/\\\x00]+$")


class UploadError(ValueError):
    """An upload is unknown, out of order, over its size, or failed its checksum."""


class UploadTooLargeError(UploadError):
    """An upload over storm.package.max.bytes."""


@dataclass
class _Upload:
    path: Path
    size: int
    checksum: str
    started: float
    received: int = 0
    digest: Any = field(default_factory=hashlib.sha256)


class CodeStore:
    def __init__(self, nimbus_dir: str | os.PathLike):
        self.root = Path(nimbus_dir)
        self.dist = self.root / "stormdist"
        self.inbox = self.root / "inbox"
        self._uploads: dict[str, _Upload] = {}

    def open(self) -> None:
        """Create the directories; drop inbox leftovers and unfinished installs of a crash."""
        self.dist.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.inbox, ignore_errors=True)
        self.inbox.mkdir(parents=True, exist_ok=True)
        for entry in self.dist.iterdir():
            if entry.name.startswith(".tmp-"):
                shutil.rmtree(entry, ignore_errors=True)

    # ---- uploads ----
    def begin_upload(self, size: int, checksum: str, max_bytes: int) -> str:
        if size > max_bytes:
            raise UploadTooLargeError(f"package of {size} bytes exceeds storm.package.max.bytes ({max_bytes})")
        free = _free_bytes(self.inbox)
        if free is not None and size > free:
            raise UploadError(f"not enough disk space for a package of {size} bytes in Nimbus's inbox "
                              f"{self.inbox}: {free} bytes free")
        upload_id = uuid.uuid4().hex
        path = self.inbox / f"{upload_id}.part"
        try:
            path.touch()
        except OSError as exc:
            raise UploadError(f"cannot write in Nimbus's inbox {self.inbox}: {exc.strerror or exc}") from None
        self._uploads[upload_id] = _Upload(path, size, checksum, time.time())
        return upload_id

    def _upload(self, upload_id: Any) -> _Upload:
        up = self._uploads.get(upload_id) if isinstance(upload_id, str) else None
        if up is None:
            raise UploadError(f"no upload {upload_id!r} in progress (expired, finished or never begun)")
        return up

    def upload_chunk(self, upload_id: str, offset: int, data: bytes) -> int:
        up = self._upload(upload_id)
        if offset != up.received:
            raise UploadError(f"upload {upload_id}: chunk at offset {offset}, expected {up.received}")
        if up.received + len(data) > up.size:
            self.abort_upload(upload_id)
            raise UploadTooLargeError(f"upload {upload_id}: more bytes than the {up.size} announced")
        try:
            with open(up.path, "ab") as f:
                f.write(data)
        except OSError as exc:
            # Removed at once: a partial upload left in the inbox filled the disk for every later one.
            self.abort_upload(upload_id)
            free = _free_bytes(self.inbox)
            raise UploadError(f"upload {upload_id}: cannot write {up.path} ({exc.strerror or exc}); the package "
                              f"needs {up.size} bytes" + ("" if free is None else f", {free} free in {self.inbox}")
                              + "; the partial upload was removed") from None
        up.digest.update(data)
        up.received += len(data)
        return up.received

    def finish_upload(self, upload_id: str) -> Path:
        """The complete, checksum-verified upload's path (still in the inbox)."""
        up = self._upload(upload_id)
        try:
            if up.received != up.size:
                raise UploadError(f"upload {upload_id}: got {up.received} of {up.size} bytes")
            if up.digest.hexdigest() != up.checksum:
                raise UploadError(f"upload {upload_id}: checksum mismatch (got {up.digest.hexdigest()}, "
                                  f"announced {up.checksum})")
        except UploadError:
            self.abort_upload(upload_id)
            raise
        del self._uploads[upload_id]
        return up.path

    def abort_upload(self, upload_id: str) -> None:
        up = self._uploads.pop(upload_id, None)
        if up is not None:
            up.path.unlink(missing_ok=True)

    def expire_uploads(self, max_age_secs: float, now: float | None = None) -> list[str]:
        """Drop uploads started more than max_age_secs ago (an interrupted client)."""
        now = time.time() if now is None else now
        old = [u for u, up in self._uploads.items() if now - up.started > max_age_secs]
        for u in old:
            log.warning("upload %s expired unfinished after %.0fs; removed", u, max_age_secs)
            self.abort_upload(u)
        return old

    # ---- installed topologies ----
    def topology_dir(self, storm_id: str) -> Path:
        if not _ID_OK.match(storm_id) or storm_id in (".", "..") or storm_id.startswith(".tmp-"):
            raise UploadError(f"bad topology id {storm_id!r}")
        return self.dist / storm_id

    def install(self, storm_id: str, package: Path, conf: Mapping[str, Any]) -> Path:
        """Move a verified package and write the conf under stormdist/{id}, in one rename."""
        final = self.topology_dir(storm_id)
        tmp = self.dist / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            shutil.move(str(package), tmp / PACKAGE_FILE)
            with open(tmp / CONF_FILE, "w", encoding="utf-8") as f:
                json.dump(dict(conf), f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            free = _free_bytes(self.dist)
            raise UploadError(f"cannot install topology {storm_id} under {self.dist}: {exc.strerror or exc}"
                              + ("" if free is None else f" ({free} bytes free)")) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def has(self, storm_id: str) -> bool:
        d = self.topology_dir(storm_id)
        return (d / PACKAGE_FILE).is_file() and (d / CONF_FILE).is_file()

    def read_conf(self, storm_id: str) -> dict[str, Any]:
        with open(self.topology_dir(storm_id) / CONF_FILE, encoding="utf-8") as f:
            return json.load(f)

    def file_path(self, storm_id: str, name: str) -> Path:
        if name not in DOWNLOADABLE:
            raise UploadError(f"no file {name!r} in a topology's code (one of {', '.join(DOWNLOADABLE)})")
        return self.topology_dir(storm_id) / name

    def read_structure(self, storm_id: str, max_bytes: int) -> TopologyStructure:
        """The topology's structure, from its package's manifest."""
        return read_manifest(self.file_path(storm_id, PACKAGE_FILE), max_bytes=max_bytes).structure()

    def stored_ids(self) -> list[str]:
        if not self.dist.is_dir():
            return []
        return sorted(e.name for e in self.dist.iterdir() if e.is_dir() and not e.name.startswith(".tmp-"))

    def remove(self, storm_id: str) -> None:
        shutil.rmtree(self.topology_dir(storm_id), ignore_errors=True)


def _free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None
