"""Savepoints and state generations in the `redis` provider (keys under its key_prefix P; a
topology name holds no ':' nor '/', so none of these is a task's state key):

- `P:NAME:savepoints`: hash, savepoint id -> its manifest (JSON: id, topology, time, txid,
  components with kind, tasks and the fields they are keyed by, the run a swap stopped);
- `P:NAME:savepoint:ID:COMPONENT#INDEX`: hash, one task's committed values at the savepoint's txid;
- `P:NAME:generation`: string, the generation the topology's tasks open (executor/state/redis_kv.py),
  written last by `restore`, so that a start from a savepoint either happened whole or not at all.

A savepoint of a running topology is read in one MULTI/EXEC (Redis runs it whole, between two
other commands): it is taken when every task's committed txid is the checkpoint spout's last
committed one (commits run every interval; a read during one is tried again)."""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import msgpack

from executor.checkpoint.protocol import (
    CHECKPOINT_COMPONENT,
    COMMITTED,
    COMMITTED_AT_KEY,
    COMMITTING,
    TX_RECORD_KEY,
    TxState,
    last_committed_of,
)
from executor.savepoints import SAVEPOINT_KEY
from executor.savepoints.plan import SavepointRefused, Shape
from executor.state.codec import decode
from executor.state.kv import namespace_parts
from executor.state.redis_client import RedisSettings, connect, unavailable
from executor.state.redis_kv import RedisKeys, generation_key

log = logging.getLogger(__name__)

KEEP_GENERATIONS = 2  # the running one and the one it started from
_RECORD_KEY = msgpack.packb(TX_RECORD_KEY, use_bin_type=True)  # as the checkpoint spout's state stores it


def checkpoint_record(txid: int, committed_at: float | None = None) -> dict[bytes, bytes]:
    """The checkpoint spout's committed values saying checkpoint `txid` is committed (a start;
    `committed_at`: when, epoch seconds)."""
    record = {_RECORD_KEY: msgpack.packb(TxState(txid, COMMITTED).to_wire(), use_bin_type=True)}
    if committed_at is not None:
        record[msgpack.packb(COMMITTED_AT_KEY, use_bin_type=True)] = msgpack.packb(float(committed_at))
    return record


def record_of(committed: Mapping[bytes, bytes]) -> TxState | None:
    """The checkpoint spout's record in its committed values (None: it has none yet)."""
    raw = committed.get(_RECORD_KEY)
    return None if raw is None else TxState.from_wire(decode(raw))


@dataclass(frozen=True)
class Manifest:
    id: str
    topology: str
    time_secs: float
    txid: int
    components: Mapping[str, Shape]
    stateful: tuple[str, ...]          # the components whose tasks hold state in it
    started_from: str | None = None    # for a swap's savepoint: the run it stopped
    generation: str | None = None      # the state generation it was read from ("": the first one)

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "topology": self.topology, "time_secs": self.time_secs, "txid": self.txid,
                           "components": {c: {"kind": s.kind, "tasks": s.tasks,
                                              "keyed_by": list(s.keyed_by) if s.keyed_by else None,
                                              **({"window": dict(s.window)} if s.window else {})}
                                          for c, s in sorted(self.components.items())},
                           "stateful": list(self.stateful), "started_from": self.started_from,
                           **({} if self.generation is None else {"generation": self.generation})}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Manifest":
        d = json.loads(text)
        comps = {c: Shape(s["kind"], int(s["tasks"]), tuple(s["keyed_by"]) if s.get("keyed_by") else None,
                          s.get("window"))
                 for c, s in d["components"].items()}
        return cls(d["id"], d["topology"], float(d["time_secs"]), int(d["txid"]), comps, tuple(d["stateful"]),
                   d.get("started_from"), d.get("generation"))


@dataclass
class Snapshot:
    """Every stateful task's committed values at `txid` (component -> per task index)."""

    txid: int
    states: dict[str, list[dict[bytes, bytes]]] = field(default_factory=dict)
    generation: str | None = None   # the state generation it was read from ("": the first one)


def new_id(txid: int, now: float | None = None) -> str:
    """A savepoint's id: when and at which checkpoint (sorts by time)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now)) + f"-tx{txid}"


class SavepointStore:
    """Savepoints in the redis provider's own server (SavepointStores, executor/savepoints/stores.py)."""

    workers_write = False  # read from Redis by whoever takes it

    def __init__(self, settings: RedisSettings):
        self.settings = settings
        self.where = f"the redis state provider at {settings.address}"
        self._client = None

    def close(self) -> None:
        self.__exit__()

    def __enter__(self) -> "SavepointStore":
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def client(self):
        if self._client is None:
            self._client = connect(self.settings)
        return self._client

    def _run(self, what: str, fn):
        import redis.exceptions as rex

        try:
            return fn()
        except (rex.RedisError, OSError) as exc:
            raise unavailable(exc, self.settings, what) from None

    def _key(self, *parts: str) -> str:
        return ":".join((self.settings.key_prefix, *parts))

    # ------------------------------------------------------------------ generations
    def generation(self, topology: str) -> str | None:
        raw = self._run("read the state generation", lambda: self.client.get(generation_key(self.settings.key_prefix,
                                                                                              topology)))
        return raw.decode() if raw else None

    def task_keys(self, topology: str, generation: str | None, component: str, index: int) -> RedisKeys:
        """The keys a task's state lives under (executor/state/redis_kv.py)."""
        return RedisKeys.of_task(self.settings.key_prefix, topology, component, index, generation)

    def stored_tasks(self, topology: str) -> dict[str, int]:
        """Component -> how many tasks hold state in the topology's current generation (the
        highest index + 1), from its keys: what a run that is gone left (item 5: a resubmit with
        another parallelism would open it on the wrong tasks)."""
        generation = self.generation(topology)
        base = self._key(f"{topology}:{generation}" if generation else topology)
        pattern = _glob_literal(base) + "/*:txid"

        def scan():
            return [k.decode() for k in self.client.scan_iter(match=pattern, count=1000)]

        out: dict[str, int] = {}
        for key in self._run("list the stored state", scan):
            _topology, component, index = namespace_parts(topology + "/" + key[len(base) + 1:-len(":txid")])
            if index is not None:
                out[component] = max(out.get(component, 0), index + 1)
        return out

    # ------------------------------------------------------------------ reading a running topology
    def snapshot(self, topology: str, tasks: Mapping[str, int], attempts: int = 50,
                 pause: float = 0.05) -> Snapshot:
        """The committed state of every task (component -> its number of tasks) at one
        checkpoint; SavepointRefused when no consistent read could be had."""
        generation = self.generation(topology)
        comps = sorted(c for c in tasks if not c.startswith("__"))
        slots = [(c, i) for c in comps for i in range(tasks[c])]
        keys = [self.task_keys(topology, generation, c, i) for c, i in slots]
        last = "no checkpoint committed yet"
        for _ in range(attempts):
            def read():
                pipe = self.client.pipeline(transaction=True)
                for k in keys:
                    pipe.hgetall(k.txid)
                    pipe.hgetall(k.committed)
                    pipe.hgetall(k.prepared)
                return pipe.execute()

            answers = self._run("read a savepoint", read)
            tasks_read = list(zip(slots, answers[0::3], answers[1::3], answers[2::3]))
            record = next((record_of(committed) for (comp, index), _x, committed, _p in tasks_read
                           if comp == CHECKPOINT_COMPONENT and index == 0), None)
            txid = decided_txid(record)
            if txid is None or txid < 0:
                last = "no checkpoint committed yet"
                time.sleep(pause)
                continue
            states: dict[str, list[dict[bytes, bytes]]] = {c: [{} for _ in range(tasks[c])] for c in comps}
            stateful, ahead = set(), set()
            for (comp, index), txids, committed, prepared in tasks_read:
                if comp == CHECKPOINT_COMPONENT or b"commit" not in txids:
                    continue
                stateful.add(comp)
                values = values_at(txid, txids, committed, prepared)
                if values is None:
                    ahead.add(comp)
                else:
                    states[comp][index] = values
            if not ahead:
                return Snapshot(txid, {c: v for c, v in states.items() if c in stateful}, generation or "")
            last = f"components {', '.join(sorted(ahead))} are mid-commit of another checkpoint than {txid}"
            time.sleep(pause)
        raise SavepointRefused(f"topology {topology!r}: no consistent checkpoint could be read from the redis state "
                               f"provider at {self.settings.address} ({last})")

    def committed_txid(self, topology: str, generation: str | None = None) -> int | None:
        """The last checkpoint committed in a generation of the topology's state (the current
        one by default), one being committed included (decided_txid); None when that
        generation holds none (or is gone)."""
        gen = self.generation(topology) if generation is None else (generation or None)
        keys = self.task_keys(topology, gen, CHECKPOINT_COMPONENT, 0)
        raw = self._run("read the checkpoint record", lambda: self.client.hgetall(keys.committed))
        return decided_txid(record_of(raw)) if raw else None

    def committed_since(self, manifest: Manifest) -> int | None:
        """The latest checkpoint the topology committed after savepoint `manifest` was taken, in
        the generation it was read from or in one started later; None when it committed none."""
        if manifest.generation is None:
            return None  # a savepoint of an older storm-py: its lineage is not known
        later = []
        now = self.committed_txid(manifest.topology, manifest.generation)
        if now is not None and now > manifest.txid:
            later.append(now)
        listed = self._run("list the state generations",
                           lambda: self.client.lrange(self._key(manifest.topology, "generations"), 0, -1))
        starts = {m.id: m for m in self.manifests(manifest.topology)}
        for gen in (g.decode() for g in listed):
            start = starts.get(gen)
            if start is None or start.time_secs < manifest.time_secs or gen == manifest.generation:
                continue
            committed = self.committed_txid(manifest.topology, gen)
            if committed is not None and committed > start.txid:
                later.append(committed)
        return max(later, default=None)

    # ------------------------------------------------------------------ savepoints
    def save(self, manifest: Manifest, snapshot: Snapshot) -> None:
        def write():
            pipe = self.client.pipeline(transaction=True)
            for comp, per_task in snapshot.states.items():
                for index, values in enumerate(per_task):
                    key = self._key(manifest.topology, "savepoint", manifest.id, f"{comp}#{index}")
                    pipe.delete(key)
                    if values:
                        pipe.hset(key, mapping=values)
            pipe.hset(self._key(manifest.topology, "savepoints"), manifest.id, manifest.to_json())
            pipe.execute()

        self._run(f"write savepoint {manifest.id}", write)
        log.info("savepoint %s of %s kept (txid %d)", manifest.id, manifest.topology, manifest.txid)

    def manifests(self, topology: str) -> list[Manifest]:
        raw = self._run("list savepoints", lambda: self.client.hgetall(self._key(topology, "savepoints")))
        return sorted((Manifest.from_json(v) for v in raw.values()), key=lambda m: (m.time_secs, m.id))

    def manifest(self, topology: str, savepoint: str) -> Manifest:
        raw = self._run("read a savepoint", lambda: self.client.hget(self._key(topology, "savepoints"), savepoint))
        if raw is None:
            known = [m.id for m in self.manifests(topology)]
            raise SavepointRefused(f"topology {topology!r} has no savepoint {savepoint!r}"
                                   + (f" (it has: {', '.join(known[-5:])})" if known else " (it has none)"))
        return Manifest.from_json(raw)

    def load(self, manifest: Manifest) -> Snapshot:
        comps = [c for c in manifest.stateful]

        def read():
            pipe = self.client.pipeline(transaction=False)
            for comp in comps:
                for index in range(manifest.components[comp].tasks):
                    pipe.hgetall(self._key(manifest.topology, "savepoint", manifest.id, f"{comp}#{index}"))
            return iter(pipe.execute())

        answers = self._run(f"read savepoint {manifest.id}", read)
        return Snapshot(manifest.txid, {c: [next(answers) for _ in range(manifest.components[c].tasks)]
                                        for c in comps})

    def delete(self, topology: str, savepoint: str) -> None:
        manifest = self.manifest(topology, savepoint)

        def write():
            pipe = self.client.pipeline(transaction=True)
            for comp in manifest.stateful:
                for index in range(manifest.components[comp].tasks):
                    pipe.delete(self._key(topology, "savepoint", savepoint, f"{comp}#{index}"))
            pipe.hdel(self._key(topology, "savepoints"), savepoint)
            pipe.execute()

        self._run(f"delete savepoint {savepoint}", write)

    # ------------------------------------------------------------------ starting from one
    def start_conf(self, topology: str, savepoint: str, storm_id: str) -> dict[str, Any]:
        """SavepointStores.start_conf: the generation is named after the savepoint, in Redis."""
        return {SAVEPOINT_KEY: savepoint}

    def start_from(self, manifest: Manifest, states: Mapping[str, list[Mapping[bytes, bytes]]],
                   checkpoint_tasks: int, storm_id: str) -> None:
        """SavepointStores.start_from: a generation named after the savepoint."""
        self.restore(manifest.topology, manifest.id, manifest.txid, states, checkpoint_tasks,
                     committed_at=manifest.time_secs)

    def restore(self, topology: str, generation: str, txid: int, states: Mapping[str, list[Mapping[bytes, bytes]]],
                checkpoint_tasks: int = 1, committed_at: float | None = None) -> None:
        """Write `states` (component -> per new task index) as generation `generation` committed
        at `txid`, the checkpoint spout's record COMMITTED at `txid`, then point the topology at
        the generation (last: until then its tasks open the generation before). Written again
        whole if it was (a swap's Nimbus that failed over repeats the step)."""
        record = checkpoint_record(txid, committed_at)
        seq = str(time.time_ns())  # the checkpoint spout's own save sequence (executor/checkpoint/spout.py)

        def write():
            pipe = self.client.pipeline(transaction=True)
            for comp, per_task in [*states.items(), *[(CHECKPOINT_COMPONENT, [record] * checkpoint_tasks)]]:
                for index, values in enumerate(per_task):
                    keys = self.task_keys(topology, generation, comp, index)
                    pipe.delete(keys.committed, keys.prepared, keys.txid)
                    if values:
                        pipe.hset(keys.committed, mapping=dict(values))
                    pipe.hset(keys.txid, "commit", seq if comp == CHECKPOINT_COMPONENT else str(txid))
            pipe.set(generation_key(self.settings.key_prefix, topology), generation)
            pipe.lrem(self._key(topology, "generations"), 0, generation)
            pipe.rpush(self._key(topology, "generations"), generation)
            pipe.execute()

        self._run(f"start topology {topology!r} from txid {txid}", write)
        self._collect(topology)

    def _collect(self, topology: str) -> int:
        """Delete the state of the generations before the last KEEP_GENERATIONS (the first one,
        a topology's keys before any swap, is the oldest); how many keys. The savepoints keep
        their own copies; the generation just stopped stays until the next start, as a worker of
        it may still be shutting down."""
        listed = self._key(topology, "generations")
        names = [g.decode() for g in self._run("list the state generations", lambda: self.client.lrange(listed, 0, -1))]
        deleted = 0
        for gen in ["", *names][:-KEEP_GENERATIONS]:
            base = self._key(f"{topology}:{gen}" if gen else topology)
            match = _glob_literal(base) + "/*"

            def drop(match=match) -> int:
                keys = list(self.client.scan_iter(match=match, count=1000))
                return sum(self.client.delete(*keys[i:i + 1000]) for i in range(0, len(keys), 1000))

            deleted += int(self._run("delete an old state generation", drop))
        if len(names) > KEEP_GENERATIONS:
            self._run("list the state generations", lambda: self.client.ltrim(listed, -KEEP_GENERATIONS, -1))
        if deleted:
            log.info("topology %s: deleted %d keys of older state generations", topology, deleted)
        return deleted

def decided_txid(record: TxState | None) -> int | None:
    """The checkpoint a savepoint holds given the checkpoint spout's record: the last committed
    one, or one being committed (COMMITTING: every task prepared it, so it is decided and rolls
    forward, as the checkpoint spout's own recovery sends its COMMIT again). A topology stopped
    mid-commit (a swap's kill can land there) is then read at that checkpoint."""
    if record is not None and record.state == COMMITTING:
        return record.txid
    return last_committed_of(record)


def values_at(txid: int, txids: Mapping[bytes, bytes], committed: Mapping[bytes, bytes],
              prepared: Mapping[bytes, bytes]) -> dict[bytes, bytes] | None:
    """A task's state at checkpoint `txid` from its keys (executor/state/redis_kv.py): its committed
    values when it committed `txid`, those with its prepared changes applied when it prepared
    `txid` and its commit had not run yet (a deletion is the empty string); None when it is at
    another checkpoint."""
    if int(txids.get(b"commit", b"-1")) == txid:
        return dict(committed)
    if txids.get(b"prepare") is not None and int(txids[b"prepare"]) == txid:
        values = dict(committed)
        for key, value in prepared.items():
            if value == b"":
                values.pop(key, None)
            else:
                values[key] = value
        return values
    return None


def _glob_literal(text: str) -> str:
    """`text` matched literally in a Redis SCAN pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)

