"""Which log file a request may read, and which bytes (pure but for the file system reads).

A requested name is relative to the log root (`storm.log.dir`). It is refused, with an error
naming it, when it is absolute, holds `..` or NUL, or resolves (symbolic links followed) outside
the root: a link pointing out of the log dir is no way out. Percent-decoding happens before this
(the web framework decodes the query), so an encoded `%2e%2e` arrives here as `..`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PAGE_BYTES = 51200        # Storm's logviewer page length
MAX_PAGE_BYTES = 1024 * 1024      # what one request may read, whatever it asks for


class LogAccessError(ValueError):
    """The name is not a readable log under the root; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def resolve(root: Path, name: str) -> Path:
    """The file `name` names under `root`, or LogAccessError (403 refused, 404 missing, 400 none)."""
    if not name:
        raise LogAccessError("parameter 'file' is required", 400)
    if "\x00" in name or name.startswith(("/", "\\")) or os.path.isabs(name):
        raise LogAccessError(f"log file {name!r} refused: absolute paths are not served", 403)
    parts = name.replace("\\", "/").split("/")
    if any(p == ".." for p in parts):
        raise LogAccessError(f"log file {name!r} refused: '..' is not allowed", 403)
    base = Path(os.path.realpath(root))
    path = Path(os.path.realpath(base / name))
    if path != base and base not in path.parents:
        raise LogAccessError(f"log file {name!r} refused: it resolves outside the log dir", 403)
    if not path.is_file():
        raise LogAccessError(f"no log file {name!r} under the log dir", 404)
    return path


@dataclass(frozen=True)
class Page:
    start: int
    length: int
    size: int
    data: bytes

    @property
    def next_start(self) -> int | None:
        end = self.start + len(self.data)
        return end if end < self.size else None

    @property
    def prev_start(self) -> int | None:
        return max(0, self.start - self.length) if self.start > 0 else None


def page_bounds(size: int, start: int | None, length: int | None) -> tuple[int, int]:
    """Storm's paging: no start means the last `length` bytes; length capped at MAX_PAGE_BYTES."""
    length = DEFAULT_PAGE_BYTES if length is None else max(0, min(int(length), MAX_PAGE_BYTES))
    if start is None:
        start = max(0, size - length)
    start = max(0, min(int(start), size))
    return start, length


def read_page(path: Path, start: int | None, length: int | None) -> Page:
    size = path.stat().st_size
    start, length = page_bounds(size, start, length)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(length)
    return Page(start, length, size, data)


def worker_root(log_dir: Path) -> Path:
    """Where worker logs live: names in Storm's log links (`{id}/{port}/worker.log`) are relative to it."""
    return Path(log_dir) / "workers-artifacts"


def list_logs(artifacts: Path, storm_id: str | None = None, port: int | None = None) -> list[str]:
    """Worker logs under `artifacts` (optionally of one topology and port), as the names the
    log links use (`{id}/{port}/worker.log`), sorted."""
    base = Path(os.path.realpath(artifacts))
    if not base.is_dir():
        return []
    out = []
    for path in base.rglob("*.log*"):
        parts = path.relative_to(base).parts
        real = Path(os.path.realpath(path))
        if len(parts) != 3 or not real.is_file() or base not in real.parents:
            continue  # a link pointing out of the log dir is not listed (nor served)
        if (storm_id is not None and parts[0] != storm_id) or (port is not None and parts[1] != str(port)):
            continue
        out.append("/".join(parts))
    return sorted(out)
