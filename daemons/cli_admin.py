"""Client commands that talk to Nimbus: list, kill, activate, deactivate, rebalance."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import click

from cluster_state.config import ConfigError
from daemons.answers.cluster import ClusterInfo, NimbusRow, TopologyProblem
from daemons.cli_options import command, common_options


class NimbusSession:
    """A Nimbus client for one command; every failure becomes one `error:` line naming it (an
    unreachable Nimbus with the conf used and where a dev cluster's is: conf_hint). A refused
    connection fails at once rather than after nimbus.thrift.timeout."""

    def __init__(self, conf):
        from daemons.rpc.client import client_from_conf

        try:
            self._client = client_from_conf(conf, refused_is_final=True)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None

    def call(self, op: str, **args):
        from daemons.rpc.protocol import REMOTE_ERRORS, UnreachableError

        try:
            return self._client.call(op, **args)
        except UnreachableError as exc:
            raise click.ClickException(f"{exc}; {_conf_hint_now()}") from None
        except REMOTE_ERRORS as exc:
            raise click.ClickException(str(exc)) from None

    @property
    def timeout_secs(self) -> float:
        return self._client.timeout_secs

    def __enter__(self) -> "NimbusSession":
        return self

    def __exit__(self, *exc) -> None:
        self._client.close()


def conf_hint(loaded, env_dir: str | None, dev_clusters: list[tuple[Path, bool]]) -> str:
    """What to tell a user whose command cannot reach Nimbus: the conf it used (`loaded`, the
    command's LoadedConfig: its storm.yaml or the packaged defaults), how to name another
    (--conf-dir, $STORM_CONF_DIR), and a dev cluster's conf dir if there is one
    (devcluster.find_dev_clusters: (conf dir, runs now), running ones first)."""
    if loaded is None:  # not within a command
        return "check --conf-dir / $STORM_CONF_DIR"
    used = loaded.storm_yaml.parent.resolve() if loaded.storm_yaml is not None else None
    if used is None:
        why = f"$STORM_CONF_DIR={env_dir} has none" if env_dir else "no --conf-dir, $STORM_CONF_DIR unset"
        text = f"conf: no storm.yaml found ({why}), packaged defaults"
    else:
        text = f"conf: {loaded.storm_yaml_source}"
    running = [c for c, runs in dev_clusters if runs and c != used]
    stopped = [c for c, runs in dev_clusters if not runs]
    if running:
        return text + (f"; a dev cluster runs with conf dir {running[0]}: add --conf-dir {running[0]} "
                       f"(or export STORM_CONF_DIR={running[0]})")
    if used is not None and used in stopped:
        return text + f"; that dev cluster is not running (storm-py dev-cluster --dir {used.parent} starts it)"
    if used is None and stopped:
        return text + (f"; no dev cluster runs (the latest one's conf dir, {stopped[0]}, is used with "
                       f"--conf-dir {stopped[0]} once `storm-py dev-cluster --dir {stopped[0].parent}` runs)")
    if used is None:
        return text + "; name the cluster's conf dir (holding its storm.yaml) with --conf-dir DIR or $STORM_CONF_DIR"
    return text + " (--conf-dir DIR or $STORM_CONF_DIR names another)"


def _conf_hint_now() -> str:
    import os
    import tempfile

    from cluster_state.config import CONF_DIR_ENV
    from daemons.cli_options import loaded_config
    from daemons.devcluster import find_dev_clusters

    try:  # (the working directory may be gone)
        clusters = find_dev_clusters(Path(tempfile.gettempdir()), Path.cwd())
    except OSError:
        clusters = []
    return conf_hint(loaded_config(), os.environ.get(CONF_DIR_ENV) or None, clusters)


def call(conf, op: str, **args):
    with NimbusSession(conf) as nimbus:
        return nimbus.call(op, **args)


def _uptime(secs: int) -> str:
    secs = max(0, int(secs))
    d, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{d}d" if d else "") + (f"{h}h" if d or h else "") + f"{m}m{s}s"


def nimbus_lines(nimbuses: Sequence[NimbusRow]) -> list[str]:
    """`nimbus 127.0.0.2:6627 Leader` per Nimbus, only when more than one is registered."""
    if len(nimbuses) < 2:
        return []
    return [f"nimbus {n.host}:{n.port} {n.status}" for n in nimbuses]


@command("list")
@common_options
def list_(conf):
    """One row per topology: name, id, status, tasks, live workers, uptime, worker restarts in
    the last 5 minutes and the last error (where and when); first, with several Nimbus daemons,
    one line per Nimbus: Leader or Not a Leader; last, a line per topology whose checkpoints
    stopped committing, saying why, one per topology stopped for a swap in progress and one per
    topology started from a savepoint."""
    info = ClusterInfo.from_wire(call(conf, "cluster_info"))
    for line in nimbus_lines(info.nimbuses or ()):
        click.echo(line)
    tops = info.topologies
    if not tops:
        click.echo("No topologies running.")
        return
    now = info.now_secs or time.time()
    rows = [("NAME", "ID", "STATUS", "TASKS", "WORKERS", "UPTIME", "RESTARTS(5m)", "LAST ERROR")]
    rows += [(t.name, t.id, t.status.upper(), str(t.num_tasks),
              str(t.num_workers if t.live_workers is None else t.live_workers), _uptime(t.uptime_secs),
              str(t.recent_restarts), _last_error(t.last_error, now)) for t in tops]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    for t in tops:
        if t.checkpoint_stall:
            click.echo(t.checkpoint_stall)
    for t in tops:
        if t.note:
            click.echo(f"{t.name}: {t.note}")
        if t.savepoint:
            click.echo(f"{t.name}: started from savepoint {t.savepoint} (storm-py savepoints {t.name})")


# A problem older than this is history (the UI keeps it): the list shows what is wrong now.
LAST_ERROR_SECS = 600


def _last_error(problem: TopologyProblem | None, now: float) -> str:
    """`COMPONENT@HOST:PORT 12s ago: the error` on one line, or "-"."""
    from daemons.nimbus.health import short

    if problem is None or now - problem.time_secs > LAST_ERROR_SECS:
        return "-"
    where = "@".join(x for x in (problem.component, problem.host) if x)
    if problem.port is not None:
        where += f":{problem.port}"
    age = f"{_uptime(now - problem.time_secs)} ago"
    return short(f"{where} {age}: {problem.error}" if where else f"{age}: {problem.error}")


def when(seconds: float, now: float | None = None) -> str:
    """'in 30s (at 14:05:09)': when a wait of `seconds` from `now` ends, in local time."""
    at = (time.time() if now is None else now) + seconds
    return f"in {seconds:.0f}s (at {time.strftime('%H:%M:%S', time.localtime(at))})"


def _wait_option(fn):
    return click.option("-w", "--wait", "wait_secs", type=float, default=None, callback=_check_wait,
                        help="Seconds to wait before acting (default: the topology's message timeout; "
                             "less than a week).")(fn)


def _check_wait(_ctx, _param, value: float | None) -> float | None:
    from daemons.nimbus.transitions import MAX_WAIT_SECS

    if value is not None and not (0 <= value < MAX_WAIT_SECS):  # nan fails both comparisons
        raise click.BadParameter(f"must be a number of seconds from 0 to less than {MAX_WAIT_SECS:g}, got {value:g}")
    return value


@command()
@click.argument("name")
@_wait_option
@common_options
def kill(name, wait_secs, conf):
    """Kill a topology: its spouts stop at once, it is removed after the wait."""
    answer = call(conf, "kill", name=name, wait_secs=wait_secs)
    left = answer.get("wait_secs") if isinstance(answer, dict) else None
    if left is None:  # a Nimbus that does not say
        click.echo(f"killed topology {name}" + ("" if wait_secs == 0 else " (removed after the wait)"))
    elif left <= 0:
        click.echo(f"killed topology {name}: removed now")
    else:
        click.echo(f"killed topology {name}: its spouts are stopped; it is removed {when(left)} "
                   f"(in-flight tuples finish meanwhile; -w 0 removes it at once)")


@command()
@click.argument("name")
@common_options
def activate(name, conf):
    """Activate a topology's spouts."""
    call(conf, "activate", name=name)
    click.echo(f"activated topology {name}")


@command()
@click.argument("name")
@common_options
def deactivate(name, conf):
    """Deactivate a topology's spouts."""
    call(conf, "deactivate", name=name)
    click.echo(f"deactivated topology {name}")


def _executors(items) -> dict[str, int]:
    out = {}
    for item in items:
        comp, sep, n = item.partition("=")
        if not sep or not comp or not n.strip().isdigit() or int(n) < 1:
            raise click.ClickException(f"-e {item!r}: expected COMPONENT=N with N >= 1")
        out[comp] = int(n)
    return out


@command()
@click.argument("name")
@_wait_option
@click.option("-n", "--num-workers", type=click.IntRange(min=1), default=None, help="New number of workers.")
@click.option("-e", "--executors", "executors", multiple=True, metavar="COMPONENT=N",
              help="New number of executors of a component (repeatable).")
@common_options
def rebalance(name, wait_secs, num_workers, executors, conf):
    """Redistribute a topology over the cluster, optionally with new worker/executor counts."""
    answer = call(conf, "rebalance", name=name, wait_secs=wait_secs, num_workers=num_workers,
                  executors=_executors(executors) or None)
    left = answer.get("wait_secs") if isinstance(answer, dict) else None
    if left is None or left <= 0:
        click.echo(f"rebalancing topology {name}" + ("" if left is None else " now"))
    else:
        click.echo(f"rebalancing topology {name}: its spouts are stopped; its workers are rescheduled "
                   f"{when(left)} (-w 0: at once)")
    for note in (answer or {}).get("notes", []) if isinstance(answer, dict) else []:
        click.echo(f"note: {note}")


COMMANDS = (list_, kill, activate, deactivate, rebalance)
