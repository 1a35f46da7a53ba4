"""A windowed bolt's settings: `Count` and `Duration`, the component-configuration keys they are
kept in (Storm's names, as BaseWindowedBolt.java keeps them), and the checks Storm's
WindowedBoltExecutor.validate makes, as pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from executor.errors import InvalidTopologyError

LENGTH_COUNT_KEY = "topology.bolts.window.length.count"
LENGTH_DURATION_KEY = "topology.bolts.window.length.duration.ms"
SLIDING_COUNT_KEY = "topology.bolts.sliding.interval.count"
SLIDING_DURATION_KEY = "topology.bolts.sliding.interval.duration.ms"
TIMESTAMP_FIELD_KEY = "topology.bolts.tuple.timestamp.field.name"
LAG_KEY = "topology.bolts.tuple.timestamp.max.lag.ms"
WATERMARK_INTERVAL_KEY = "topology.bolts.watermark.event.interval.ms"
LATE_STREAM_KEY = "topology.bolts.late.tuple.stream"
MAX_EVENTS_KEY = "topology.bolts.window.max.events.in.memory"
UNBOUNDED_EVENTS = 1 << 62  # with_persistence without a bound: every tuple stays in memory too
WINDOW_KEYS = (LENGTH_COUNT_KEY, LENGTH_DURATION_KEY, SLIDING_COUNT_KEY, SLIDING_DURATION_KEY, TIMESTAMP_FIELD_KEY,
               LAG_KEY, WATERMARK_INTERVAL_KEY, LATE_STREAM_KEY, MAX_EVENTS_KEY)

DEFAULT_WATERMARK_INTERVAL_MS = 1000
LATE_TUPLE_FIELD = "late_tuple"  # Storm's field name on the late tuple stream


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Count:
    """A number of tuples."""

    n: int

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise InvalidTopologyError(f"Count takes an int >= 1, got {self.n!r}")


@dataclass(frozen=True)
class Duration:
    """A time span in seconds (float)."""

    seconds: float

    def __post_init__(self):
        if not _number(self.seconds) or self.seconds < 0:
            raise InvalidTopologyError(f"Duration takes a finite number of seconds >= 0, got {self.seconds!r}")

    @classmethod
    def of_millis(cls, ms: float) -> "Duration":
        return cls(ms / 1000.0)

    @property
    def millis(self) -> float:
        return self.seconds * 1000.0


@dataclass(frozen=True)
class WindowSpec:
    """A windowed bolt's settings, checked. Lengths and intervals are counts (int) or ms (float)."""

    length_count: int | None
    length_ms: float | None
    sliding_count: int | None
    sliding_ms: float | None
    timestamp_field: str | None = None
    lag_ms: float = 0.0
    watermark_interval_ms: float = DEFAULT_WATERMARK_INTERVAL_MS
    late_stream: str | None = None
    max_events_in_memory: int | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None


def is_window_conf(conf: Mapping[str, Any]) -> bool:
    return conf.get(LENGTH_COUNT_KEY) is not None or conf.get(LENGTH_DURATION_KEY) is not None


def fires_within_secs(conf: Mapping[str, Any]) -> float:
    """How long a tuple of a processing-time duration window waits at most before a window that
    holds it fires (its slide, a tumbling window's length); 0 for a count or event-time window,
    which time alone never fires."""
    if conf.get(TIMESTAMP_FIELD_KEY) or conf.get(LENGTH_DURATION_KEY) is None:
        return 0.0
    slide = conf.get(SLIDING_DURATION_KEY)
    return float(slide if slide is not None else conf[LENGTH_DURATION_KEY]) / 1000.0


def window_spec(component: str, conf: Mapping[str, Any]) -> WindowSpec:
    """The settings of windowed bolt `component` from its conf; InvalidTopologyError naming the
    component and the key otherwise."""
    def bad(key: str, what: str) -> InvalidTopologyError:
        return InvalidTopologyError(f"windowed bolt {component!r}: {key} {what}")

    def count(key):
        v = conf.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(key, f"must be an int >= 1, got {v!r}")
        return v

    def millis(key, allow_zero=False):
        v = conf.get(key)
        if v is None:
            return None
        if not _number(v) or v < 0 or (v == 0 and not allow_zero):
            raise bad(key, f"must be a finite number of milliseconds {'>= 0' if allow_zero else '> 0'}, got {v!r}")
        return float(v)

    length_count, length_ms = count(LENGTH_COUNT_KEY), millis(LENGTH_DURATION_KEY)
    sliding_count, sliding_ms = count(SLIDING_COUNT_KEY), millis(SLIDING_DURATION_KEY)
    if length_count is None and length_ms is None:
        raise bad(LENGTH_COUNT_KEY, f"(or {LENGTH_DURATION_KEY}) is not set: the window has no length")
    if length_count is not None and length_ms is not None:
        raise bad(LENGTH_COUNT_KEY, f"and {LENGTH_DURATION_KEY} are both set: a window is a count or a duration")
    if sliding_count is not None and sliding_ms is not None:
        raise bad(SLIDING_COUNT_KEY, f"and {SLIDING_DURATION_KEY} are both set: slide by a count or a duration")
    if sliding_count is None and sliding_ms is None:  # tumbling
        sliding_count, sliding_ms = length_count, length_ms
    field = conf.get(TIMESTAMP_FIELD_KEY)
    if field is not None and (not isinstance(field, str) or not field):
        raise bad(TIMESTAMP_FIELD_KEY, f"must be a field name, got {field!r}")
    lag = millis(LAG_KEY, allow_zero=True)
    interval = millis(WATERMARK_INTERVAL_KEY)
    late = conf.get(LATE_STREAM_KEY)
    if late is not None and (not isinstance(late, str) or not late):
        raise bad(LATE_STREAM_KEY, f"must be a stream id, got {late!r}")
    if field is None:
        for key, v in ((LAG_KEY, lag), (LATE_STREAM_KEY, late)):
            if v is not None:
                raise bad(key, f"is set but {TIMESTAMP_FIELD_KEY} is not: lag and late tuples are event time's "
                               f"(with_timestamp_field)")
    if lag is not None and length_ms is not None and lag > length_ms:
        raise bad(LAG_KEY, f"({lag:g} ms) is longer than the window ({length_ms:g} ms, {LENGTH_DURATION_KEY})")
    return WindowSpec(length_count, length_ms, sliding_count, sliding_ms, field, lag or 0.0,
                      interval or DEFAULT_WATERMARK_INTERVAL_MS, late, count(MAX_EVENTS_KEY))


def check_against_topology(component: str, spec: WindowSpec, conf: Mapping[str, Any]) -> None:
    """Storm's WindowedBoltExecutor.validate: a window's tuples are acked only when they leave it,
    so its span must fit in the message timeout, and a count window in max spout pending."""
    # As Storm: a tumbling window counts twice (its length is also its sliding interval).
    span = (spec.length_ms or 0.0) + (spec.sliding_ms or 0.0)
    if span and conf.get("topology.enable.message.timeouts", True):
        timeout_ms = float(conf.get("topology.message.timeout.secs", 30)) * 1000.0
        if span >= timeout_ms:
            raise InvalidTopologyError(
                f"windowed bolt {component!r}: window length plus sliding interval ({span:g} ms) is not below "
                f"topology.message.timeout.secs ({timeout_ms / 1000:g} s): its tuples would time out before they "
                f"leave the window; raise the timeout or shorten the window")
    pending = conf.get("topology.max.spout.pending")
    n = (spec.length_count or 0) + (spec.sliding_count or 0)
    if pending and n > int(pending):
        raise InvalidTopologyError(
            f"windowed bolt {component!r}: a count window of {n} tuples (length plus sliding interval) is larger "
            f"than topology.max.spout.pending ({pending}): the spouts would stop before a window fills")


def tick_secs(spec: WindowSpec) -> float | None:
    """How often the executor must wake the window: every watermark interval in event time, every
    sliding interval for a processing-time duration slide; a count slide needs none."""
    if spec.event_time:
        return spec.watermark_interval_ms / 1000.0
    if spec.sliding_ms is not None:
        return spec.sliding_ms / 1000.0
    return None
