"""Storm 0.9's DefaultScheduler / EvenScheduler as pure functions.

One call to `schedule` is one scheduling round of Nimbus's `mk-assignments`:

1. Cleaning the existing assignments. An executor keeps its slot only if it is alive (its
   heartbeat advances, or it is still in its launch grace), it is still one of its topology's
   executors, and its slot's supervisor is live and still offers that port. (Storm 0.9 also kept
   executors of a vanished supervisor while they heartbeat; here a vanished supervisor loses its
   slots at once, as the brief of issue 8 asks, so its executors move.)
2. Dead ports: a slot that held a dead executor is offered to nobody in this round (Storm's
   `supervisor->dead-ports`), so dead executors land on another slot.
3. Topologies are scheduled one after another in topology-id order (deterministic). One that
   needs scheduling (fewer slots than requested workers, or executors without a slot) first
   frees its "bad" slots, those whose executor count does not fit the even split of its
   executors over the slots it will use (DefaultScheduler's `bad-slots`), then takes
   `num_workers - kept slots` free slots in `sort_slots` order and deals its unassigned
   executors round-robin over them (EvenScheduler's `schedule-topology`).
4. A slot goes to at most one topology.

A rebalance reschedules its topology from scratch as Storm does: pass that topology with an
empty `assignment` (and `alive=None`), so its old slots are free for this round.

Unchanged inputs give equal outputs, so Nimbus can compare the new map with the stored one and
skip writing an unchanged assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

Executor = tuple[int, int]  # (start_task, end_task)
Slot = tuple[str, int]  # (supervisor_id, port)


@dataclass(frozen=True)
class SupervisorSlots:
    """A live supervisor: its id, its host and every port it offers (`SupervisorInfo.meta`)."""

    supervisor_id: str
    host: str
    ports: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ports", tuple(sorted(set(self.ports))))


@dataclass(frozen=True)
class TopologyRequest:
    """What the scheduler needs to know about one topology.

    executors   every executor of the topology, ackers included
    num_workers the requested worker count (`StormBase.num_workers`)
    assignment  the existing executor -> slot map ({} if none, or for a from-scratch rebalance)
    alive       executors whose heartbeats are fine; None means all of them
    """

    topology_id: str
    executors: tuple[Executor, ...]
    num_workers: int
    assignment: Mapping[Executor, Slot] = field(default_factory=dict)
    alive: frozenset[Executor] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "executors", tuple(sorted({(int(s), int(e)) for s, e in self.executors})))
        object.__setattr__(self, "assignment", {tuple(e): tuple(s) for e, s in self.assignment.items()})
        if self.alive is not None:
            object.__setattr__(self, "alive", frozenset(tuple(e) for e in self.alive))
        if self.num_workers < 0:
            raise ValueError(f"topology {self.topology_id}: num_workers must be >= 0, got {self.num_workers}")


def integer_divided(total: int, pieces: int) -> dict[int, int]:
    """How `total` items split as evenly as possible into `pieces`: {items per piece: pieces}.

    integer_divided(9, 4) == {2: 3, 3: 1}. Zero counts are left out.
    """
    if pieces <= 0:
        return {}
    base, extra = divmod(total, pieces)
    out = {base: pieces - extra}
    if extra:
        out[base + 1] = extra
    return out


def sort_slots(slots: Iterable[Slot], host_of: Mapping[str, str]) -> list[Slot]:
    """Order free slots so that consecutive ones land on different hosts (Storm's sort-slots).

    Slots are grouped by host, hosts with more free slots first (ties by host name); the result
    takes one slot from each host in turn until all are used. Inside one host, the slots of its
    supervisors are interleaved the same way, so two supervisors sharing a host (a test cluster)
    still alternate. Storm groups by supervisor only, which is the same when each host runs one.
    """
    by_host: dict[str, dict[str, list[int]]] = {}
    for sid, port in slots:
        by_host.setdefault(host_of.get(sid, sid), {}).setdefault(sid, []).append(port)
    host_lists = []
    for host in by_host:
        sups = by_host[host]
        per_sup = [[(sid, p) for p in sorted(sups[sid])]
                   for sid in sorted(sups, key=lambda s: (-len(sups[s]), s))]
        host_lists.append((host, _interleave(per_sup)))
    host_lists.sort(key=lambda hl: (-len(hl[1]), hl[0]))
    return _interleave([lst for _host, lst in host_lists])


def _interleave(lists: Sequence[Sequence[Slot]]) -> list[Slot]:
    # Storm's interleave-all: first of each, then second of each, ...; exhausted lists drop out.
    out: list[Slot] = []
    longest = max((len(lst) for lst in lists), default=0)
    for i in range(longest):
        out.extend(lst[i] for lst in lists if i < len(lst))
    return out


def bad_slots(slot_executors: Mapping[Slot, Sequence[Executor]], num_executors: int,
              num_slots: int) -> list[Slot]:
    """Slots to free because their executor count does not fit the even split (Storm's bad-slots).

    The split of `num_executors` over `num_slots` allows, e.g., three slots of 2 and one of 3;
    slots are checked in sorted order and kept while their count still has room in the split.
    """
    if num_slots <= 0:
        return []
    room = integer_divided(num_executors, num_slots)
    bad = []
    for slot in sorted(slot_executors):
        count = len(slot_executors[slot])
        if room.get(count, 0) > 0:
            room[count] -= 1
        else:
            bad.append(slot)
    return bad


def schedule(topologies: Iterable[TopologyRequest],
             supervisors: Iterable[SupervisorSlots]) -> dict[str, dict[Executor, Slot]]:
    """One scheduling round: every topology's new executor -> slot map (see the module doc).

    `supervisors` are the live ones; a supervisor that is absent is dead and loses its slots.
    Executors that find no slot (the cluster is full) are left out of their topology's map.
    """
    sups = {s.supervisor_id: s for s in supervisors}
    host_of = {sid: s.host for sid, s in sups.items()}
    requests = sorted(topologies, key=lambda t: t.topology_id)
    ids = [t.topology_id for t in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"topology listed twice: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
    live_ports = {sid: frozenset(s.ports) for sid, s in sups.items()}

    # 1-2: keep healthy executors; hide the ports that held dead executors for this round.
    dead_ports: dict[str, set[int]] = {}
    kept: dict[str, dict[Executor, Slot]] = {}
    claimed: dict[Slot, str] = {}  # slot -> the topology holding it
    for top in requests:
        executors = set(top.executors)
        alive = executors if top.alive is None else executors & top.alive
        mine: dict[Executor, Slot] = {}
        for ex, slot in sorted(top.assignment.items()):
            sid, port = slot
            if ex not in executors:
                continue  # stale entry (the executor set changed)
            if ex not in alive:
                dead_ports.setdefault(sid, set()).add(port)
                continue
            if port not in live_ports.get(sid, ()):
                continue  # vanished supervisor, or a port it no longer offers
            if claimed.setdefault(slot, top.topology_id) != top.topology_id:
                continue  # a corrupt input shared the slot: the first topology keeps it
            mine[ex] = slot
        kept[top.topology_id] = mine
    usable = {sid: ports - dead_ports.get(sid, set()) for sid, ports in live_ports.items()}
    free = {(sid, port) for sid, ports in usable.items() for port in ports} - set(claimed)

    # 3: schedule the topologies that need it, in order; each one's choices bind the next.
    result: dict[str, dict[Executor, Slot]] = {}
    for top in requests:
        mine = kept[top.topology_id]
        if _needs_scheduling(top, mine):
            mine = _schedule_topology(top, mine, free, usable, host_of)
        result[top.topology_id] = mine
    return result


def _slot_executors(assignment: Mapping[Executor, Slot]) -> dict[Slot, list[Executor]]:
    out: dict[Slot, list[Executor]] = {}
    for ex, slot in assignment.items():
        out.setdefault(slot, []).append(ex)
    return out


def _needs_scheduling(top: TopologyRequest, assignment: Mapping[Executor, Slot]) -> bool:
    # Storm's Cluster.needsScheduling: squeezed (fewer slots than workers) or executors unassigned.
    return (len(set(assignment.values())) < top.num_workers
            or len(assignment) < len(top.executors))


def _schedule_topology(top: TopologyRequest, assignment: dict[Executor, Slot], free: set[Slot],
                       usable: Mapping[str, frozenset[int] | set[int]],
                       host_of: Mapping[str, str]) -> dict[Executor, Slot]:
    """DefaultScheduler then EvenScheduler for one topology; updates `free` in place."""
    assignment = dict(assignment)
    by_slot = _slot_executors(assignment)
    # DefaultScheduler: free the slots that break the even split of the slots it will use.
    reassignable = [s for s in by_slot if s[1] in usable.get(s[0], ())]
    total = min(top.num_workers, len(reassignable) + len(free))
    if total > len(by_slot) or len(assignment) != len(top.executors):
        for slot in bad_slots(by_slot, len(top.executors), total):
            for ex in by_slot.pop(slot):
                del assignment[ex]
            if slot[1] in usable.get(slot[0], ()):
                free.add(slot)
    # EvenScheduler: top up to num_workers slots and deal the leftovers round-robin over the new ones.
    wanted = min(top.num_workers, len(by_slot) + len(free)) - len(by_slot)
    new_slots = sort_slots(free, host_of)[:max(wanted, 0)]
    leftovers = sorted(set(top.executors) - set(assignment))
    if new_slots:
        for i, ex in enumerate(leftovers):
            assignment[ex] = new_slots[i % len(new_slots)]
        free.difference_update(new_slots[:len(leftovers)])
    return assignment


def start_times(old_assignment: Mapping[Executor, Slot], old_start_times: Mapping[Executor, int],
                new_assignment: Mapping[Executor, Slot], now: int) -> dict[Executor, int]:
    """executor -> start time for `new_assignment` (Storm's mk-assignments start-times).

    An executor keeps its old start time when its slot still holds exactly the same executors as
    before; every executor of a slot that is new or whose executor set changed gets `now`, because
    the supervisor restarts that worker (its launch grace, `nimbus.task.launch.secs`, restarts too).
    """
    old_by_slot = {slot: sorted(exs) for slot, exs in _slot_executors(old_assignment).items()}
    out: dict[Executor, int] = {}
    for slot, exs in _slot_executors(new_assignment).items():
        same = old_by_slot.get(slot) == sorted(exs)
        for ex in exs:
            out[ex] = old_start_times[ex] if same and ex in old_start_times else now
    return out


def node_hosts(new_assignment: Mapping[Executor, Slot], supervisors: Iterable[SupervisorSlots],
               old_node_host: Mapping[str, str] | None = None) -> dict[str, str]:
    """supervisor id -> host for the supervisors `new_assignment` uses (Assignment.node_host).

    Live supervisors give their host; the old assignment's entry serves for one that is gone.
    """
    hosts = dict(old_node_host or {})
    hosts.update((s.supervisor_id, s.host) for s in supervisors)
    nodes = {sid for sid, _port in new_assignment.values()}
    return {sid: hosts[sid] for sid in sorted(nodes) if sid in hosts}
