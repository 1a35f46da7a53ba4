"""Cycles in a topology's component graph (pure).

Storm accepts topologies whose streams form a cycle (since 2.3 with a warning): a bolt may feed
a bolt upstream of itself, e.g. to retry. Such a cycle can deadlock under back-pressure when
every queue on it is full, so the builder warns, and executors on a cycle keep consuming their
input while back-pressured when `topology.max.spout.pending` bounds the tuple trees in flight.
"""

from __future__ import annotations

from typing import Iterable, Mapping


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively; each sorted, the list sorted."""
    nodes = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    succ = {n: sorted(set(edges.get(n, ()))) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = succ[node]
            if i < len(targets):
                work.append((node, i + 1))
                t = targets[i]
                if t not in index:
                    work.append((t, 0))
                elif t in on_stack:
                    low[node] = min(low[node], index[t])
                continue
            if work:  # propagate to the parent once this node is finished
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                out.append(sorted(comp))
    return sorted(out)


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The components that lie on a cycle, grouped by strongly connected set (self-loops included)."""
    return [c for c in strongly_connected(edges)
            if len(c) > 1 or c[0] in set(edges.get(c[0], ()))]


def describe_cycle(component_ids: list[str], edges: Mapping[str, Iterable[str]]) -> str:
    """The shortest cycle through the set's first component, as 'a -> b -> a', for messages."""
    members = set(component_ids)
    start = component_ids[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth first, so the cycle shown is a shortest one
        nxt_frontier = []
        for node in frontier:
            for t in sorted(set(edges.get(node, ()))):
                if t == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return " -> ".join(reversed(path)) + f" -> {start}"
                if t in members and t not in parent:
                    parent[t] = node
                    nxt_frontier.append(t)
        frontier = nxt_frontier
    return " -> ".join(sorted(members))  # not a cycle after all: name the set
