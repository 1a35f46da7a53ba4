"""A topology's code files between daemons over the RPC (Storm's blob download): chunked,
sha256-checked against what the serving Nimbus announces. Supervisors fetch code with it and
Nimbus daemons copy code from each other (Nimbus HA); Nimbus's handlers serve chunks of at most
CHUNK_BYTES.

`DownloadRetries` remembers failures per topology so a failing download is retried with the
back-off (1 s, 2 s, 4 s ... up to a minute) instead of asking again every round.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from daemons.backoff import backoff_delay, retry_due

# The two files Nimbus keeps for a topology, under these names wherever they are stored.
PACKAGE_FILE = "stormjar.zip"
CONF_FILE = "stormconf.json"
DOWNLOADABLE = (PACKAGE_FILE, CONF_FILE)
# Upload and download chunk (Nimbus serves at most this much): well under the RPC request limit.
CHUNK_BYTES = 1 << 20

RETRY_BASE_SECS = 1.0
RETRY_MAX_SECS = 60.0


class DownloadError(Exception):
    """The code could not be fetched or was damaged on the way (retried later)."""


def fetch_file(client: Any, storm_id: str, name: str, dest: Path) -> int:
    """One file of a topology's code into `dest`, in chunks, sha256-checked. Returns its size."""
    info = client.call("download_info", id=storm_id, file=name)
    size, checksum = int(info["size"]), str(info["checksum"])
    digest = hashlib.sha256()
    offset = 0
    with open(dest, "wb") as f:
        while offset < size:
            reply = client.call("download_chunk", id=storm_id, file=name, offset=offset,
                                length=min(CHUNK_BYTES, size - offset))
            data = reply["data"]
            if not data:
                raise DownloadError(f"{name} of {storm_id}: Nimbus sent nothing at offset {offset} of {size} "
                                    "(the file changed while downloading?)")
            f.write(data)
            digest.update(data)
            offset += len(data)
        f.flush()
        os.fsync(f.fileno())
    if offset != size or digest.hexdigest() != checksum:
        raise DownloadError(f"{name} of {storm_id}: checksum mismatch after {offset} bytes "
                            f"(got {digest.hexdigest()}, Nimbus announced {checksum})")
    return size


class DownloadRetries:
    """Consecutive failures per topology and when the next attempt is due."""

    def __init__(self, base_secs: float = RETRY_BASE_SECS, max_secs: float = RETRY_MAX_SECS):
        self.base_secs = base_secs
        self.max_secs = max_secs
        self._failures: dict[str, tuple[int, float]] = {}

    def due(self, storm_id: str, now: float) -> bool:
        failures, last = self._failures.get(storm_id, (0, None))
        return retry_due(failures, last, now, self.base_secs, self.max_secs)

    def failed(self, storm_id: str, now: float) -> float:
        """Record a failure; returns the delay before the next attempt."""
        failures = self._failures.get(storm_id, (0, None))[0] + 1
        self._failures[storm_id] = (failures, now)
        return backoff_delay(failures, self.base_secs, self.max_secs)

    def succeeded(self, storm_id: str) -> None:
        self._failures.pop(storm_id, None)

    def failures(self, storm_id: str) -> int:
        return self._failures.get(storm_id, (0, None))[0]

    def keep_only(self, storm_ids: frozenset[str] | set[str]) -> None:
        for sid in list(self._failures):
            if sid not in storm_ids:
                del self._failures[sid]

    def next_due(self) -> float | None:
        """The earliest time a failed download may be tried again (None: nothing failed)."""
        times = [last + backoff_delay(n, self.base_secs, self.max_secs) for n, last in self._failures.values()]
        return min(times) if times else None
