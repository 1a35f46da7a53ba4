"""The `redis` provider (storm-redis's RedisKeyValueState): a durable state in a Redis server.

Keys of namespace NS under `key_prefix` P (field names are the msgpack bytes of the state's
keys, values their msgpack values):

- `P:NS:committed`: hash, the committed values;
- `P:NS:prepared`: hash, the changes prepared and not yet committed (a deletion is the empty
  string, which no msgpack value encodes to);
- `P:NS:txid`: hash, `commit` = the last committed txid, `prepare` = the prepared txid while
  one is prepared and not committed (as Storm's `NS$txid`).

NS is `name/component#index` (executor/state/kv.py task_namespace: the task's index in its
component; task ids shift with the topology's other components, indexes do not). A topology
started from a savepoint (`storm-py swap`, `jar submit --from-savepoint`) keeps its state in a
generation of its own: NS is then stored as `P:name:GEN/component#index:...`, GEN read at open
from the string key `P:name:generation` (executor/savepoints/store.py writes it). Tasks of the run before keep the keys they opened, so
a worker of the old topology still shutting down never writes the new run's state.

`prepare_commit` writes the prepared hash and the `prepare` field in one MULTI/EXEC; `commit`
is one Lua script that applies the prepared hash to the committed one, deletes it and moves the
txid from `prepare` to `commit`; `rollback` deletes the prepared hash and the `prepare` field in
one MULTI/EXEC. Redis runs a script or a transaction whole, and its append-only file drops an
incomplete one when it loads, so a crash leaves either the old or the new committed state.

Recovery: opening the state reads the txid record and the prepared hash in one transaction; a
txid prepared by an earlier run and not committed is `prepared_txid()`, its changes visible to
`get` (as Storm's pending commit), until the checkpoint protocol commits or rolls it back.

Reads and the cache (the trade-off): pending and prepared changes live in memory, and every
committed value this state reads or commits is cached, so a key is fetched from Redis at most
once (HGET) and `keys()`/`items()` scan the committed hash once (HSCAN), after which the state
answers everything from memory. A state whose namespace holds nothing at open needs no read at
all. The price: the cache grows with the keys used (up to the whole state after a scan), and it
assumes this state is the namespace's only writer, as a task is in Storm; another writer's
changes would not be seen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Iterable, Mapping

from executor.state.errors import StateTransactionError
from executor.state.kv import KeyValueState, namespace_parts, task_namespace
from executor.state.redis_client import RedisSettings, connect, unavailable

log = logging.getLogger(__name__)

_CHUNK = 1000  # fields per HSET / per HSCAN step: bounded commands for a large state

# KEYS: committed, prepared, txid record. ARGV: txid, "1" when the caller has nothing prepared.
# Returns {code, prepared txid, committed txid}: 1 applied, 0 already committed (a retry),
# 2 nothing prepared and only the txid recorded, -1 the record does not match the caller's.
_COMMIT_LUA = """
local prepared = redis.call('HGET', KEYS[3], 'prepare')
if prepared == ARGV[1] then
  local changes = redis.call('HGETALL', KEYS[2])
  for i = 1, #changes, 2 do
    if changes[i + 1] == '' then
      redis.call('HDEL', KEYS[1], changes[i])
    else
      redis.call('HSET', KEYS[1], changes[i], changes[i + 1])
    end
  end
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], 'prepare')
  redis.call('HSET', KEYS[3], 'commit', ARGV[1])
  return {1, '', ''}
end
local committed = redis.call('HGET', KEYS[3], 'commit')
if not prepared and committed == ARGV[1] then
  return {0, '', ''}
end
if not prepared and ARGV[2] == '1' then
  redis.call('HSET', KEYS[3], 'commit', ARGV[1])
  return {2, '', ''}
end
return {-1, prepared or '', committed or ''}
"""


@dataclass(frozen=True)
class RedisKeys:
    committed: str
    prepared: str
    txid: str

    @classmethod
    def of(cls, key_prefix: str, namespace: str, generation: str | None = None) -> "RedisKeys":
        # distinct suffixes, none a suffix of another: no namespace's keys can be another's
        # (a topology name holds no ':' nor '/', so a generation's keys are no other name's)
        if generation:
            topology, component, index = namespace_parts(namespace)
            if index is None:
                raise ValueError(f"state {namespace!r}: a generation's keys need the task's index")
            return cls.in_generation(key_prefix, topology, component, generation, index)
        return cls._at(f"{key_prefix}:{namespace}")

    @classmethod
    def of_task(cls, key_prefix: str, topology: str, component: str, index: int,
                generation: str | None = None) -> "RedisKeys":
        """The keys of task `index` of `component`: in `generation`, or the first one's."""
        if generation:
            return cls.in_generation(key_prefix, topology, component, generation, index)
        return cls._at(f"{key_prefix}:{task_namespace(topology, component, index)}")

    @classmethod
    def in_generation(cls, key_prefix: str, topology: str, component: str, generation: str,
                      index: int) -> "RedisKeys":
        """The keys of task `index` of `component` in a generation of `topology`'s state."""
        return cls._at(f"{key_prefix}:{topology}:{generation}/{component}#{int(index)}")

    @classmethod
    def _at(cls, base: str) -> "RedisKeys":
        return cls(f"{base}:committed", f"{base}:prepared", f"{base}:txid")


def generation_key(key_prefix: str, topology: str) -> str:
    """The string key naming the generation of `topology`'s state (absent: the first one)."""
    return f"{key_prefix}:{topology}:generation"


def _txid(raw: bytes | None, where: str) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise StateTransactionError(f"{where} holds txid {raw!r}, not an integer") from None


class RedisKeyValueState(KeyValueState):
    def __init__(self, namespace: str, client: Any, settings: RedisSettings, keys: RedisKeys, **layers: Any):
        super().__init__(namespace, **layers)
        self._client = client
        self._settings = settings
        self._keys = keys
        self._commit_script = client.register_script(_COMMIT_LUA)

    @classmethod
    def open(cls, namespace: str, settings: RedisSettings) -> "RedisKeyValueState":
        client = connect(settings)
        gen_key = generation_key(settings.key_prefix, namespace_parts(namespace)[0])

        def read_generation():
            raw = client.get(gen_key)
            return raw.decode() if raw else None

        try:
            keys = RedisKeys.of(settings.key_prefix, namespace,
                                _call(read_generation, settings, f"state {namespace!r}, open"))
        except BaseException:
            client.close()
            raise

        def read():
            pipe = client.pipeline(transaction=True)  # one consistent snapshot
            pipe.hgetall(keys.txid)
            pipe.hgetall(keys.prepared)
            pipe.exists(keys.committed)
            return pipe.execute()

        try:
            txids, prepared, exists = _call(read, settings, f"state {namespace!r}, open")
            committed_txid = _txid(txids.get(b"commit"), f"redis key {keys.txid!r}")
            prepared_txid = _txid(txids.get(b"prepare"), f"redis key {keys.txid!r}")
        except BaseException:
            client.close()
            raise
        if prepared_txid is None:
            prepared = {}  # a stray hash without its record: the next prepare replaces it
        else:
            log.info("state %r: txid %d was prepared and not committed (%d changes); the checkpoint "
                     "protocol commits or rolls it back", namespace, prepared_txid, len(prepared))
        return cls(namespace, client, settings, keys, committed_txid=committed_txid,
                   prepared_txid=prepared_txid, prepared=prepared, complete=not exists)

    @property
    def redis_keys(self) -> RedisKeys:
        return self._keys

    def close(self) -> None:
        self._client.close()

    def _run(self, what: str, fn: Callable[[], Any]) -> Any:
        return _call(fn, self._settings, f"state {self.namespace!r}, {what}")

    # ------------------------------------------------------------------ hooks

    def _fetch(self, ek: bytes) -> bytes | None:
        return self._run("get", lambda: self._client.hget(self._keys.committed, ek))

    def _fetch_all(self) -> Iterable[tuple[bytes, bytes]]:
        return self._run("keys", lambda: list(self._client.hscan_iter(self._keys.committed, count=_CHUNK)))

    def _store_prepare(self, txid: int, changes: Mapping[bytes, bytes], fresh: bool) -> None:
        def write():
            pipe = self._client.pipeline(transaction=True)
            if fresh:
                pipe.delete(self._keys.prepared)
            items = iter(changes.items())
            while chunk := dict(islice(items, _CHUNK)):
                pipe.hset(self._keys.prepared, mapping=chunk)
            pipe.hset(self._keys.txid, "prepare", str(txid))
            pipe.execute()

        self._run(f"prepare_commit txid {txid}", write)

    def _store_commit(self, txid: int, prepared: Mapping[bytes, bytes] | None) -> None:
        keys = self._keys
        code, in_redis, committed = self._run(f"commit txid {txid}", lambda: self._commit_script(
            keys=[keys.committed, keys.prepared, keys.txid], args=[str(txid), "1" if prepared is None else "0"]))
        code = int(code)
        if code == 1 and prepared is None:
            # Redis held a prepare of this txid that this state did not know of: read afresh.
            self._cache.clear()
            self._complete = False
        if code >= 0:
            return
        where = f"redis state provider at {self._settings.address}"
        if prepared is not None and not in_redis:
            raise StateTransactionError(
                f"{where}: state {self.namespace!r}: prepared txid {txid} is no longer in Redis (its "
                f"committed txid there: {committed.decode() or 'none'}; did the server lose its data?); "
                f"roll back")
        raise StateTransactionError(
            f"{where}: state {self.namespace!r}: Redis holds prepared txid {in_redis.decode() or 'none'}, "
            f"not {txid} (does another task write this namespace?); roll back")

    def _store_rollback(self) -> None:
        def write():
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._keys.prepared)
            pipe.hdel(self._keys.txid, "prepare")
            pipe.execute()

        self._run("rollback", write)


def _call(fn: Callable[[], Any], settings: RedisSettings, what: str) -> Any:
    import redis.exceptions as rex

    try:
        return fn()
    except (rex.RedisError, OSError) as exc:
        # one line naming the server; the client's traceback says nothing more to the user
        raise unavailable(exc, settings, what) from None
