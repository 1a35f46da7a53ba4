"""One executor's stats as a typed record: what a worker sends in its heartbeat and what Nimbus,
LocalCluster, the CLI and the UI merge (executor/stats.py). Pure data and its wire form.

Counters are per window (executor/stats_windows.py) as flat `metric|key` mappings; the gauges
(queue population and capacity, back-pressure, pending) are the executor's state when the
record was made. The wire form names each executor's counter keys once and then gives each
window's values as a dense list, so that a worker of 200 executors stays far below ZooKeeper's
node limit (1 MB) whatever its stream names.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from executor.stats_windows import WINDOW_NAMES

log = logging.getLogger(__name__)

WIRE_VERSION = 1
KINDS = ("spout", "bolt", "acker")


class StatsDecodeError(ValueError):
    """A stats record that is not one (garbage, truncated, another version)."""


@dataclass(frozen=True)
class ExecutorStats:
    component: str
    kind: str                      # "spout", "bolt" or "acker"
    uptime_secs: int
    # window name -> (seconds the window covers, counters added in it)
    windows: Mapping[str, tuple[float, Mapping[str, float]]]
    queue_population: int = 0
    queue_capacity: int = 0
    backpressure: bool = False     # its output is held up (pendingEmits not empty)
    pending: int = 0               # spouts: tuple trees waiting for the acker
    active: bool = True            # spouts: activated
    # gauges of a kind of component, e.g. the checkpoint spout's last commit (executor/checkpoint/):
    # name -> a number or None; on the wire only when there are some (a 12th element)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def window(self, name: str) -> tuple[float, Mapping[str, float]]:
        return self.windows.get(name, (0.0, {}))


def to_wire(rec: ExecutorStats) -> list:
    keys = sorted({k for _secs, counters in rec.windows.values() for k in counters})
    wins = []
    for name in WINDOW_NAMES:
        secs, counters = rec.windows.get(name, (0.0, {}))
        wins.append([round(float(secs), 1), [_num(counters.get(k, 0)) for k in keys]])
    out = [WIRE_VERSION, rec.component, rec.kind, int(rec.uptime_secs), int(rec.queue_population),
           int(rec.queue_capacity), bool(rec.backpressure), int(rec.pending), bool(rec.active), keys, wins]
    if rec.extra:
        out.append({str(k): v for k, v in rec.extra.items()})
    return out


def _num(v: float) -> float | int:
    if isinstance(v, int):
        return v
    return int(v) if float(v).is_integer() else round(v, 3)


def from_wire(value: Any) -> ExecutorStats:
    """The record from its wire form; StatsDecodeError naming what is wrong otherwise."""
    if not isinstance(value, (list, tuple)) or len(value) not in (11, 12):
        raise StatsDecodeError(f"not a stats record: {_short(value)}")
    version, component, kind, uptime, qpop, qcap, bp, pending, active, keys, wins = value[:11]
    extra = value[11] if len(value) == 12 else {}
    if version != WIRE_VERSION:
        raise StatsDecodeError(f"stats record version {version!r}, expected {WIRE_VERSION}")
    if not isinstance(component, str) or kind not in KINDS:
        raise StatsDecodeError(f"stats record with component {_short(component)} kind {_short(kind)}")
    for name, v in (("uptime", uptime), ("queue population", qpop), ("queue capacity", qcap),
                    ("pending", pending)):
        if not _is_int(v) or v < 0:
            raise StatsDecodeError(f"stats record of {component!r}: {name} {_short(v)}")
    if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
        raise StatsDecodeError(f"stats record of {component!r}: bad counter names")
    if not isinstance(wins, (list, tuple)) or len(wins) != len(WINDOW_NAMES):
        raise StatsDecodeError(f"stats record of {component!r}: expected {len(WINDOW_NAMES)} windows")
    windows = {}
    for name, w in zip(WINDOW_NAMES, wins):
        if not isinstance(w, (list, tuple)) or len(w) != 2:
            raise StatsDecodeError(f"stats record of {component!r}: window {name} malformed")
        secs, values = w
        if not _is_num(secs) or secs < 0 or not isinstance(values, (list, tuple)) or len(values) != len(keys) \
                or not all(_is_num(v) for v in values):
            raise StatsDecodeError(f"stats record of {component!r}: window {name} malformed")
        windows[name] = (float(secs), {k: v for k, v in zip(keys, values) if v})
    if not isinstance(extra, Mapping) or not all(
            isinstance(k, str) and (v is None or _is_num(v)) for k, v in extra.items()):
        raise StatsDecodeError(f"stats record of {component!r}: bad gauges {_short(extra)}")
    return ExecutorStats(component, kind, uptime, windows, qpop, qcap, bool(bp), pending, bool(active), dict(extra))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def decode_records(owner: str, wire: Mapping[Any, Any]) -> dict[tuple[int, int], ExecutorStats]:
    """Records of the executors whose heartbeat carried one; a garbage or truncated record (or
    one from another version) is left out with a warning naming the executor and `owner`."""
    out = {}
    for ex, value in wire.items():
        if value is None:
            continue
        try:
            out[tuple(ex)] = from_wire(value)
        except StatsDecodeError as exc:
            log.warning("%s: stats of executor %s ignored: %s", owner, tuple(ex), exc)
    return out
