"""Each Nimbus keeps the code of every active topology (Storm's Nimbus.java blob sync of a
standby, and a new leader's "code not available locally"; docs/operations.md, "Nimbus HA").

A round lists the active topologies in ZooKeeper and fetches each one missing from the local
code store from its peers (the leader first, then the other Nimbus daemons) with the
supervisor's chunked, sha256-checked download (daemons/supervisor/download.py), verifies the
package and installs it in one rename. A failing topology is retried with back-off. A standby
also drops its copies of topologies no longer active (the leader's cleanup does that for it).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from typing import Any, Callable, Iterable, Mapping

from daemons.nimbus.code_store import CodeStore
from daemons.rpc.client import RpcClient
from daemons.rpc.code_transfer import CONF_FILE, PACKAGE_FILE, DownloadError, DownloadRetries, fetch_file
from daemons.rpc.protocol import REMOTE_ERRORS
from executor.errors import NotAliveError
from executor.package import PackageError, verify_package
from executor.transport.curve import curve_keys

log = logging.getLogger(__name__)


def missing_code(active: Iterable[str], stored: Iterable[str]) -> list[str]:
    return sorted(set(active) - set(stored))


def fetch_into_store(store: CodeStore, client: Any, storm_id: str, max_bytes: int, lock: Any) -> None:
    """Fetch one topology's two files from a peer, verify them and install them (under `lock`)."""
    tmp = store.inbox / f"sync-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        package = tmp / PACKAGE_FILE
        fetch_file(client, storm_id, PACKAGE_FILE, package)
        fetch_file(client, storm_id, CONF_FILE, tmp / CONF_FILE)
        try:
            conf = json.loads((tmp / CONF_FILE).read_bytes())
        except ValueError as exc:
            raise DownloadError(f"{CONF_FILE} of {storm_id} is not valid JSON: {exc}") from None
        if not isinstance(conf, dict):
            raise DownloadError(f"{CONF_FILE} of {storm_id} is not a JSON object")
        verify_package(package, max_bytes=max_bytes)
        with lock:
            if not store.has(storm_id):
                store.install(storm_id, package, conf)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class CodeSync:
    """One round per call of `run_round` (the daemon's code-sync thread owns the clients)."""

    def __init__(self, conf: Mapping[str, Any], store: CodeStore, lock: Any, *,
                 active: Callable[[], Iterable[str]], peers: Callable[[], list[str]],
                 leading: Callable[[], bool]):
        self.conf = conf
        self.store = store
        self.lock = lock
        self._active = active
        self._peers = peers
        self._leading = leading
        self._retries = DownloadRetries()
        self._clients: dict[str, RpcClient] = {}

    def run_round(self) -> None:
        active = set(self._active())
        stored = self.store.stored_ids()
        if not self._leading():
            for storm_id in sorted(set(stored) - active):
                log.info("standby: removing its copy of the code of topology %s, which is gone", storm_id)
                self.store.remove(storm_id)
        self._retries.keep_only(active)
        now = time.time()
        for storm_id in missing_code(active, stored):
            if self._retries.due(storm_id, now):
                self._fetch(storm_id, now)

    def _fetch(self, storm_id: str, now: float) -> None:
        peers = self._peers()
        failures = []
        for peer in peers:
            try:
                fetch_into_store(self.store, self._client(peer), storm_id,
                                 int(self.conf["storm.package.max.bytes"]), self.lock)
            except (DownloadError, PackageError, OSError, *REMOTE_ERRORS) as exc:
                failures.append(f"{peer}: {exc}")
                continue
            self._retries.succeeded(storm_id)
            log.info("fetched the code of topology %s from Nimbus %s", storm_id, peer)
            return
        delay = self._retries.failed(storm_id, now)
        log.warning("topology %s has no code on this Nimbus and none could be fetched (%s); retrying in %.0fs",
                    storm_id, "; ".join(failures) or "no other Nimbus is registered", delay)

    def peer_holds(self, peer: str, storm_id: str) -> bool | None:
        """Whether Nimbus `peer` holds this topology's code (a swap's new code, before the old
        topology is removed: a Nimbus that takes over must be able to start it); None when it
        did not answer."""
        try:
            self._client(peer).call("download_info", id=storm_id, file=PACKAGE_FILE)
        except NotAliveError:
            return False
        except REMOTE_ERRORS as exc:
            log.debug("Nimbus %s did not say whether it holds the code of %s: %s", peer, storm_id, exc)
            return None
        return True

    def _client(self, peer: str) -> RpcClient:
        client = self._clients.get(peer)
        if client is None:
            host, _, port = peer.rpartition(":")
            client = self._clients[peer] = RpcClient(
                host, int(port), timeout_secs=float(self.conf["nimbus.thrift.timeout"]),
                secret=self.conf.get("nimbus.authentication.secret") or None, curve=curve_keys(self.conf))
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
