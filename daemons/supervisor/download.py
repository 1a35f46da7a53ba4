"""Topology code from Nimbus onto this machine (Storm's supervisor.clj, `download-storm-code`).

Both files Nimbus keeps for a topology (`stormjar.zip`, `stormconf.json`) are fetched in chunks
into a fresh `supervisor/tmp/{uuid}/`, each checked against the sha256 Nimbus announces; the
package is extracted with every entry checked (executor.package.extract_package), the conf put
beside it, and the result moved to `supervisor/stormdist/{id}` in one rename: a worker never
sees half a topology, and a crash leaves only a tmp dir (emptied when the supervisor starts).

The chunked transfer itself (also used by Nimbus daemons copying code from each other) and the
retry memory are daemons/rpc/code_transfer.py's.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from cluster_state import local_layout
from daemons.rpc.code_transfer import CONF_FILE, PACKAGE_FILE, DownloadError, fetch_file
from executor.package import MANIFEST_NAME, damaged_files, extract_package

log = logging.getLogger(__name__)



class NoSpaceError(DownloadError):
    """The supervisor's disk is full: the message names the device and what the code needs."""


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding `path` (the device an operator frees space on)."""
    p = Path(os.path.abspath(path))
    while not os.path.ismount(p) and p.parent != p:
        p = p.parent
    return p


def no_space_text(storm_id: str, where: Path, needed_bytes: int | None) -> str:
    """'no space on DEVICE for TOPOLOGY's code (N MB needed, M MB free)': one line an operator acts on."""
    try:
        free = f", {shutil.disk_usage(where).free / 2**20:.1f} MB free"
    except OSError:
        free = ""
    need = f"at least {needed_bytes / 2**20:.1f} MB needed" if needed_bytes else "size unknown"
    return f"no space on {mount_point(where)} for {storm_id}'s code ({need}{free}; supervisor dir {where})"


def download_code(conf: Mapping[str, Any], client: Any, storm_id: str) -> Path:
    """Fetch, verify and install the code of `storm_id`; returns `supervisor/stormdist/{id}`.
    Raises DownloadError, the RPC's errors, PackageError or OSError; nothing is left behind."""
    try:
        return _download_code(conf, client, storm_id)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise NoSpaceError(no_space_text(storm_id, local_layout.supervisor_tmp(conf).parent,
                                         _announced_bytes(client, storm_id))) from None


def _announced_bytes(client: Any, storm_id: str) -> int | None:
    """What Nimbus says the code's files weigh (the package, the conf; extracting needs more)."""
    try:
        return sum(int(client.call("download_info", id=storm_id, file=name)["size"]) for name in (PACKAGE_FILE, CONF_FILE))
    except Exception:  # noqa: BLE001 - only a figure for the message; Nimbus may be away too
        return None


def _download_code(conf: Mapping[str, Any], client: Any, storm_id: str) -> Path:
    final = local_layout.supervisor_stormdist(conf, storm_id)
    tmp = local_layout.supervisor_tmp(conf) / uuid.uuid4().hex
    tmp.mkdir(parents=True)
    try:
        package = tmp / PACKAGE_FILE
        topology_conf = tmp / CONF_FILE
        fetch_file(client, storm_id, PACKAGE_FILE, package)
        fetch_file(client, storm_id, CONF_FILE, topology_conf)
        try:
            parsed = json.loads(topology_conf.read_bytes())
        except ValueError as exc:
            raise DownloadError(f"{CONF_FILE} of {storm_id} is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise DownloadError(f"{CONF_FILE} of {storm_id} is not a JSON object")
        code = tmp / "code"
        extract_package(package, code, max_bytes=int(conf["storm.package.max.bytes"]))
        if (code / CONF_FILE).exists():
            raise DownloadError(f"the package of {storm_id} holds a file named {CONF_FILE} at its root, "
                                "where the supervisor puts the topology conf")
        os.rename(topology_conf, code / CONF_FILE)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(code, final)  # the one step that makes the code visible
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def downloaded_ids(conf: Mapping[str, Any], marker: str = MANIFEST_NAME) -> list[str]:
    """Topologies whose code is installed (dirs in supervisor/stormdist holding `marker`: the
    package's manifest; LocalCluster installs only the conf)."""
    root = local_layout.supervisor_stormdist(conf)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return sorted(e.name for e in entries
                  if e.is_dir(follow_symlinks=False) and (Path(e.path) / marker).is_file())


def code_present(conf: Mapping[str, Any], storm_id: str, marker: str = MANIFEST_NAME) -> bool:
    return (local_layout.supervisor_stormdist(conf, storm_id) / marker).is_file()


def installed_conf(code_dir: Path) -> dict[str, Any]:
    """The installed code's topology conf (CONF_FILE, which the package's manifest does not list:
    Nimbus sends it beside the package); ValueError saying what is wrong with it."""
    try:
        conf = json.loads((code_dir / CONF_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{CONF_FILE}: missing") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{CONF_FILE}: unreadable ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(conf, dict):
        raise ValueError(f"{CONF_FILE}: not a JSON object")
    return conf


def conf_file_problems(code_dir: Path) -> list[str]:
    """[] when the installed code's topology conf is a readable JSON object, else what is wrong."""
    try:
        installed_conf(code_dir)
    except ValueError as exc:
        return [str(exc)]
    return []


def topology_memory_limit(conf: Mapping[str, Any], storm_id: str) -> float | None:
    """topology.worker.memory.limit.mb of the topology's conf as installed here (checked at submit
    by the config schema); None when it sets none or its conf cannot be read (the supervisor's
    limit applies)."""
    try:
        v = installed_conf(local_layout.supervisor_stormdist(conf, storm_id)).get("topology.worker.memory.limit.mb")
    except ValueError:
        return None
    return None if v is None else float(v)


def remove_code(conf: Mapping[str, Any], storm_id: str) -> None:
    path = local_layout.supervisor_stormdist(conf, storm_id)
    log.info("removing code of %s (no longer assigned here)", storm_id)
    shutil.rmtree(path, ignore_errors=True)


def clean_tmp(conf: Mapping[str, Any]) -> None:
    """Drop downloads a previous run left unfinished (supervisor.clj's mk-supervisor empties
    supervisor/tmp the same way)."""
    tmp = local_layout.supervisor_tmp(conf)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)


@runtime_checkable
class CodeSource(Protocol):
    """Where the supervisor's topology code comes from, as the supervisor calls it: NimbusCode
    here, daemons/inprocess/code.py's LiveSupervisorCode in LocalCluster. `open`, `clean_tmp` and
    `close` come from the supervisor's start and stop; the others from its sync thread
    (`present` and `damaged` from its processes thread too)."""

    def open(self) -> None:
        """Connect to wherever the code comes from (once, before any fetch)."""

    def close(self) -> None:
        """Release what open() took."""

    def fetch(self, storm_id: str) -> Path:
        """Put the topology's code into `supervisor/stormdist/{id}` whole (or raise); its path."""

    def present(self, storm_id: str) -> bool:
        """Whether the topology's code is on disk, complete."""

    def damaged(self, storm_id: str) -> list[str]:
        """What in the topology's code on disk no longer matches its package ([]: nothing)."""

    def stored_ids(self) -> list[str]:
        """The topologies whose code is on disk."""

    def remove(self, storm_id: str) -> None:
        """Delete the topology's code (no longer assigned here)."""

    def clean_tmp(self) -> None:
        """Drop what an interrupted fetch of an earlier run left behind."""


class NimbusCode:
    """Where a supervisor's topology code comes from in distributed mode: Nimbus, over RPC, into
    `supervisor/stormdist/{id}` (a CodeSource; LocalCluster passes its own)."""

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = conf
        self._client = None

    def open(self) -> None:
        from daemons.rpc.client import client_from_conf

        # A Nimbus that refuses connections (restarting, down) fails the fetch at once; the
        # fetch is retried with a back-off (DownloadRetries) rather than waited for.
        self._client = client_from_conf(self.conf, refused_is_final=True)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def fetch(self, storm_id: str) -> Path:
        return download_code(self.conf, self._client, storm_id)

    def present(self, storm_id: str) -> bool:
        return code_present(self.conf, storm_id)

    def damaged(self, storm_id: str) -> list[str]:
        """What in the installed code no longer matches its package (executor.package.damaged_files),
        or its topology conf gone or unreadable (a worker cannot start without it)."""
        code_dir = local_layout.supervisor_stormdist(self.conf, storm_id)
        return damaged_files(code_dir) + conf_file_problems(code_dir)

    def stored_ids(self) -> list[str]:
        return downloaded_ids(self.conf)

    def remove(self, storm_id: str) -> None:
        remove_code(self.conf, storm_id)

    def clean_tmp(self) -> None:
        clean_tmp(self.conf)

