"""Topology code in LocalCluster: live objects instead of packages.

Nimbus keeps the submitted StormTopology (`LiveCodeStore`, a daemons/nimbus/seams.py
TopologyCodeStore as Nimbus's CodeStore is); the supervisor "downloads" a topology by writing
its effective conf into `supervisor/stormdist/{id}/stormconf.json`, where a worker reads it as
in distributed mode.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cluster_state import local_layout
from daemons.rpc.code_transfer import CONF_FILE
from daemons.supervisor import download
from executor.errors import NotAliveError
from executor.structure import TopologyStructure
from executor.topology import StormTopology


@dataclass
class LiveCode:
    """What LocalCluster submits in place of a package: the topology and the listeners of its run."""

    topology: StormTopology
    hooks: Any = None


class LiveCodeStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._code: dict[str, tuple[LiveCode, dict[str, Any]]] = {}

    def install(self, storm_id: str, package: LiveCode, conf: Mapping[str, Any]) -> str:
        with self._lock:
            self._code[storm_id] = (package, dict(conf))  # the live code stands for the package
        return self.topology_dir(storm_id)

    def topology_dir(self, storm_id: str) -> str:
        return f"local:{storm_id}"  # the assignment's master code dir: nothing on disk

    def has(self, storm_id: str) -> bool:
        with self._lock:
            return storm_id in self._code

    def _get(self, storm_id: str) -> tuple[LiveCode, dict[str, Any]]:
        with self._lock:
            found = self._code.get(storm_id)
        if found is None:
            raise NotAliveError(f"topology {storm_id} is not stored (killed?)")
        return found

    def code(self, storm_id: str) -> LiveCode:
        return self._get(storm_id)[0]

    def read_conf(self, storm_id: str) -> dict[str, Any]:
        return dict(self._get(storm_id)[1])

    def read_structure(self, storm_id: str, max_bytes: int) -> TopologyStructure:
        return self._get(storm_id)[0].topology.structure

    def stored_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._code)

    def remove(self, storm_id: str) -> None:
        with self._lock:
            self._code.pop(storm_id, None)


class LiveSupervisorCode:
    """The supervisor's code source in LocalCluster (a download.CodeSource, as NimbusCode is)."""

    def __init__(self, conf: Mapping[str, Any], store: LiveCodeStore):
        self.conf = conf
        self.store = store

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def fetch(self, storm_id: str) -> Path:
        final = local_layout.supervisor_stormdist(self.conf, storm_id)
        tmp = local_layout.supervisor_tmp(self.conf) / uuid.uuid4().hex
        tmp.mkdir(parents=True)
        with open(tmp / CONF_FILE, "w", encoding="utf-8") as f:
            json.dump(self.store.read_conf(storm_id), f, sort_keys=True, default=str)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, final)  # seen whole or not at all, as a download
        return final

    def present(self, storm_id: str) -> bool:
        return download.code_present(self.conf, storm_id, marker=CONF_FILE)

    def damaged(self, storm_id: str) -> list[str]:
        return []  # live objects: nothing on disk to damage

    def stored_ids(self) -> list[str]:
        return download.downloaded_ids(self.conf, marker=CONF_FILE)

    def remove(self, storm_id: str) -> None:
        download.remove_code(self.conf, storm_id)

    def clean_tmp(self) -> None:
        download.clean_tmp(self.conf)
