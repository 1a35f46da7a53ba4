"""Grouping target choice: pure functions of (targets, values), no I/O.

Fields grouping must pick the same task for equal values in every process, so it uses a
stable hash (CRC-32 based), never Python's per-process randomized hash(). CRC-32 is linear in
its input: keys that differ in one character (part-0, part-1, ...) differ only in a few low
bits, and `h % n` sends them all to the same few tasks. The groupers therefore pass it through
MurmurHash3's finaliser (mix32), whose every output bit depends on every input bit, as Java's
List.hashCode spreads such keys for Storm. `topology.fields.grouping.hash: crc32` keeps the
unmixed hash of earlier storm-py (keyed state written by it stays on its tasks).
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


def mix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser (fmix32): a bijection whose every output bit depends on
    every input bit."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    return h ^ (h >> 16)


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
    """The task of a key: its stable hash, mixed (mix32), modulo the sorted targets. `mixed=False`
    is `topology.fields.grouping.hash: crc32`, the unmixed hash of earlier storm-py."""

    def __init__(self, targets: Sequence[int], stream_fields: Fields, group_fields: Fields, mixed: bool = True):
        self._targets = sorted(targets)
        self._n = len(self._targets)
        self._idx = [stream_fields.index(f) for f in group_fields]
        self._single = self._idx[0] if len(self._idx) == 1 else None
        self._cache: dict[str, int] = {}
        self._mixed = mixed

    def choose(self, values):
        if self._single is not None:
            v = values[self._single]
            if type(v) is str:
                # Keys repeat (words, user ids): a bounded cache beats encode + crc32 + mix each time.
                i = self._cache.get(v)
                if i is None:
                    if len(self._cache) >= _CACHE_MAX:
                        self._cache.clear()
                    h = crc32(v.encode("utf-8", "surrogatepass"))
                    i = self._cache[v] = (mix32(h) if self._mixed else h) % self._n
                return [self._targets[i]]
            h = stable_hash(v)
        else:
            h = hash_values([values[i] for i in self._idx])
        if self._mixed:
            h = mix32(h)
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
        # two independent choices: a linear hash would put numbered keys on the same pair of tasks
        a = mix32(h) % self._n
        b = mix32(h ^ 0x9E3779B9) % self._n
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
