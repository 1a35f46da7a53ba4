"""What a rebalance will do differently from what was asked, said to the asker (pure): more
executors than a component has tasks stay at its task count (tasks are fixed at submit, as in
Storm), and more workers than the cluster's slots run on the slots there are."""

from __future__ import annotations

from typing import Mapping

from executor.structure import ComponentStructure


def rebalance_notes(components: Mapping[str, ComponentStructure], executors: Mapping[str, int] | None,
                    num_workers: int | None, slots: int) -> list[str]:
    notes = []
    for comp, n in sorted((executors or {}).items()):
        tasks = components[comp].tasks
        if n > tasks:
            notes.append(f"component {comp!r} has {tasks} task(s): it runs {tasks} executor(s), not {n} "
                         f"(tasks are fixed at submit; submit it again with more tasks to go higher)")
    if num_workers is not None and num_workers > slots:
        notes.append(f"{num_workers} workers asked but the registered supervisors offer {slots} slot(s) in all: it runs "
                     f"on at most {slots} until more slots are free")
    return notes
