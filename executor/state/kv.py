"""`KeyValueState`: a stateful component's key-value state with Storm's checkpoint side
(Storm's KeyValueState and State: prepareCommit / commit / rollback).

Three layers, newest first, make up what `get` sees:

- pending: the changes since the last `prepare_commit` (in memory only);
- prepared: the changes `prepare_commit(txid)` took for `txid`, not yet committed (held by the
  provider, so that a restarted task can still commit or roll them back);
- committed: what `commit(txid)` made durable (for Redis: a cache of what this state has read
  or written of it).

`prepare_commit(txid)` moves pending into prepared (preparing the same txid again adds the new
changes to it; another txid while one is prepared is refused, as Storm's State says),
`commit(txid)` applies the prepared changes to the committed ones, `rollback()` drops pending
and prepared: `get` returns the committed values again. A provider call that fails leaves all
three layers as they were, so the same call can be made again once the provider is back.

A commit with nothing prepared is accepted and only records the txid: it is a retry of a commit
whose answer was lost, or the COMMIT a recovering topology sends to a task whose (memory) state
started empty. Txids are only compared for equality (a checkpoint spout whose own record was
reset starts again from a low txid; refusing it would stop every checkpoint).

A state is used by one thread at a time (its executor's). Subclasses provide the committed
layer through the `_store_*` and `_fetch*` hooks.

Compiled with the per-tuple core (executor/core/__init__.py lists it; kv.pxd types its layers,
and providers subclass it in Python): a stateful bolt calls `get` and `put` per tuple.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator, Mapping

from executor.state.codec import TOMBSTONE, decode, encode_key, encode_value
from executor.state.errors import StateTransactionError

log = logging.getLogger(__name__)

_MISSING = object()
_DELETED = object()   # a deletion in the pending or prepared layer
_ABSENT = object()    # in the committed cache: a key known to have no committed value

_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1  # what msgpack's ints carry


class _Packed(bytes):
    """A value msgpack-encoded at `put` (a list, dict, ...): `get` decodes a fresh copy, so a
    change to the object after `put` never reaches the state."""

    __slots__ = ()


def _check_txid(namespace: str, txid: Any) -> int:
    if isinstance(txid, bool) or not isinstance(txid, int):
        raise StateTransactionError(f"state {namespace!r}: txid must be an int, got {txid!r}")
    return txid


def _from_stored(ev: bytes) -> Any:
    """A provider's value bytes in the layers' form (scalars as themselves, the rest packed)."""
    v = decode(ev)
    return v if v is None or type(v) in _SCALARS else _Packed(ev)


def _ik_from_stored(ek: bytes) -> Any:
    k = decode(ek)
    return k if type(k) is str else ek


_SCALARS = frozenset({str, int, float, bool, bytes})


def task_namespace(topology: str, component: str, index: int) -> str:
    """Where task `index` of `component` keeps its state, `topology/component#index`: per topology
    name (two topologies sharing a Redis never share state, and one killed and submitted again
    under its name continues from its last commit), component, and the task's index in its
    component, not its task id (ids shift when another component's parallelism changes, which
    gave a resubmitted spout another task's position: the whole stream again)."""
    return f"{topology}/{component}#{int(index)}"


def namespace_parts(namespace: str) -> tuple[str, str, int | None]:
    """(topology, component, task index) of a task's namespace (the inverse of task_namespace;
    component ids may hold '#', indexes not); index None for a namespace of another form."""
    topology, _, rest = namespace.partition("/")
    component, sep, index = rest.rpartition("#")
    if not sep or not index.isdigit():
        return topology, rest, None
    return topology, component, int(index)


class KeyValueState:
    """A component's key-value state; keys and values are anything msgpack can carry.

    Inside, the three layers hold keys as themselves when they are str (the common case) and as
    their msgpack bytes otherwise (str and bytes never compare equal, so the two cannot meet),
    and values as themselves when immutable scalars, else packed at `put`: the per-tuple
    get/put costs a dict lookup, and msgpack runs only for the provider, at prepare and fetch.
    """

    # Whether the provider's hooks need the changes as msgpack bytes (the memory provider keeps
    # nothing behind the layers and does not).
    _stores_bytes = True
    # Whether a commit outlives the task's process (the memory provider's does not).
    durable = True

    def __init__(self, namespace: str, *, committed_txid: int | None = None,
                 prepared_txid: int | None = None, prepared: Mapping[bytes, bytes] | None = None,
                 complete: bool = True):
        self.namespace = namespace
        self._pending: dict[Any, Any] = {}
        self._prepared: dict[Any, Any] = {
            _ik_from_stored(ek): (_DELETED if ev == TOMBSTONE else _from_stored(ev))
            for ek, ev in (prepared or {}).items()}
        self._prepared_txid = prepared_txid
        self._committed_txid = committed_txid
        # committed values known here (or _ABSENT for a key known to have none)
        self._cache: dict[Any, Any] = {}
        # whether _cache holds every committed key (then a key not in it is absent)
        self._complete = complete
        # keys whose committed value is let go of once their uncommitted change commits (forget)
        self._forget: set = set()

    # ------------------------------------------------------------------ the map

    def _ik(self, key: Any) -> Any:
        return key if type(key) is str else encode_key(self.namespace, key)

    def put(self, key: Any, value: Any) -> None:
        ns = self.namespace
        if type(key) is str:
            ik = key
            if not key.isascii():
                encode_key(ns, key)  # a lone surrogate is refused now, naming the key, not at prepare
        else:
            ik = encode_key(ns, key)
        t = type(value)
        if t is str:
            if not value.isascii():
                encode_value(ns, key, value)
            self._pending[ik] = value
        elif value is None or t is float or t is bool or t is bytes or (t is int and _INT_MIN <= value <= _INT_MAX):
            self._pending[ik] = value
        else:
            self._pending[ik] = _Packed(encode_value(ns, key, value))

    def get(self, key: Any, default: Any = None) -> Any:
        if type(key) is str:  # the common case, once per tuple: a key changed since the last prepare
            v = self._pending.get(key, _MISSING)
            if v is _MISSING:
                v = self._lookup(key)
            elif v is _DELETED:
                return default
        else:
            v = self._lookup(encode_key(self.namespace, key))
        if v is _MISSING:
            return default
        return decode(v) if type(v) is _Packed else v

    def delete(self, key: Any) -> Any:
        """Remove `key`; returns the value it had (None if none), as Storm's delete."""
        ik = self._ik(key)
        v = self._lookup(ik)
        self._pending[ik] = _DELETED
        if v is _MISSING:
            return None
        return decode(v) if type(v) is _Packed else v

    def discard(self, key: Any) -> None:
        """Remove `key` without reading the value it had (delete returns it, which may cost a
        read from the provider)."""
        self._pending[self._ik(key)] = _DELETED

    def forget(self, key: Any) -> None:
        """Let go of the committed value of `key` held in memory: a durable provider reads it
        again when it is asked for (a persistent window's tuples, beyond what it keeps in
        memory). A change not committed yet is let go of once it commits. The memory provider
        keeps everything: it has no other copy."""
        if not self._stores_bytes:
            return
        ik = self._ik(key)
        if ik in self._pending or ik in self._prepared:
            self._forget.add(ik)
        elif self._cache.pop(ik, _MISSING) is not _MISSING:
            self._complete = False

    def keys(self) -> list[Any]:
        """Every key with a value (a snapshot list: the state may change while it is used)."""
        return [ik if type(ik) is str else decode(ik) for ik, _ in self._live()]

    def items(self) -> list[tuple[Any, Any]]:
        """Every (key, value) pair (a snapshot list)."""
        return [(ik if type(ik) is str else decode(ik), decode(v) if type(v) is _Packed else v)
                for ik, v in self._live()]

    def _lookup(self, ik: Any) -> Any:
        """The value `get` sees in the layers' form, or _MISSING."""
        v = self._pending.get(ik, _MISSING)
        if v is _MISSING:
            v = self._prepared.get(ik, _MISSING)
            if v is _MISSING:
                v = self._committed(ik)
        return _MISSING if v is _DELETED or v is _ABSENT else v

    def _committed(self, ik: Any) -> Any:
        v = self._cache.get(ik, _MISSING)
        if v is not _MISSING or self._complete:
            return v
        raw = self._fetch(ik if type(ik) is bytes else encode_key(self.namespace, ik))
        v = self._cache[ik] = _ABSENT if raw is None else _from_stored(raw)
        return v

    def _live(self) -> Iterator[tuple[Any, Any]]:
        if not self._complete:
            for ek, ev in self._fetch_all():
                ik = _ik_from_stored(ek)
                if self._cache.get(ik, _MISSING) is _MISSING:
                    self._cache[ik] = _from_stored(ev)
            self._complete = True  # one writer per namespace: the scan saw every committed key
        changes = {**self._prepared, **self._pending}
        for ik, v in self._cache.items():
            if v is not _ABSENT and ik not in changes:
                yield ik, v
        for ik, v in changes.items():
            if v is not _DELETED:
                yield ik, v

    def _to_stored(self, layer: Mapping[Any, Any]) -> dict[bytes, bytes]:
        """A layer's changes as the provider stores them: msgpack keys and values, TOMBSTONE for
        a deletion."""
        ns = self.namespace
        out = {}
        for ik, v in layer.items():
            ek = ik if type(ik) is bytes else encode_key(ns, ik)
            if v is _DELETED:
                out[ek] = TOMBSTONE
            elif type(v) is _Packed:
                out[ek] = bytes(v)
            else:
                out[ek] = encode_value(ns, ik, v)
        return out

    # ------------------------------------------------------------------ checkpoints

    def committed_txid(self) -> int | None:
        """The last committed txid, None before the first commit."""
        return self._committed_txid

    def prepared_txid(self) -> int | None:
        """The txid prepared and not yet committed or rolled back (after a restart: the one a
        previous run prepared, for the checkpoint protocol to commit or roll back), else None."""
        return self._prepared_txid

    def prepare_commit(self, txid: int) -> None:
        txid = _check_txid(self.namespace, txid)
        if self._prepared_txid is not None and txid != self._prepared_txid:
            raise StateTransactionError(
                f"state {self.namespace!r}: cannot prepare txid {txid} while txid {self._prepared_txid} "
                f"is prepared and not committed (commit or roll it back first)")
        fresh = self._prepared_txid is None
        if fresh and self._committed_txid is not None and txid <= self._committed_txid:
            log.warning("state %r: preparing txid %d, not after the committed txid %d (was the "
                        "checkpoint record reset?)", self.namespace, txid, self._committed_txid)
        changes = self._to_stored(self._pending) if self._stores_bytes else {}
        self._store_prepare(txid, changes, fresh)  # raises: nothing changed here
        if fresh:
            self._prepared = self._pending
        else:
            self._prepared.update(self._pending)
        self._prepared_txid = txid
        self._pending = {}
        log.debug("state %r: prepared txid %d (%d changes)", self.namespace, txid, len(self._prepared))

    def commit(self, txid: int) -> None:
        txid = _check_txid(self.namespace, txid)
        if self._prepared_txid is None:
            if txid == self._committed_txid:
                return  # a retry of a commit that went through
            log.info("state %r: commit of txid %d with nothing prepared (a task whose state started "
                     "anew): only the txid is recorded", self.namespace, txid)
            self._store_commit(txid, None)
            self._committed_txid = txid
            return
        if txid != self._prepared_txid:
            raise StateTransactionError(
                f"state {self.namespace!r}: cannot commit txid {txid}: the prepared txid is "
                f"{self._prepared_txid}")
        self._store_commit(txid, self._prepared)  # raises: nothing changed here
        cache = self._cache
        forget = self._forget
        for ik, v in self._prepared.items():
            if forget and ik in forget and ik not in self._pending:
                forget.discard(ik)
                cache.pop(ik, None)
                self._complete = False
            elif v is not _DELETED:
                cache[ik] = v
            elif self._complete:
                cache.pop(ik, None)
            else:
                cache[ik] = _ABSENT
        self._prepared, self._prepared_txid, self._committed_txid = {}, None, txid
        log.debug("state %r: committed txid %d", self.namespace, txid)

    def rollback(self) -> None:
        """Drop every change not committed: `get` returns the committed values again."""
        self._store_rollback()  # raises: nothing changed here
        self._pending, self._prepared, self._prepared_txid = {}, {}, None
        self._forget.clear()
        log.debug("state %r: rolled back to txid %s", self.namespace, self._committed_txid)

    def reset(self) -> None:
        """Empty, with nothing committed, as a newly opened state of a provider that keeps nothing
        (the checkpoint spout's record of the commits was lost: see
        executor/checkpoint/protocol.py, restore_plan). Only for a state that is not durable."""
        if self.durable:
            raise StateTransactionError(f"state {self.namespace!r}: a durable state is never reset")
        self._pending, self._prepared, self._prepared_txid, self._committed_txid = {}, {}, None, None
        self._cache, self._complete = {}, True
        self._forget.clear()
        log.info("state %r: reset (nothing committed)", self.namespace)

    def committed_stored(self) -> dict[bytes, bytes]:
        """Every committed value as the provider stores them (msgpack keys and values): a
        savepoint's copy of a state that keeps its committed values here (the memory provider)."""
        return self._to_stored({ik: v for ik, v in self._cache.items() if v is not _ABSENT})

    def load_committed(self, txid: int, stored) -> None:
        """Set the committed values (msgpack keys and values) and txid, nothing prepared or
        pending: a state started from a savepoint (the memory provider)."""
        self._cache = {_ik_from_stored(ek): _from_stored(ev) for ek, ev in stored.items()}
        self._pending, self._prepared, self._prepared_txid = {}, {}, None
        self._committed_txid, self._complete = txid, True
        self._forget.clear()

    def close(self) -> None:
        """Release the provider's connection (the state is not usable afterwards)."""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.namespace!r}, committed txid {self._committed_txid}, "
                f"prepared txid {self._prepared_txid}, {len(self._pending)} pending)")

    # ------------------------------------------------------------------ provider hooks

    def _fetch(self, ek: bytes) -> bytes | None:
        """The committed value of `ek` from the provider (only when the cache is incomplete)."""
        raise NotImplementedError

    def _fetch_all(self) -> Iterable[tuple[bytes, bytes]]:
        """Every committed (key, value) from the provider (only when the cache is incomplete)."""
        raise NotImplementedError

    def _store_prepare(self, txid: int, changes: Mapping[bytes, bytes], fresh: bool) -> None:
        """Record `changes` as prepared for `txid`: replacing any prepared record when `fresh`,
        added to the prepared ones of the same txid otherwise. Atomic."""

    def _store_commit(self, txid: int, prepared: Mapping[Any, Any] | None) -> None:
        """Apply the prepared changes of `txid` (recorded by `_store_prepare`) to the committed
        ones and record `txid` as committed (prepared is None: nothing is prepared, only record
        it; otherwise the layer, in its internal form). Atomic, idempotent."""

    def _store_rollback(self) -> None:
        """Forget the prepared record. Idempotent."""
