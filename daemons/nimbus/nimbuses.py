"""What Nimbus makes of the registrations every running Nimbus writes (cluster_state's
NimbusRegistration under `/nimbuses/{host:port}`, Storm's NimbusInfo): the rows of `list` and
nimbus/summary, and where code is fetched from. Who leads comes from the leader latch
(daemons/nimbus/leader.py), which is authoritative, as Storm's getClusterInfo does.
"""

from __future__ import annotations

from typing import Any, Mapping

from cluster_state.records import NimbusRegistration
from daemons.answers.cluster import NimbusRow

LEADER = "Leader"
NOT_A_LEADER = "Not a Leader"


def nimbus_rows(regs: Mapping[str, NimbusRegistration], leader: str | None, now: float) -> list[NimbusRow]:
    """One row per registered Nimbus, by host:port (status "Leader" / "Not a Leader")."""
    rows = []
    for nid, reg in sorted(regs.items()):
        is_leader = leader is not None and nid == leader
        rows.append(NimbusRow(host=reg.host, port=reg.port, is_leader=is_leader,
                              status=LEADER if is_leader else NOT_A_LEADER,
                              uptime_secs=max(0, int(now - reg.start_time_secs)), version=reg.version))
    return rows


def peers(regs: Mapping[str, Any], leader: str | None, me: str) -> list[str]:
    """Where to fetch code from: the leader first, then the other registered Nimbus daemons."""
    others = sorted(n for n in regs if n != me)
    if leader is not None and leader != me:
        others = [leader] + [n for n in others if n != leader]
    return others
