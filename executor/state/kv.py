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
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator, Mapping

from executor.state.codec import TOMBSTONE, decode, encode_key, encode_value
from executor.state.errors import StateTransactionError

log = logging.getLogger(__name__)

_MISSING = object()


def _check_txid(namespace: str, txid: Any) -> int:
    if isinstance(txid, bool) or not isinstance(txid, int):
        raise StateTransactionError(f"state {namespace!r}: txid must be an int, got {txid!r}")
    return txid


class KeyValueState:
    """A component's key-value state; keys and values are anything msgpack can carry."""

    def __init__(self, namespace: str, *, committed_txid: int | None = None,
                 prepared_txid: int | None = None, prepared: Mapping[bytes, bytes] | None = None,
                 complete: bool = True):
        self.namespace = namespace
        self._pending: dict[bytes, bytes] = {}
        self._prepared: dict[bytes, bytes] = dict(prepared or {})
        self._prepared_txid = prepared_txid
        self._committed_txid = committed_txid
        # committed values known here: bytes, or None for a key known to be absent
        self._cache: dict[bytes, bytes | None] = {}
        # whether _cache holds every committed key (then a key not in it is absent)
        self._complete = complete

    # ------------------------------------------------------------------ the map

    def put(self, key: Any, value: Any) -> None:
        ek = encode_key(self.namespace, key)
        self._pending[ek] = encode_value(self.namespace, key, value)

    def get(self, key: Any, default: Any = None) -> Any:
        raw = self._lookup(encode_key(self.namespace, key))
        return default if raw is None else decode(raw)

    def delete(self, key: Any) -> Any:
        """Remove `key`; returns the value it had (None if none), as Storm's delete."""
        ek = encode_key(self.namespace, key)
        raw = self._lookup(ek)
        self._pending[ek] = TOMBSTONE
        return None if raw is None else decode(raw)

    def keys(self) -> list[Any]:
        """Every key with a value (a snapshot list: the state may change while it is used)."""
        return [decode(ek) for ek, _ in self._live()]

    def items(self) -> list[tuple[Any, Any]]:
        """Every (key, value) pair (a snapshot list)."""
        return [(decode(ek), decode(ev)) for ek, ev in self._live()]

    def _lookup(self, ek: bytes) -> bytes | None:
        raw = self._pending.get(ek, _MISSING)
        if raw is _MISSING:
            raw = self._prepared.get(ek, _MISSING)
        if raw is _MISSING:
            raw = self._committed(ek)
        return None if raw is None or raw == TOMBSTONE else raw

    def _committed(self, ek: bytes) -> bytes | None:
        if ek in self._cache:
            return self._cache[ek]
        if self._complete:
            return None
        raw = self._fetch(ek)
        self._cache[ek] = raw
        return raw

    def _live(self) -> Iterator[tuple[bytes, bytes]]:
        if not self._complete:
            self._cache.update(self._fetch_all())
            self._complete = True  # one writer per namespace: the scan saw every committed key
        changes = {**self._prepared, **self._pending}
        for ek, ev in self._cache.items():
            if ev is not None and ek not in changes:
                yield ek, ev
        for ek, ev in changes.items():
            if ev != TOMBSTONE:
                yield ek, ev

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
        self._store_prepare(txid, self._pending, fresh)  # raises: nothing changed here
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
        for ek, ev in self._prepared.items():
            if ev != TOMBSTONE:
                self._cache[ek] = ev
            elif self._complete:
                self._cache.pop(ek, None)
            else:
                self._cache[ek] = None
        self._prepared, self._prepared_txid, self._committed_txid = {}, None, txid
        log.debug("state %r: committed txid %d", self.namespace, txid)

    def rollback(self) -> None:
        """Drop every change not committed: `get` returns the committed values again."""
        self._store_rollback()  # raises: nothing changed here
        self._pending, self._prepared, self._prepared_txid = {}, {}, None
        log.debug("state %r: rolled back to txid %s", self.namespace, self._committed_txid)

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

    def _store_commit(self, txid: int, prepared: Mapping[bytes, bytes] | None) -> None:
        """Apply the prepared changes of `txid` to the committed ones and record `txid` as
        committed (prepared is None: nothing is prepared, only record it). Atomic, idempotent."""

    def _store_rollback(self) -> None:
        """Forget the prepared record. Idempotent."""
