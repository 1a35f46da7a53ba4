"""Merging executor stats (pure): counters add up, latencies average weighted by their counts."""

from __future__ import annotations

from typing import Iterable, Mapping

# latency key -> the counter it is an average over
LATENCY_WEIGHTS = {"execute_latency_ms": "executed", "complete_latency_ms": "acked"}


def merge_stats(stats: Iterable[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    weighted: dict[str, list[float]] = {}
    for s in stats:
        for k, v in s.items():
            weight_key = LATENCY_WEIGHTS.get(k)
            if weight_key is None:
                out[k] = out.get(k, 0) + v
            else:
                w = s.get(weight_key, 0) or 0
                acc = weighted.setdefault(k, [0.0, 0.0])
                acc[0] += v * w
                acc[1] += w
    for k, (total, w) in weighted.items():
        out[k] = total / w if w else 0.0
    return out
