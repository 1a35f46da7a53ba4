"""Grouping target choice: pure functions of (targets, values), no I/O.

Fields grouping must pick the same task for equal values in every process, so it uses a
stable hash (CRC-32 based), never Python's per-process randomized hash().
"""

from __future__ import annotations

import random
import struct
from typing import Any, Callable, Sequence
from zlib import crc32

from executor.tuple import Fields

_MASK = 0xFFFFFFFF
_CACHE_MAX = 65536  # distinct string keys remembered per fields grouper


def stable_hash(value: Any) -> int:
    """A 32-bit hash that is identical in every process for equal msgpack-able values."""
    t = type(value)
    if t is str:
        return crc32(value.encode("utf-8", "surrogatepass"))
    if t is int:
        return value & _MASK ^ (value >> 32) & _MASK
    if t is bytes or t is bytearray:
        return crc32(value)
    if t is bool:
        return 1231 if value else 1237
    if value is None:
        return 0
    if t is float:
        if value.is_integer():
            return stable_hash(int(value))
        return crc32(struct.pack("<d", value))
    if isinstance(value, (list, tuple)):
        return hash_values(value)
    if isinstance(value, dict):
        h = 0
        for k, v in value.items():  # order-independent, like Java's Map.hashCode
            h = (h + (stable_hash(k) ^ stable_hash(v))) & _MASK
        return h
    # Subclasses (StrEnum, IntEnum, ...) travel as their base type: hash them the same way.
    if isinstance(value, bool):
        return stable_hash(bool(value))
    if isinstance(value, int):
        return stable_hash(int(value))
    if isinstance(value, str):
        return crc32(str.encode(value, "utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray)):
        return crc32(value)
    if isinstance(value, float):
        return stable_hash(float(value))
    raise TypeError(f"cannot hash value of type {t.__name__} for grouping: {value!r}")


def hash_values(values: Sequence[Any]) -> int:
    h = 1
    for v in values:
        h = (31 * h + stable_hash(v)) & _MASK
    return h


class Grouper:
    """Chooses target tasks among `targets` for one subscription.

    choose() returns a new list every call: emit() hands it to user code as is.
    """

    def choose(self, values: Sequence[Any]) -> list[int]:
        raise NotImplementedError


class ShuffleGrouper(Grouper):
    """Round robin over a shuffled target list, reshuffled each round (Storm's ShuffleGrouping)."""

    def __init__(self, targets: Sequence[int], rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._targets = list(targets)
        self._rng.shuffle(self._targets)
        self._i = 0
        self._n = len(self._targets)

    def choose(self, values):
        i = self._i
        if i >= self._n:
            if self._n > 1:
                self._rng.shuffle(self._targets)
            i = 0
        self._i = i + 1
        return [self._targets[i]]


class FieldsGrouper(Grouper):
    def __init__(self, targets: Sequence[int], stream_fields: Fields, group_fields: Fields):
        self._targets = sorted(targets)
        self._n = len(self._targets)
        self._idx = [stream_fields.index(f) for f in group_fields]
        self._single = self._idx[0] if len(self._idx) == 1 else None
        self._cache: dict[str, int] = {}

    def choose(self, values):
        if self._single is not None:
            v = values[self._single]
            if type(v) is str:
                # Keys repeat (words, user ids): a bounded cache beats encode + crc32 each time.
                h = self._cache.get(v)
                if h is None:
                    if len(self._cache) >= _CACHE_MAX:
                        self._cache.clear()
                    h = self._cache[v] = crc32(v.encode("utf-8", "surrogatepass"))
            else:
                h = stable_hash(v)
        else:
            h = hash_values([values[i] for i in self._idx])
        return [self._targets[h % self._n]]


class PartialKeyGrouper(Grouper):
    """Two candidate tasks per key (two hashes); the less loaded one, by local counts, wins."""

    def __init__(self, targets: Sequence[int], stream_fields: Fields, group_fields: Fields):
        self._targets = sorted(targets)
        self._n = len(self._targets)
        self._idx = [stream_fields.index(f) for f in group_fields]
        self._load = [0] * self._n

    def choose(self, values):
        key = [values[i] for i in self._idx]
        h = hash_values(key)
        a = h % self._n
        b = crc32(struct.pack("<I", h), 0x9E3779B9) % self._n
        pick = a if self._load[a] <= self._load[b] else b
        self._load[pick] += 1
        return [self._targets[pick]]


class AllGrouper(Grouper):
    def __init__(self, targets: Sequence[int]):
        self._targets = sorted(targets)

    def choose(self, values):
        return list(self._targets)


class GlobalGrouper(Grouper):
    def __init__(self, targets: Sequence[int]):
        self._targets = [min(targets)] if targets else []

    def choose(self, values):
        return list(self._targets)


class LocalOrShuffleGrouper(ShuffleGrouper):
    """Shuffle among targets in the same worker when there are any, else among all."""

    def __init__(self, targets: Sequence[int], local_tasks: set[int], rng: random.Random | None = None):
        local = [t for t in targets if t in local_tasks]
        super().__init__(local or list(targets), rng)


_LOAD_EVERY = 64  # choices between two looks at the local tasks' load


class LocalityAwareShuffleGrouper(Grouper):
    """A shuffle that keeps tuples in the emitting worker while its tasks there keep up (Storm 2's
    LoadAwareShuffleGrouping, scopes worker-local and everything; storm-py has no host or rack
    scope, and picks round robin within a scope instead of by weight).

    load(task) is a local task's receive queue fill (0..1). Every _LOAD_EVERY choices the mean
    load of the local targets moves the scope: above `higher` to every target, back below `lower`
    to the local ones; in between it stays (hysteresis, as Storm's)."""

    def __init__(self, targets: Sequence[int], local_tasks: set[int], load: Callable[[int], float],
                 higher: float, lower: float, rng: random.Random | None = None):
        self._local_tasks = [t for t in targets if t in local_tasks]
        self._local = ShuffleGrouper(self._local_tasks, rng)
        self._everything = ShuffleGrouper(targets, rng)
        self._load = load
        self._higher = higher
        self._lower = lower
        self.scope_local = True
        self._until_check = _LOAD_EVERY

    def choose(self, values):
        self._until_check -= 1
        if self._until_check <= 0:
            self._until_check = _LOAD_EVERY
            self._rescope()
        return (self._local if self.scope_local else self._everything).choose(values)

    def _rescope(self) -> None:
        load = self._load
        mean = sum(load(t) for t in self._local_tasks) / len(self._local_tasks)
        if self.scope_local:
            if mean > self._higher:
                self.scope_local = False
        elif mean < self._lower:
            self.scope_local = True


class CustomGrouper(Grouper):
    """Wraps a user object with prepare(context, stream, targets) and choose_tasks(task, values)."""

    def __init__(self, user: Any, targets: Sequence[int], source_task: int, validate: Callable[[list], list]):
        self._user = user
        self._task = source_task
        self._validate = validate

    def choose(self, values):
        return self._validate(list(self._user.choose_tasks(self._task, values)))


def split_tasks(task_ids: Sequence[int], n_executors: int) -> list[tuple[int, int]]:
    """Split contiguous task ids over executors as evenly as possible: 5 over 3 -> [2, 2, 1]."""
    n = max(1, min(n_executors, len(task_ids)))
    if not task_ids:
        return []
    base, extra = divmod(len(task_ids), n)
    out, i = [], 0
    for k in range(n):
        size = base + (1 if k < extra else 0)
        out.append((task_ids[i], task_ids[i + size - 1]))
        i += size
    return out
