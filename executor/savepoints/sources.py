"""What a savepoint keeps of its sources beyond their tasks' state, and a start from it does to
them: the Redis streams RedisStreamSpouts read (executor/spouts/redis_stream.py).

A stream task's state says how far it emitted (its read position), but its consumer group
moves on as the topology runs: an entry is XACKed once a commit covers it, and a start from an
older savepoint would never see the entries acked after it again (issue 62: 1,000 entries
missing). So a savepoint also reads each stream's cut from the group, at a moment when no
checkpoint after the savepoint's has committed (checked before and after, Redis being another
server than the state's): the group's last delivered id, and the entries then pending with a
task's consumer past that task's position (delivered, not emitted: not in the savepoint).
Together with the positions they are exactly what the savepoint has not read: the entries
pending above a task's position, and every entry after the last delivered id. An entry not
pending at or before the last delivered id was acked, and so committed at or before the
savepoint's checkpoint. The cut goes into the task's state (REWIND_KEY); a start from the
savepoint sets the group back to it (XGROUP SETID, the entries pending after it XACKed: they
are delivered again) and the task reads the pending ones again by id first.

A source that cannot go back (DirectorySpout marks files done) has no cut; a start from a
savepoint older than its topology's last commit is then refused (starts.py).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import msgpack

from executor.savepoints.plan import SavepointRefused
from executor.savepoints.store import Snapshot
from executor.spouts.redis_stream import REWIND_KEY, SOURCE_KEY
from executor.spouts.stream_ledger import id_order
from executor.state.codec import decode
from executor.state.provider import CONFIG_KEY

log = logging.getLogger(__name__)

_SOURCE = msgpack.packb(SOURCE_KEY, use_bin_type=True)
_REWIND = msgpack.packb(REWIND_KEY, use_bin_type=True)
_POSITION = "read position:"


def sources_of(snapshot: Snapshot) -> dict[str, list[dict | None]]:
    """Component -> each task's source description (None: none), for the stateful spouts that keep one."""
    out = {}
    for comp, per_task in snapshot.states.items():
        found = [decode(values[_SOURCE]) if _SOURCE in values else None for values in per_task]
        if any(found):
            out[comp] = found
    return out


def _client(source: Mapping[str, Any], conf: Mapping[str, Any]):
    """A client of the source's Redis (its password: the state provider's when it is that server)."""
    import redis

    state = dict(conf.get(CONFIG_KEY) or {})
    same = (state.get("host", "127.0.0.1"), int(state.get("port", 6379))) == (source["host"], int(source["port"]))
    return redis.Redis(host=source["host"], port=int(source["port"]), db=int(source.get("db") or 0),
                       password=state.get("password") if same else None, socket_timeout=5, socket_connect_timeout=5)


def read_cuts(snapshot: Snapshot, conf: Mapping[str, Any]) -> dict[str, list[dict]]:
    """Component -> per task {stream: {"ld": the group's last delivered id, "replay": [ids]}}:
    each stream task's cut of its group (see the module's docstring)."""
    import redis

    cuts: dict[str, list[dict]] = {}
    for comp, sources in sources_of(snapshot).items():
        source = next(s for s in sources if s)
        if source.get("kind") != "redis-stream":
            continue
        consumers = {s["consumer"]: i for i, s in enumerate(sources) if s}
        per_task: list[dict] = [{} for _ in sources]
        client = _client(source, conf)
        try:
            for stream in source["streams"]:
                groups = [g for g in client.xinfo_groups(stream) if g["name"].decode() == source["group"]]
                if not groups:
                    continue
                ld = groups[0]["last-delivered-id"].decode()
                pending = _pending(client, stream, source["group"])
                for task, state in enumerate(snapshot.states[comp]):
                    raw = state.get(msgpack.packb(_POSITION + stream, use_bin_type=True))
                    position = decode(raw) if raw is not None else None
                    mine = [i for i, consumer in pending
                            if consumers.get(consumer, 0) == task
                            and (position is None or id_order(i) > id_order(position))]
                    per_task[task][stream] = {"ld": ld, "replay": sorted(mine, key=id_order)}
        except redis.RedisError as exc:
            raise SavepointRefused(f"spout {comp!r}: cannot read the cut of its Redis stream group at "
                                   f"{source['host']}:{source['port']}: {exc}") from None
        finally:
            client.close()
        cuts[comp] = per_task
    return cuts


def _pending(client, stream: str, group: str, page: int = 10_000) -> list[tuple[str, str]]:
    """(entry id, consumer) of every entry pending in the group, in id order."""
    out, start = [], "-"
    while True:
        rows = client.xpending_range(stream, group, min=start, max="+", count=page)
        out += [(r["message_id"].decode(), r["consumer"].decode()) for r in rows]
        if len(rows) < page:
            return out
        start = "(" + out[-1][0]


def with_cuts(snapshot: Snapshot, cuts: Mapping[str, list[dict]]) -> Snapshot:
    """The snapshot with each stream task's cut in its state (what the savepoint keeps)."""
    states = {c: [dict(v) for v in per] for c, per in snapshot.states.items()}
    for comp, per_task in cuts.items():
        for task, cut in enumerate(per_task):
            if cut:
                states[comp][task][_REWIND] = msgpack.packb(cut, use_bin_type=True)
    return Snapshot(snapshot.txid, states, snapshot.generation)


def take_with_cuts(read: Callable[[], Snapshot], committed: Callable[[], int | None], conf: Mapping[str, Any],
                   attempts: int = 20) -> Snapshot:
    """A savepoint's snapshot (`read`) with its sources' cuts, read while no later checkpoint
    committed (`committed`: the topology's last committed txid now), else tried again."""
    for _ in range(attempts):
        snap = read()
        if not sources_of(snap):
            return snap
        cuts = read_cuts(snap, conf)
        if committed() == snap.txid:
            return with_cuts(snap, cuts)
        log.info("a checkpoint committed while its streams' cut was read; reading again")
    raise SavepointRefused(f"no consistent cut of the streams in {attempts} tries (checkpoints commit faster "
                           f"than the groups can be read)")


def rewind(states: Mapping[str, list[Mapping[bytes, bytes]]], conf: Mapping[str, Any]) -> None:
    """A start from a savepoint: every stream group set back to the savepoint's cut (before any
    task of the new code reads): XGROUP SETID to its last delivered id, and the entries then
    pending past it, or to be read again by id, XACKed (the former are delivered again)."""
    import redis

    for comp, per_task in states.items():
        cuts = [decode(v[_REWIND]) for v in per_task if _REWIND in v]
        sources = [decode(v[_SOURCE]) for v in per_task if _SOURCE in v]
        if not cuts or not sources:
            continue
        source = sources[0]
        client = _client(source, conf)
        try:
            for stream in source["streams"]:
                stream_cuts = [c[stream] for c in cuts if stream in c]
                if not stream_cuts:
                    continue
                ld = stream_cuts[0]["ld"]
                again = [i for i, _c in _pending(client, stream, source["group"]) if id_order(i) > id_order(ld)]
                again += [i for c in stream_cuts for i in c["replay"]]
                for k in range(0, len(again), 1000):
                    client.xack(stream, source["group"], *again[k:k + 1000])
                client.xgroup_setid(stream, source["group"], ld)
                log.info("spout %s: group %r of stream %r set back to %s (%d entries read again)", comp,
                         source["group"], stream, ld, len(again))
        except redis.RedisError as exc:
            raise SavepointRefused(f"spout {comp!r}: cannot set its Redis stream group back to the savepoint at "
                                   f"{source['host']}:{source['port']}: {exc}") from None
        finally:
            client.close()
