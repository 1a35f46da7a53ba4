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
from executor.savepoints import SAVEPOINT_FROM_KEY, SAVEPOINT_KEY
from executor.savepoints.plan import SavepointRefused, Shape
from executor.savepoints.shaping import fields_in, shaped, shapes_of
from executor.savepoints.sources import rewind, sources_of
from executor.savepoints.store import Manifest
from executor.savepoints.stores import check_mode, provider_of, store_for
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

BeforeStart = Callable[[str, TopologyStructure, Mapping[str, Any]], Mapping[str, Any]]


def from_savepoint(name: str, savepoint: str, allow_dropped_state: bool, directory: str | None,
                   more: Mapping[str, Any], allow_repeated_output: bool = False) -> BeforeStart:
    """`jar submit --from-savepoint`: the savepoint written as the new topology's start, its
    streams set back to its cut (executor/savepoints/sources.py). Refused in one line when the
    topology committed checkpoints after the savepoint and so wrote out (its table's rows) what
    the start would write again, unless `allow_repeated_output`; refused anyway when one of its
    sources cannot read again what it read since (a DirectorySpout's files marked done)."""
    def before_start(storm_id: str, structure: TopologyStructure, conf: Mapping[str, Any]) -> Mapping[str, Any]:
        check_mode(name, conf, "the new", directory)
        store = store_for(conf, directory, more)
        try:
            manifest = store.manifest(name, savepoint)
            snap = store.load(manifest)
            since = None if store.workers_write else store.committed_since(manifest)
            if since is not None:
                _check_repeats(name, manifest, since, snap, allow_repeated_output)
            new = shapes_of(structure, conf)
            states = shaped(manifest, snap, new, fields_in(structure), conf, allow_dropped_state)
            rewind(states, {**more, **conf})
            extra = {**store.start_conf(name, savepoint, storm_id), **_read_at(manifest.generation, manifest.txid)}
            store.start_from(manifest, states, _checkpoint_tasks(new), storm_id)
        finally:
            store.close()
        log.info("topology %s (%s) starts from savepoint %s (checkpoint %d)", name, storm_id, savepoint, manifest.txid)
        return extra
    return before_start


def _check_repeats(name: str, manifest: Manifest, since: int, snap, allow_repeated_output: bool) -> None:
    stuck = sorted(c for c, srcs in sources_of(snap).items() if any(s and s.get("kind") == "directory" for s in srcs))
    if stuck:
        raise SavepointRefused(
            f"savepoint {manifest.id} of topology {name!r} is at checkpoint {manifest.txid}, and the topology "
            f"committed up to {since} after it: DirectorySpout {', '.join(repr(c) for c in stuck)} marked the files "
            f"it read since done, and would not read them again; start from a later savepoint "
            f"(storm-py savepoints {name})")
    if not allow_repeated_output:
        raise SavepointRefused(
            f"savepoint {manifest.id} of topology {name!r} is at checkpoint {manifest.txid}, and the topology "
            f"committed up to {since} after it: what it wrote out since (its table's rows) would be written "
            f"again; start from a later savepoint (storm-py savepoints {name}), or give --allow-repeated-output")


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
            if not changed:  # the same generation goes on from its last commit
                return _read_at(store.generation(name) or "", store.committed_txid(name))
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
            manifest = Manifest(savepoint, name, time.time(), snap.txid, old, tuple(sorted(snap.states)), None,
                                snap.generation)
            states = shaped(manifest, snap, new, fields_in(structure), conf, allow_dropped_state=True)
            store.save(manifest, snap)
            store.start_from(manifest, states, _checkpoint_tasks(new), storm_id)
        finally:
            store.close()
        notes.append(f"continues from checkpoint {snap.txid} of its earlier run, kept as savepoint {savepoint}, "
                     f"its state moved to the new parallelism ({_changes(changed)})")
        log.info("topology %s (%s): %s", name, storm_id, notes[-1])
        return {SAVEPOINT_KEY: savepoint, **_read_at(snap.generation, snap.txid)}
    return before_start


def _read_at(generation: str | None, txid: int | None) -> dict[str, Any]:
    """SAVEPOINT_FROM_KEY: where the new instance's state was read (its sinks publish what the
    earlier instance prepared up to it; a swap needs none: it stops at a checkpoint whose
    output is published)."""
    return {} if txid is None else {SAVEPOINT_FROM_KEY: {"generation": generation or "", "txid": int(txid)}}


def _checkpoint_tasks(shapes: Mapping[str, Shape]) -> int:
    checkpoint = shapes.get(CHECKPOINT_COMPONENT)
    return checkpoint.tasks if checkpoint else 1


def _changes(changed: Mapping[str, tuple[int, int]]) -> str:
    return ", ".join(f"{c}: {a} -> {b} tasks" for c, (a, b) in changed.items())
