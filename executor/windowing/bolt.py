"""The windowed bolts of the topology-author API (Storm's BaseWindowedBolt), exported from
executor.api. Settings chain (each returns the bolt) and are kept in the component
configuration under Storm's keys (executor/windowing/spec.py), so that Nimbus checks them at
submit without the bolt's code."""

from __future__ import annotations

from typing import Any

from executor.components import Component
from executor.errors import InvalidTopologyError
from executor.windowing import spec as S
from executor.windowing.spec import Count, Duration


def _length(method: str, value: Any) -> Count | Duration:
    if not isinstance(value, (Count, Duration)):
        raise InvalidTopologyError(f"{method}: takes Count(n) or Duration(seconds), got {value!r}")
    if isinstance(value, Duration) and value.seconds <= 0:
        raise InvalidTopologyError(f"{method}: a window duration must be > 0, got {value!r}")
    return value


class BaseWindowedBolt(Component):
    """A bolt whose execute gets windows of tuples (a TupleWindow) instead of single tuples.
    Its emits are anchored to every tuple of the window, and a tuple is acked when it leaves
    the window: do not ack them yourself."""

    def __init__(self):
        self._window_conf: dict[str, Any] = {}

    def _conf(self) -> dict[str, Any]:
        if not hasattr(self, "_window_conf"):  # a subclass __init__ that did not call ours
            self._window_conf = {}
        return self._window_conf

    def with_window(self, length: Count | Duration, sliding: Count | Duration | None = None) -> "BaseWindowedBolt":
        """A sliding window (tumbling when `sliding` is None)."""
        length = _length("with_window", length)
        sliding = length if sliding is None else _length("with_window (sliding)", sliding)
        conf = self._conf()
        for key in (S.LENGTH_COUNT_KEY, S.LENGTH_DURATION_KEY, S.SLIDING_COUNT_KEY, S.SLIDING_DURATION_KEY):
            conf.pop(key, None)
        if isinstance(length, Count):
            conf[S.LENGTH_COUNT_KEY] = length.n
        else:
            conf[S.LENGTH_DURATION_KEY] = length.millis
        if isinstance(sliding, Count):
            conf[S.SLIDING_COUNT_KEY] = sliding.n
        else:
            conf[S.SLIDING_DURATION_KEY] = sliding.millis
        return self

    def with_tumbling_window(self, length: Count | Duration) -> "BaseWindowedBolt":
        return self.with_window(length)

    def with_timestamp_field(self, name: str) -> "BaseWindowedBolt":
        """Event time: the window is by this field's value (ms since the epoch), not arrival."""
        if not isinstance(name, str) or not name:
            raise InvalidTopologyError(f"with_timestamp_field: takes a field name, got {name!r}")
        self._conf()[S.TIMESTAMP_FIELD_KEY] = name
        return self

    def with_lag(self, lag: Duration) -> "BaseWindowedBolt":
        """How far out of order tuples may arrive (event time)."""
        if not isinstance(lag, Duration):
            raise InvalidTopologyError(f"with_lag: takes a Duration, got {lag!r}")
        self._conf()[S.LAG_KEY] = lag.millis
        return self

    def with_watermark_interval(self, interval: Duration) -> "BaseWindowedBolt":
        if not isinstance(interval, Duration) or interval.seconds <= 0:
            raise InvalidTopologyError(f"with_watermark_interval: takes a Duration > 0, got {interval!r}")
        self._conf()[S.WATERMARK_INTERVAL_KEY] = interval.millis
        return self

    def with_late_tuple_stream(self, stream_id: str) -> "BaseWindowedBolt":
        """Late tuples are emitted on this stream (one field, `late_tuple`: the values) instead of
        only acked and counted; it is declared for you."""
        if not isinstance(stream_id, str) or not stream_id:
            raise InvalidTopologyError(f"with_late_tuple_stream: takes a stream id, got {stream_id!r}")
        self._conf()[S.LATE_STREAM_KEY] = stream_id
        return self

    def with_max_events_in_memory(self, n: int) -> "BaseWindowedBolt":
        """A BaseStatefulWindowedBolt's window persistent (Storm's withPersistence +
        withMaxEventsInMemory): its tuples are kept in the bolt's state, at most n of them in
        memory, and acked once a checkpoint holding them commits (executor/windowing/persistent.py)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidTopologyError(f"with_max_events_in_memory: takes an int >= 1, got {n!r}")
        self._conf()[S.MAX_EVENTS_KEY] = n
        return self

    def with_persistence(self) -> "BaseWindowedBolt":
        """A BaseStatefulWindowedBolt's window persistent (Storm's withPersistence), keeping every
        tuple in memory too unless with_max_events_in_memory bounds it."""
        self._conf().setdefault(S.MAX_EVENTS_KEY, S.UNBOUNDED_EVENTS)
        return self

    def get_component_configuration(self) -> dict[str, Any] | None:
        conf = dict(self._conf())
        if S.is_window_conf(conf):
            # The executor's ticks drive time triggers and watermarks.
            try:
                tick = S.tick_secs(S.window_spec(type(self).__name__, conf))
            except InvalidTopologyError:
                tick = None  # create_topology reports it with the component's id
            if tick:
                conf["topology.tick.tuple.freq.secs"] = tick
        return conf

    def declare_late_stream(self, declarer) -> None:
        late = self._conf().get(S.LATE_STREAM_KEY)
        if late:
            declarer.declare_stream(late, [S.LATE_TUPLE_FIELD])

    # ---- what the user writes ----
    def prepare(self, conf: dict, context, collector) -> None:
        pass

    def execute(self, window) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def cleanup(self) -> None:
        pass
