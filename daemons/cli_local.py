"""`storm-py local FILE`: run a topology file in an in-process LocalCluster.

The run ends after --duration, when a component dies, or on Ctrl-C / SIGTERM (both the same
way: the topology deactivated and drained, a summary, then kill_topology so components' cleanup
runs; a second signal cuts the drain short). It exits non-zero when a
component died or reported errors, printing each distinct error once.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time

import click

from cluster_state.config import ConfigError
from daemons.cli_options import command, common_options, topology_conf
from daemons.cli_report import error_lines
from executor.errors import AlreadyAliveError, InvalidTopologyError
from executor.gc_policy import apply_gc_thresholds
from executor.tuple import is_system_id

log = logging.getLogger(__name__)

STATUS_EVERY_SECS = 1.0


class Duration(click.ParamType):
    """Seconds to run: a finite number > 0."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            secs = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(secs) or secs <= 0:
            self.fail(f"{value!r} must be a finite number of seconds > 0", param, ctx)
        return secs


class _Interrupted(Exception):
    """Raised out of the run loop's sleep by a stop signal."""


class StopSignals:
    """SIGINT and SIGTERM request a stop. The handler only raises while `armed` (the run loop's
    sleep), so a signal can never tear through submit or shutdown half way."""

    def __init__(self):
        self.received: str | None = None
        self.count = 0
        self._armed = False
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        self.count += 1
        if self._armed:
            self._armed = False
            raise _Interrupted()

    def __enter__(self) -> "StopSignals":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @contextlib.contextmanager
    def armed(self):
        self._armed = True
        try:
            if self.received:
                raise _Interrupted()
            yield
        finally:
            self._armed = False


def _spout_totals(stats: dict, spouts: set[str]) -> tuple[int, int, int, int]:
    e = a = f = p = 0
    for comp in spouts:
        s = stats.get(comp, {})
        e += s.get("emitted", 0)
        a += s.get("acked", 0)
        f += s.get("failed", 0)
        p += s.get("pending", 0)
    return e, a, f, p


def next_status_time(previous: float, now: float) -> float:
    """The next status line is due one period after the last one; a late wake-up (a slow
    stats read) skips the missed lines instead of printing them in a burst."""
    due = previous + STATUS_EVERY_SECS
    return due if due > now else now + STATUS_EVERY_SECS


@command()
@click.argument("file", type=click.Path())
@click.option("--duration", type=Duration(), default=None,
              help="Seconds to run (a number > 0; default: until Ctrl-C or SIGTERM).")
@click.option("--name", default=None, help="Topology name (default: the file's directory name).")
@click.option("--ui-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Storm's REST API and /metrics for this run on 127.0.0.1:PORT (0: a free port).")
@common_options
def local(file, duration, name, ui_port, conf, overrides):
    """Run a topology file in an in-process LocalCluster."""
    from daemons.local import LocalCluster
    from executor.topology_file import default_name, load_topology_file

    try:
        tf = load_topology_file(file)
        topo_conf = topology_conf(tf.config, overrides, f"topology file {tf.path} config")
    except (InvalidTopologyError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    name = name or default_name(tf.path)
    spouts = {s for s in tf.topology.spouts if not is_system_id(s)}  # the user's (not the checkpoint spout)
    # The topology's workers run in this process: it gets their process-wide settings.
    apply_gc_thresholds({**conf, **topo_conf})
    with StopSignals() as stop, LocalCluster(conf) as cluster, _local_ui(cluster, ui_port):
        start = time.monotonic()
        try:
            cluster.submit_topology(name, topo_conf, tf.topology)
        except (InvalidTopologyError, AlreadyAliveError, ConfigError) as exc:
            raise click.ClickException(str(exc)) from None
        _run(cluster, name, spouts, start, duration, stop)
        if stop.received:
            click.echo(f"{'interrupted' if stop.received == 'SIGINT' else stop.received}: shutting down",
                       err=True)
        elapsed = time.monotonic() - start
        # The figures once what the spouts sent is done (acked; exactly once: committed, in the
        # table), so that the summary's acked is what the table holds; a second signal stops now.
        drained = bool(cluster.died(name)) or cluster.drain(name, _drain_secs(topo_conf), lambda: stop.count > 1)
        stats = cluster.component_stats(name, include_sys=False)  # the user's figures, as the UI's
        died, reported = cluster.died(name), cluster.errors(name)
        storm_id = cluster.storm_id(name)
        cluster.kill_topology(name)  # then stop: components' close/cleanup run
    _summary(f"{name} ({storm_id})", stats, spouts, elapsed)
    if not drained:
        click.echo(f"  the spouts' pending tuples were not done within {_drain_secs(topo_conf):g}s of the stop: "
                   f"they are not acked (nor in an exactly-once table)")
    lines = error_lines(died, reported, tf.path.parent)
    for line in lines:
        click.echo(f"error: {line}", err=True)
    if lines:
        raise SystemExit(1)


def _drain_secs(topo_conf) -> float:
    """How long the stop waits for what the spouts sent: their message timeout, at most 30 s."""
    return min(30.0, float(topo_conf.get("topology.message.timeout.secs") or 30))


@contextlib.contextmanager
def _local_ui(cluster, port: int | None):
    """The UI daemon over this run's in-process Nimbus, for the length of the run."""
    if port is None:
        yield None
        return
    from daemons.ui.daemon import UiBindError, UiServer

    server = UiServer(cluster.conf, nimbus=cluster.nimbus_calls(), nimbus_address=("local", 0),
                      host="127.0.0.1", port=port)
    try:
        server.start()
    except UiBindError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"ui  {server.url}")
    try:
        yield server
    finally:
        server.stop()


def _run(cluster, name: str, spouts: set[str], start: float, duration: float | None, stop: StopSignals) -> None:
    """Print a status line every second until the duration is up, a component died or a stop
    signal arrived."""
    end = None if duration is None else start + duration
    last, last_t = (0, 0, 0), start
    status_due = next_status_time(start, start)
    while True:
        now = time.monotonic()
        if stop.received or (end is not None and now >= end) or cluster.died(name):
            return
        wake = status_due if end is None else min(status_due, end)
        try:
            with stop.armed():
                time.sleep(max(0.0, wake - now))
        except _Interrupted:
            return
        now = time.monotonic()
        if now < status_due:
            continue
        e, a, f, p = _spout_totals(cluster.component_stats(name, include_sys=False), spouts)
        dt = max(1e-6, now - last_t)
        click.echo(f"[{now - start:6.1f}s] emitted {(e - last[0]) / dt:9.0f}/s  "
                   f"acked {(a - last[1]) / dt:9.0f}/s  failed {(f - last[2]) / dt:7.0f}/s  pending {p}")
        last, last_t = (e, a, f), now
        status_due = next_status_time(status_due, now)


def _summary(name: str, stats: dict, spouts: set[str], elapsed: float) -> None:
    e, a, f, _ = _spout_totals(stats, spouts)
    click.echo(f"summary: {name} ran {elapsed:.1f}s: spouts emitted {e}, acked {a}, failed {f} "
               f"({a / max(elapsed, 1e-6):.0f} acked/s)")
    for comp in sorted(stats):
        s = stats[comp]
        click.echo(f"  {comp:<20} emitted {s.get('emitted', 0):>10}  executed {s.get('executed', 0):>10}  "
                   f"acked {s.get('acked', 0):>10}  failed {s.get('failed', 0):>8}")

