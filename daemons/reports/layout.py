"""A layered layout of the topology graph (pure; the web page only draws it).

Storm's UI lays the graph out with a force simulation, which its users find unreadable past a
dozen components. Data flows one way through a topology, so a layered ("Sugiyama") layout
shows it as it is: each component in the column of its longest path from a spout, components
within a column ordered to cross few edges. Steps:
1. break cycles (Storm allows a bolt to feed an earlier one): edges that close a cycle in a
   depth-first walk from the sources are ignored for layering;
2. layer = length of the longest path from a source (spouts and components without inputs
   start at 0);
3. order within each layer by the barycentre (mean row) of the neighbours in the previous
   layer, then of the next, a few sweeps; ties keep the name order, so the layout is stable
   between two polls of the same topology.
"""

from __future__ import annotations

from typing import Iterable, Mapping

SWEEPS = 4


def layers(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Column of each node: its longest path from a source, cycles broken."""
    names = sorted(set(nodes))
    succ: dict[str, list[str]] = {n: [] for n in names}
    for src, dst in edges:
        if src in succ and dst in succ and src != dst and dst not in succ[src]:
            succ[src].append(dst)
    for n in names:
        succ[n].sort()
    forward = _acyclic(names, succ)
    indegree = {n: 0 for n in names}
    for n in names:
        for m in forward[n]:
            indegree[m] += 1
    layer = {n: 0 for n in names}
    ready = [n for n in names if indegree[n] == 0]
    while ready:
        n = ready.pop(0)
        for m in forward[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    return layer


def _acyclic(names: list[str], succ: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """succ without the edges that close a cycle (back edges of a depth-first walk that starts
    from the sources, then from any node not reached)."""
    has_input = {m for n in names for m in succ[n]}
    starts = [n for n in names if n not in has_input] + names
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    forward: dict[str, list[str]] = {n: [] for n in names}
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(succ[start]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                continue  # a back edge: it closes a cycle
            else:
                forward[node].append(child)
                if child not in state:
                    state[child] = 1
                    stack.append((child, iter(succ[child])))
    return forward


def layout(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """(layer, row) of each node: rows count from 0 within each layer."""
    edges = list(edges)
    layer = layers(nodes, edges)
    columns: dict[int, list[str]] = {}
    for n in sorted(layer):
        columns.setdefault(layer[n], []).append(n)
    preds: dict[str, set[str]] = {n: set() for n in layer}
    succs: dict[str, set[str]] = {n: set() for n in layer}
    for src, dst in edges:
        if src in layer and dst in layer and src != dst:
            succs[src].add(dst)
            preds[dst].add(src)
    depth = max(columns, default=-1) + 1
    for _ in range(SWEEPS):
        for col in range(1, depth):
            _reorder(columns[col], preds, columns)
        for col in range(depth - 2, -1, -1):
            _reorder(columns[col], succs, columns)
    return {n: (col, row) for col, members in columns.items() for row, n in enumerate(members)}


def _reorder(members: list[str], neighbours: Mapping[str, set[str]], columns: Mapping[int, list[str]]) -> None:
    row = {n: i for col in columns.values() for i, n in enumerate(col)}

    def key(item: tuple[int, str]) -> tuple[float, int]:
        index, n = item
        linked = [row[m] for m in neighbours[n] if m in row]
        return (sum(linked) / len(linked) if linked else float(index), index)

    members[:] = [n for _i, n in sorted(enumerate(members), key=key)]


def crossings(positions: Mapping[str, tuple[int, int]], edges: Iterable[tuple[str, str]]) -> int:
    """Edge crossings between adjacent layers (what the ordering tries to keep low)."""
    spans = [(positions[a], positions[b]) for a, b in edges
             if a in positions and b in positions and positions[b][0] == positions[a][0] + 1]
    count = 0
    for i, ((la, ra), (_lb, rb)) in enumerate(spans):
        for (lc, rc), (_ld, rd) in spans[i + 1:]:
            if la == lc and (ra - rc) * (rb - rd) < 0:
                count += 1
    return count
