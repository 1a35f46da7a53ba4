"""RotatingMap: a map whose entries expire after between N-1 and N rotations (Storm's RotatingMap).

Rotation is driven from outside (system tick tuples), so there is no cleaner thread.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable


class RotatingMap:
    def __init__(self, num_buckets: int = 2, expired: Callable[[Any, Any], None] | None = None):
        if num_buckets < 2:
            raise ValueError("RotatingMap needs at least 2 buckets")
        self._buckets: list[dict] = [{} for _ in range(num_buckets)]
        self._expired = expired

    def put(self, key: Hashable, value: Any) -> None:
        buckets = self._buckets
        buckets[0][key] = value
        for b in buckets[1:]:
            b.pop(key, None)

    def put_new(self, key: Hashable, value: Any) -> None:
        """put() for a key known to be absent (fresh random ids): skips the older buckets."""
        self._buckets[0][key] = value

    def get(self, key: Hashable, default: Any = None) -> Any:
        for b in self._buckets:
            if key in b:
                return b[key]
        return default

    # Special methods are defined, not aliased: the compiled build (a cdef class) ignores aliases.
    def __contains__(self, key: Hashable) -> bool:
        for b in self._buckets:
            if key in b:
                return True
        return False

    def contains(self, key: Hashable) -> bool:
        return key in self

    def remove(self, key: Hashable, default: Any = None) -> Any:
        for b in self._buckets:
            v = b.pop(key, _MISSING)
            if v is not _MISSING:
                return v
        return default

    def items(self) -> list[tuple[Any, Any]]:
        return [kv for b in self._buckets for kv in b.items()]

    def __len__(self) -> int:
        n = 0
        for b in self._buckets:
            n += len(b)
        return n

    def size(self) -> int:
        return len(self)

    def rotate(self) -> dict:
        """Drop the oldest bucket, calling the expiry callback for each of its entries."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        if self._expired is not None:
            for k, v in dead.items():
                self._expired(k, v)
        return dead


_MISSING = object()
