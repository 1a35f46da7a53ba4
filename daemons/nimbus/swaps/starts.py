"""What a submit does with state a topology's name already has (run inside Nimbus's submit,
once the new code is installed and before anything of it runs; daemons/nimbus/core.py
`before_start`):

- `--from-savepoint ID`: the savepoint shaped for this code (executor/savepoints/shaping.py)
  and written as the state it starts from;
- a plain submit of a name whose earlier run left committed state in Redis (state is kept by
  component and task index, so a resubmit continues from the last commit): when a stateful
  bolt's parallelism changed, that last commit is taken as a savepoint and moved key by key to
  the tasks the grouping now picks, as a swap would; a stateful spout whose parallelism changed
  is refused (its read positions cannot be split), in one line, before anything runs.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT
from executor.savepoints import SAVEPOINT_KEY
from executor.savepoints.plan import SavepointRefused, Shape
from executor.savepoints.shaping import fields_in, shaped, shapes_of
from executor.savepoints.store import Manifest
from executor.savepoints.stores import check_mode, provider_of, store_for
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

BeforeStart = Callable[[str, TopologyStructure, Mapping[str, Any]], Mapping[str, Any]]


def from_savepoint(name: str, savepoint: str, allow_dropped_state: bool, directory: str | None,
                   more: Mapping[str, Any]) -> BeforeStart:
    """`jar submit --from-savepoint`: the savepoint written as the new topology's start."""
    def before_start(storm_id: str, structure: TopologyStructure, conf: Mapping[str, Any]) -> Mapping[str, Any]:
        check_mode(name, conf, "the new", directory)
        store = store_for(conf, directory, more)
        try:
            manifest = store.manifest(name, savepoint)
            new = shapes_of(structure, conf)
            states = shaped(manifest, store.load(manifest), new, fields_in(structure), conf, allow_dropped_state)
            extra = store.start_conf(name, savepoint, storm_id)
            store.start_from(manifest, states, _checkpoint_tasks(new), storm_id)
        finally:
            store.close()
        log.info("topology %s (%s) starts from savepoint %s (checkpoint %d)", name, storm_id, savepoint, manifest.txid)
        return extra
    return before_start


def continuing(name: str, more: Mapping[str, Any], notes: list[str]) -> BeforeStart:
    """A plain submit: what its earlier run left in Redis continues, moved where this code's
    parallelism puts it (`notes` says so, for the submitter)."""
    def before_start(storm_id: str, structure: TopologyStructure, conf: Mapping[str, Any]) -> Mapping[str, Any]:
        if provider_of(conf) != "redis" or CHECKPOINT_COMPONENT not in structure.components:
            return {}
        store = store_for(conf, None, more)
        try:
            stored = store.stored_tasks(name)
            new = shapes_of(structure, conf)
            changed = {c: (n, new[c].tasks) for c, n in sorted(stored.items())
                       if c in new and c != CHECKPOINT_COMPONENT and n != new[c].tasks}
            if not changed:
                return {}
            for comp, (was, now) in changed.items():
                if new[comp].kind == "spout":
                    raise SavepointRefused(
                        f"topology {name!r}: spout {comp!r} had {was} task(s) in the earlier run whose state this "
                        f"submit continues, and has {now}: its read positions cannot be split; keep its "
                        f"parallelism (or give the topology another name to start afresh)")
            if not conf.get("topology.state.exactly.once"):
                raise SavepointRefused(
                    f"topology {name!r}: its earlier run left state of {_changes(changed)}, which moves to another "
                    f"parallelism only in exactly-once mode (topology.state.exactly.once: true); keep the "
                    f"parallelism (or give the topology another name to start afresh)")
            old = {c: Shape(s.kind, stored.get(c, s.tasks), s.keyed_by, s.window) for c, s in new.items()}
            old[CHECKPOINT_COMPONENT] = Shape("spout", stored.get(CHECKPOINT_COMPONENT, 1))
            snap = store.snapshot(name, {c: stored[c] for c in stored})
            savepoint = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-restart-tx{snap.txid}"
            manifest = Manifest(savepoint, name, time.time(), snap.txid, old, tuple(sorted(snap.states)), None)
            states = shaped(manifest, snap, new, fields_in(structure), conf, allow_dropped_state=True)
            store.save(manifest, snap)
            store.start_from(manifest, states, _checkpoint_tasks(new), storm_id)
        finally:
            store.close()
        notes.append(f"continues from checkpoint {snap.txid} of its earlier run, kept as savepoint {savepoint}, "
                     f"its state moved to the new parallelism ({_changes(changed)})")
        log.info("topology %s (%s): %s", name, storm_id, notes[-1])
        return {SAVEPOINT_KEY: savepoint}
    return before_start


def _checkpoint_tasks(shapes: Mapping[str, Shape]) -> int:
    checkpoint = shapes.get(CHECKPOINT_COMPONENT)
    return checkpoint.tasks if checkpoint else 1


def _changes(changed: Mapping[str, tuple[int, int]]) -> str:
    return ", ".join(f"{c}: {a} -> {b} tasks" for c, (a, b) in changed.items())
