"""Scheduling decisions as pure functions (used by LocalCluster now, by nimbus later)."""

from __future__ import annotations

from typing import Hashable, Sequence


def assign_round_robin(executors: Sequence[tuple[str, tuple[int, int]]],
                       slots: Sequence[Hashable]) -> dict[tuple[int, int], Hashable]:
    """Spread executors evenly over slots, interleaving components so each slot gets a mix.

    Executors are taken in task order; slot i gets executors i, i+n, i+2n, ...
    """
    if not slots:
        raise ValueError("no slots to schedule on")
    ordered = sorted(executors, key=lambda ce: ce[1])
    return {ex: slots[i % len(slots)] for i, (_comp, ex) in enumerate(ordered)}


def executors_by_slot(assignment: dict[tuple[int, int], Hashable]) -> dict[Hashable, list[tuple[int, int]]]:
    out: dict[Hashable, list[tuple[int, int]]] = {}
    for ex, slot in assignment.items():
        out.setdefault(slot, []).append(ex)
    return {slot: sorted(exs) for slot, exs in out.items()}
