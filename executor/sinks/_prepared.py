"""The Spark sink's two-phase commit in exactly-once topologies (Flink's TwoPhaseCommitSinkFunction,
Spark's file sink with its batch ids), on the checkpoints of executor/checkpoint/. No Spark here.

    <table>/_storm_prepared/<storm id>-t<task>/
        owner.json               {topology, component, storm_id}: whose it is (written first)
        <txid>/<batch id>/       a batch written at checkpoint txid's PREPARE, not yet visible
        <txid>/batches.json      ["<batch id>", ...]: what txid holds (written last)

At PREPARE the rows received before the barrier are written (staged, as any batch) and moved
here under the checkpoint's txid: durable, invisible to readers. At COMMIT every prepared txid up
to the committed one is published: each batch renamed into the table and listed by one commit
of the table log, unless the log lists it already (so a COMMIT repeated after a crash adds
nothing twice), then the txid's directory goes. At ROLLBACK the prepared txids from the rolled
back one on are deleted.

The directory is the topology instance's (its storm id): a sink task restarted in the same
instance finds and publishes (or discards) what its predecessor prepared. A new instance of the
topology (a resubmit, a swap, a start from a savepoint) numbers its checkpoints on from where
its state starts, so an earlier instance's txid means another checkpoint there: the new one's
first sink task adopts every earlier directory once (`adopt`), publishing what was prepared up
to the checkpoint its state was read at (a commit decided but not yet published when the earlier
run stopped) and deleting the rest (never committed, or committed on a branch the state left:
issue 62's count in the table twice), before any checkpoint of its own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks import _table as T

log = logging.getLogger(__name__)

PREPARED_DIR = "_storm_prepared"
LISTING = "batches.json"
_TXID = re.compile(r"^\d{12}$")


OWNER = "owner.json"
_LEGACY = re.compile(r"^(?P<topology>.+)-t\d+$")  # <topology>-t<task>: an older storm-py's (no owner)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


def task_dir(table: Path, storm_id: str, task: int) -> Path:
    return table / PREPARED_DIR / f"{_safe(storm_id)}-t{int(task)}"


def claim(tdir: Path, topology: str, component: str, storm_id: str) -> None:
    """The task's directory, with its owner (before anything is prepared in it)."""
    tdir.mkdir(parents=True, exist_ok=True)
    if not (tdir / OWNER).exists():
        tmp = tdir / (OWNER + ".tmp")
        tmp.write_text(json.dumps({"topology": topology, "component": component, "storm_id": storm_id}),
                       encoding="utf-8")
        os.replace(tmp, tdir / OWNER)


def _owner(tdir: Path) -> dict | None:
    try:
        return json.loads((tdir / OWNER).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def earlier_dirs(table: Path, topology: str, component: str, storm_id: str) -> list[Path]:
    """The directories of earlier instances of the topology's sink `component` in the table
    (an older storm-py's, keyed by the topology's name alone, included)."""
    try:
        found = sorted((table / PREPARED_DIR).iterdir())
    except FileNotFoundError:
        return []
    out = []
    for d in found:
        if not d.is_dir():
            continue
        owner = _owner(d)
        if owner is not None:
            mine = owner.get("topology") == topology and owner.get("component") == component
            if mine and owner.get("storm_id") != storm_id:
                out.append(d)
        elif (m := _LEGACY.match(d.name)) and m["topology"] == _safe(topology):
            out.append(d)
    return out


def adopt(table: Path, topology: str, component: str, storm_id: str, upto: int | None,
          committed: Callable[[int], None] = lambda version: None) -> int:
    """A new instance's first sink task: what earlier instances prepared up to checkpoint `upto`
    (where the new one's state was read; None: nothing of theirs is to be published) published,
    the rest deleted with their directories; returns the rows published."""
    rows = 0
    for d in earlier_dirs(table, topology, component, storm_id):
        if upto is not None:
            rows += publish(table, d, upto, committed)
        left = prepared_txids(d)
        shutil.rmtree(d, ignore_errors=True)
        log.info("table %s: the prepared output of %s adopted (%d txid(s) not committed %s deleted)", table,
                 d.name, len(left), "at all" if upto is None else f"by checkpoint {upto}")
    return rows


def txid_name(txid: int) -> str:
    return f"{int(txid):012d}"


def prepared_txids(tdir: Path) -> list[int]:
    """The txids prepared and not yet published or discarded, oldest first (a txid directory
    without its listing is a PREPARE cut short: not prepared)."""
    try:
        names = os.listdir(tdir)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if _TXID.match(n) and (tdir / n / LISTING).exists())


def prepare(tdir: Path, txid: int, staged: list[tuple[str, Path]]) -> None:
    """Move fully written staged batches (batch id, directory) under `txid`, then list them: the
    listing's rename is the moment the txid is prepared."""
    xdir = tdir / txid_name(txid)
    # not parents: a directory another instance adopted (deleted) stays gone, this PREPARE fails
    xdir.mkdir(exist_ok=True)
    ids = []
    for batch_id, staged_dir in staged:
        os.rename(staged_dir, xdir / batch_id)
        ids.append(batch_id)
    listing = xdir / LISTING
    try:  # a PREPARE of this txid again (retried): its batches join those already listed
        ids = json.loads(listing.read_text(encoding="utf-8")) + ids
    except FileNotFoundError:
        pass
    tmp = xdir / (LISTING + ".tmp")
    tmp.write_text(json.dumps(ids), encoding="utf-8")
    os.replace(tmp, listing)


def publish(table: Path, tdir: Path, upto: int, committed: Callable[[int], None] = lambda version: None) -> int:
    """Make every batch prepared at a txid <= `upto` visible, once; returns the rows published.
    Each batch's log entry is read from its manifest (a task started afresh has nothing else);
    `committed(version)` follows each commit of the table log (its upkeep)."""
    rows = 0
    for txid in prepared_txids(tdir):
        if txid > upto:
            break
        xdir = tdir / txid_name(txid)
        ids = json.loads((xdir / LISTING).read_text(encoding="utf-8"))
        logged = G.read_snapshot(table, tombstones=False).batch_rows
        for batch_id in ids:
            if batch_id in logged:
                continue  # published by a COMMIT that was cut short after its log commit
            final = table / L.batch_dir_name(batch_id)
            if (xdir / batch_id).exists():
                os.rename(xdir / batch_id, final)
            elif not final.exists():
                raise G.LogError(f"table {table}: prepared batch {batch_id} of txid {txid} is gone from {xdir}")
            entry = T.batch_entry(table, batch_id)
            committed(G.commit(table, "append", [entry]))
            rows += max(0, entry.rows)
        shutil.rmtree(xdir)
        log.info("table %s: txid %d of %s published (%d batches)", table, txid, tdir.name, len(ids))
    return rows


def discard(tdir: Path, from_txid: int) -> int:
    """Delete what was prepared at `from_txid` and later (rolled back); returns the txids deleted."""
    gone = 0
    try:
        names = os.listdir(tdir)
    except FileNotFoundError:
        return 0
    for name in names:
        if _TXID.match(name) and int(name) >= from_txid:
            shutil.rmtree(tdir / name, ignore_errors=True)
            gone += 1
    if gone:
        log.info("table %s: %d prepared txid(s) of %s from %d discarded (rolled back)", tdir.parent.parent,
                 gone, tdir.name, from_txid)
    return gone
