"""Storm's figures from executor stats (pure): counter names, and the one merge of executor
records (executor/stats_record.py) used by Nimbus, LocalCluster, the CLI and the UI. Counters
add up; latencies are sums over counts, so a merged average is weighted by its counts."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from executor.stats_windows import ALL_TIME
from executor.tuple import is_system_id

# ---------------------------------------------------------------- per-window figures (Storm's)
# A window's counters (executor/stats_windows.py) as Storm's UI figures, for one executor or
# merged over several. Counter names: "metric|key", key a stream (spouts' and everyone's output)
# or "component:stream" (a bolt's input).

EMITTED, TRANSFERRED, ACKED, FAILED, EXECUTED = "emitted", "transferred", "acked", "failed", "executed"
TIMEOUTS = "timeouts"  # spouts: fails that were timeouts (also counted in FAILED)
COMPLETE_MS, COMPLETE_N = "complete_ms_sum", "complete_count"
EXECUTE_MS, EXECUTE_N = "execute_ms_sum", "execute_count"
# Spouts: milliseconds next_tuple was not called, keyed by reason.
SKIPPED_MS = "skipped_ms"
SKIP_INACTIVE, SKIP_MAX_PENDING, SKIP_BACKPRESSURE = "inactive", "max_pending", "backpressure"
SKIP_REASONS = (SKIP_INACTIVE, SKIP_MAX_PENDING, SKIP_BACKPRESSURE)
# Spouts' gauges: the max pending an executor learned (executor/pending_bound.py), when it does.
PENDING_BOUND = "pending_bound"


def split_counter(name: str) -> tuple[str, str]:
    metric, _, key = name.partition("|")
    return metric, key


def add_counters(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Counters of several executors (or windows of one executor's restarts) added key by key."""
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def by_key(counters: Mapping[str, float], metric: str) -> dict[str, float]:
    """{key: value} of one metric."""
    out: dict[str, float] = {}
    for name, v in counters.items():
        m, key = split_counter(name)
        if m == metric:
            out[key] = out.get(key, 0) + v
    return out


def total(counters: Mapping[str, float], metric: str, keys: Callable[[str], bool] | None = None) -> float:
    return sum(v for k, v in by_key(counters, metric).items() if keys is None or keys(k))


def average_ms(counters: Mapping[str, float], sum_metric: str, count_metric: str,
               keys: Callable[[str], bool] | None = None) -> float:
    """A latency's average over the window: its summed milliseconds over its count (0.0 when
    nothing was measured, as Storm shows it)."""
    n = total(counters, count_metric, keys)
    return total(counters, sum_metric, keys) / n if n else 0.0


def capacity(counters: Mapping[str, float], window_secs: float) -> float:
    """Storm's bolt capacity: the fraction of the window the executor spent executing."""
    if window_secs <= 0:
        return 0.0
    return min(1.0, total(counters, EXECUTE_MS) / (window_secs * 1000.0))


def is_system_stream(key: str) -> bool:
    """Streams Storm hides unless sys=1: "__ack_init", "__tick", ... (a bolt's input key is
    component:stream)."""
    return is_system_id(key.rpartition(":")[2])


# ---------------------------------------------------------------- records -> Storm's figures
# One merge for Nimbus, LocalCluster, the CLI and the UI: executor records (executor/
# stats_record.py) of one component, one window, as the figures Storm's UI shows.

CAPACITY_WINDOW = "600"  # Storm computes a bolt's capacity over the last 10 minutes


def _keep(include_sys: bool) -> Callable[[str], bool] | None:
    return None if include_sys else (lambda k: not is_system_stream(k))


def component_figures(records: Iterable, window: str, include_sys: bool) -> dict:
    """Totals of one component's executors in one window (kind taken from the records)."""
    records = list(records)
    kind = records[0].kind if records else "bolt"
    counters = add_counters(rec.window(window)[1] for rec in records)
    keep = _keep(include_sys)
    fig: dict = {
        "kind": kind, "executors": len(records),
        EMITTED: int(total(counters, EMITTED, keep)), TRANSFERRED: int(total(counters, TRANSFERRED, keep)),
        ACKED: int(total(counters, ACKED, keep)), FAILED: int(total(counters, FAILED, keep)),
        "backpressure": any(rec.backpressure for rec in records),
        "queue_population": sum(rec.queue_population for rec in records),
        "queue_capacity": sum(rec.queue_capacity for rec in records),
    }
    if kind == "spout":
        fig["complete_latency_ms"] = average_ms(counters, COMPLETE_MS, COMPLETE_N, keep)
        fig[TIMEOUTS] = int(total(counters, TIMEOUTS, keep))
        fig["pending"] = sum(rec.pending for rec in records)
        fig["active"] = any(rec.active for rec in records)
        skipped = by_key(counters, SKIPPED_MS)
        fig["skipped_ms"] = {reason: skipped.get(reason, 0.0) for reason in SKIP_REASONS}
    else:
        fig[EXECUTED] = int(total(counters, EXECUTED, keep))
        fig["execute_latency_ms"] = average_ms(counters, EXECUTE_MS, EXECUTE_N, keep)
        # storm-py times a whole execute call, ack included: process latency is execute latency
        fig["process_latency_ms"] = fig["execute_latency_ms"]
        fig["capacity"] = max((executor_capacity(rec) for rec in records), default=0.0)
    return fig


def executor_capacity(rec) -> float:
    secs, counters = rec.window(CAPACITY_WINDOW)
    return capacity(counters, secs)


def output_streams(records: Iterable, window: str, include_sys: bool) -> dict[str, dict]:
    """Per output stream: emitted, transferred, and for spouts acked, failed, complete latency."""
    counters = add_counters(rec.window(window)[1] for rec in records)
    out: dict[str, dict] = {}
    for metric in (EMITTED, TRANSFERRED, ACKED, FAILED):
        for stream, v in by_key(counters, metric).items():
            if ":" in stream or (not include_sys and is_system_stream(stream)):
                continue  # a bolt's input key
            out.setdefault(stream, dict.fromkeys((EMITTED, TRANSFERRED, ACKED, FAILED), 0))[metric] = int(v)
    for stream, figs in out.items():
        figs["complete_latency_ms"] = average_ms(counters, COMPLETE_MS, COMPLETE_N, lambda k, s=stream: k == s)
    return out


def input_streams(records: Iterable, window: str, include_sys: bool) -> dict[tuple[str, str], dict]:
    """A bolt's figures per input (component, stream): executed, latencies, acked, failed."""
    counters = add_counters(rec.window(window)[1] for rec in records)
    out: dict[tuple[str, str], dict] = {}
    for metric in (EXECUTED, ACKED, FAILED):
        for key, v in by_key(counters, metric).items():
            comp, sep, stream = key.rpartition(":")
            if not sep or (not include_sys and is_system_stream(key)):
                continue
            out.setdefault((comp, stream), dict.fromkeys((EXECUTED, ACKED, FAILED), 0))[metric] = int(v)
    for (comp, stream), figs in out.items():
        lat = average_ms(counters, EXECUTE_MS, EXECUTE_N, lambda k, want=f"{comp}:{stream}": k == want)
        figs["execute_latency_ms"] = figs["process_latency_ms"] = lat
    return out


def component_totals(records: Iterable) -> dict:
    """All-time figures with system streams, as LocalCluster.component_stats gives them."""
    return component_figures(records, ALL_TIME, True)


def group_by_component(records: Iterable) -> dict[str, list]:
    out: dict[str, list] = {}
    for rec in records:
        out.setdefault(rec.component, []).append(rec)
    return out
