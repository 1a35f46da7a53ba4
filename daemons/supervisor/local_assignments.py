"""From the cluster's assignments to what this supervisor runs on each port (pure).

Storm's supervisor.clj `read-assignments` / Storm 2.x `ReadClusterState.readAssignments`: every
executor placed on (this supervisor, port) becomes part of that port's LocalAssignment. Where Storm
throws on a port claimed by two topologies, here the conflict is a value: the port is left out of
the result and the daemon leaves whatever runs there alone (and stays alive) until a rebalance
resolves it. Also: which assignments to re-read (only those whose ZooKeeper version changed), which
code to download and which downloaded code may be removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from cluster_state.records import Assignment, LocalAssignment, VersionedAssignment


@dataclass(frozen=True)
class PortConflict:
    """A port of this supervisor that two or more topologies were assigned to."""

    port: int
    storm_ids: tuple[str, ...]  # sorted, at least two

    def message(self) -> str:
        return (f"port {self.port} is assigned to several topologies ({', '.join(self.storm_ids)}); "
                "leaving it alone until the assignment is fixed")


@dataclass(frozen=True)
class IgnoredPort:
    """An assignment to a port this supervisor does not have (not in supervisor.slots.ports)."""

    port: int
    storm_id: str
    reason: str


@dataclass(frozen=True)
class LocalAssignments:
    """This supervisor's share of the cluster's assignments."""

    by_port: Mapping[int, LocalAssignment] = field(default_factory=dict)
    conflicts: tuple[PortConflict, ...] = ()
    ignored: tuple[IgnoredPort, ...] = ()

    @property
    def storm_ids(self) -> frozenset[str]:
        """Topologies whose code this supervisor needs (assigned to one of its usable ports)."""
        return frozenset(la.storm_id for la in self.by_port.values())

    @property
    def code_kept(self) -> frozenset[str]:
        """Topologies whose code stays here: the assigned ones and those on a conflicted port."""
        return self.storm_ids.union(*(c.storm_ids for c in self.conflicts))

    @property
    def conflicted_ports(self) -> frozenset[int]:
        return frozenset(c.port for c in self.conflicts)


def read_my_executors(storm_id: str, assignment: Assignment, supervisor_id: str) -> dict[int, LocalAssignment]:
    """port -> LocalAssignment of one topology's executors placed on this supervisor.
    Executors are sorted so that the same placement always compares equal."""
    per_port: dict[int, list] = {}
    for executor, (node, port) in assignment.executor_node_port.items():
        if node == supervisor_id:
            per_port.setdefault(port, []).append(executor)
    return {port: LocalAssignment(storm_id, tuple(sorted(executors))) for port, executors in per_port.items()}


def local_assignments(assignments: Mapping[str, Assignment], supervisor_id: str,
                      slot_ports: Iterable[int]) -> LocalAssignments:
    """The per-port local assignment of `supervisor_id` from `{storm_id: Assignment}`.

    A port outside `slot_ports` is ignored with a reason; a port claimed by several topologies
    is reported as one PortConflict and left out."""
    ports = frozenset(slot_ports)
    claims: dict[int, dict[str, LocalAssignment]] = {}
    ignored = []
    for storm_id in sorted(assignments):
        for port, la in read_my_executors(storm_id, assignments[storm_id], supervisor_id).items():
            if port not in ports:
                ignored.append(IgnoredPort(port, storm_id, f"port {port} is not in supervisor.slots.ports "
                                                           f"{sorted(ports)}"))
                continue
            claims.setdefault(port, {})[storm_id] = la
    by_port, conflicts = {}, []
    for port in sorted(claims):
        owners = claims[port]
        if len(owners) == 1:
            by_port[port] = next(iter(owners.values()))
        else:
            conflicts.append(PortConflict(port, tuple(sorted(owners))))
    return LocalAssignments(by_port, tuple(conflicts), tuple(ignored))


def new_conflicts(local: LocalAssignments, reported: Iterable[PortConflict]) -> tuple[PortConflict, ...]:
    """Conflicts not reported yet: the daemon reports each once and remembers
    `local.conflicts` as the reported set (a resolved conflict that comes back is new again)."""
    seen = frozenset(reported)
    return tuple(c for c in local.conflicts if c not in seen)


def slot_targets(local: LocalAssignments | None, slot_ports: Iterable[int],
                 current: Mapping[int, LocalAssignment | None]) -> dict[int, LocalAssignment | None]:
    """What each slot should run (SlotInputs.assignment): its local assignment, None when
    unassigned, and for a conflicted port whatever the slot already pursues (`current`, i.e.
    SlotState.assignment), so nothing is disturbed. `local` None means the assignments are not
    known (ZooKeeper unreachable, or not read yet after a restart): every slot holds on."""
    targets: dict[int, LocalAssignment | None] = {}
    for port in sorted(frozenset(slot_ports)):
        if local is None or port in local.conflicted_ports:
            targets[port] = current.get(port)
        else:
            targets[port] = local.by_port.get(port)
    return targets


def code_to_download(local: LocalAssignments, downloaded: Iterable[str]) -> frozenset[str]:
    """Assigned topologies whose code is not on disk yet (as supervisor.clj's
    synchronize-supervisor: assigned and not downloaded)."""
    return local.storm_ids - frozenset(downloaded)


def code_to_remove(local: LocalAssignments, downloaded: Iterable[str],
                   in_use: Iterable[str] = ()) -> frozenset[str]:
    """Downloaded code no longer needed: not assigned here, not on a conflicted port, and not
    used by a slot still running or killing a worker of it (`in_use`, see slot.storm_ids_in_use)."""
    return frozenset(downloaded) - local.code_kept - frozenset(in_use)


def assignments_to_read(versions: Mapping[str, int | None],
                        cached: Mapping[str, VersionedAssignment]) -> frozenset[str]:
    """Topologies whose assignment must be (re-)read: new ones and those whose node version
    changed. `versions` is the current node version per assigned topology (None: node gone)."""
    return frozenset(sid for sid, version in versions.items()
                     if version is not None and (sid not in cached or cached[sid].version != version))


def refresh_snapshot(cached: Mapping[str, VersionedAssignment], versions: Mapping[str, int | None],
                     fetched: Mapping[str, VersionedAssignment | None]) -> dict[str, VersionedAssignment]:
    """The new versioned snapshot: unchanged entries kept, re-read ones replaced, topologies
    whose node is gone (version None, or a read that found nothing) dropped."""
    out: dict[str, VersionedAssignment] = {}
    for sid, version in versions.items():
        if version is None:
            continue
        if sid in fetched:
            if fetched[sid] is not None:
                out[sid] = fetched[sid]
        elif sid in cached:
            out[sid] = cached[sid]
    return out


def snapshot_assignments(snapshot: Mapping[str, VersionedAssignment]) -> dict[str, Assignment]:
    """`{storm_id: Assignment}` from a versioned snapshot (input of local_assignments)."""
    return {sid: va.assignment for sid, va in snapshot.items()}
