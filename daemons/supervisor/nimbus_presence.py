"""Whether this supervisor shares its ZooKeeper root with a Nimbus (a pure decision).

A supervisor given another `storm.zookeeper.root` or ZooKeeper than Nimbus's registers, beats
and waits for assignments that never come, and Nimbus never sees it (its `storm-py list` says no
supervisor is registered under its root). The supervisor's log says so from its side, naming
where it looks, until a Nimbus is seen there.
"""

from __future__ import annotations

import logging
from typing import Mapping

from cluster_state.records import NimbusRegistration
from cluster_state.settings import ZkSettings


def nimbus_presence_message(registered: Mapping[str, NimbusRegistration], zk: ZkSettings,
                            seen_before: bool | None) -> tuple[int, str] | None:
    """(log level, line) to log after looking for Nimbus registrations, or None.

    `seen_before`: None on the first look, False after looks that found none."""
    where = f"ZooKeeper {zk.connect_string} root {zk.root!r}"
    if registered:
        if seen_before is False:
            names = ", ".join(sorted(registered))
            return logging.INFO, f"Nimbus {names} is now registered under {where}"
        return None
    if seen_before is None:
        return logging.WARNING, (
            f"no Nimbus is registered under {where}: this supervisor gets no assignments until one is "
            f"(if Nimbus runs, check that its storm.zookeeper.root and storm.zookeeper.servers are this "
            f"supervisor's)")
    return None
