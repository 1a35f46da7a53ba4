"""A persistent window's tuples (Storm's withPersistence / withMaxEventsInMemory, its
PersistentWindowedBoltExecutor and WindowState): each tuple of a stateful windowed bolt's window
is put in the bolt's KeyValueState when it arrives, under key ["$w", id], so it is checkpointed
with the state and acked once that checkpoint commits, not when it leaves the window; at most
`max_in_memory` of them are kept as Tuples (the most recently used), the others are read back
from the state when a window is iterated. What stays in memory per tuple beyond that is its
place in the window manager: a timestamp and two ints.

With the memory provider the state itself is in memory (it has no other copy), so the bound
saves nothing there; use a durable provider (redis) for windows larger than memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Callable, Iterator

from executor.tuple import Tuple

KEY = "$w"  # a persistent window's tuples in the bolt's state: ["$w", id] -> [values, task, stream, component]


class WindowStore:
    def __init__(self, state: Any, max_in_memory: int, fields_of: Callable[[str, str], list]):
        self.state = state
        self.max_in_memory = max_in_memory
        self._fields_of = fields_of
        self._mem: OrderedDict[int, Tuple] = OrderedDict()

    def __len__(self) -> int:
        """The tuples held in memory."""
        return len(self._mem)

    def add(self, ident: int, tup: Tuple) -> None:
        self.state.put([KEY, ident], [list(tup.values), tup.source_task, tup.source_stream, tup.source_component])
        self._remember(ident, tup)

    def get(self, ident: int) -> Tuple:
        tup = self._mem.get(ident)
        if tup is not None:
            self._mem.move_to_end(ident)
            return tup
        data = self.state.get([KEY, ident])
        if data is None:
            raise KeyError(f"window tuple {ident} is not in the state {self.state.namespace!r}")
        values, task, stream, comp = data
        tup = Tuple(values, task, stream, comp, self._fields_of(comp, stream), None)
        self._remember(ident, tup)
        return tup

    def remove(self, ident: int) -> None:
        """The tuple left the window: out of the state (at the next checkpoint) and of memory."""
        self.state.discard([KEY, ident])
        self._mem.pop(ident, None)

    def _remember(self, ident: int, tup: Tuple) -> None:
        mem = self._mem
        mem[ident] = tup
        while len(mem) > self.max_in_memory:
            old, _ = mem.popitem(last=False)
            self.state.forget([KEY, old])


class LazyTuples(Sequence):
    """A window's tuples by id, each read (from memory or the state) when it is used."""

    __slots__ = ("_ids", "_store")

    def __init__(self, ids: list, store: WindowStore):
        self._ids = ids
        self._store = store

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._store.get(x) for x in self._ids[i]]
        return self._store.get(self._ids[i])

    def __iter__(self) -> Iterator[Tuple]:
        get = self._store.get
        for x in self._ids:
            yield get(x)

    def __repr__(self) -> str:
        return f"LazyTuples({len(self._ids)} tuples)"
