"""The storm-py command line (logging is configured by daemons.cli_options, for the CLI only)."""

from __future__ import annotations

import logging
import sys
import time

import click

from cluster_state.config import ConfigError, merge_configs
from daemons.cli_options import common_options
from executor.errors import AlreadyAliveError, InvalidTopologyError

log = logging.getLogger(__name__)


@click.group()
@click.version_option(package_name="storm-py")
def main() -> None:
    """storm-py: Apache Storm's classic architecture in Python."""


def _spout_totals(stats: dict, spouts: set[str]) -> tuple[int, int, int, int]:
    e = a = f = p = 0
    for comp in spouts:
        s = stats.get(comp, {})
        e += s.get("emitted", 0)
        a += s.get("acked", 0)
        f += s.get("failed", 0)
        p += s.get("pending", 0)
    return e, a, f, p


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--duration", type=float, default=None, help="Seconds to run (default: until Ctrl-C).")
@click.option("--name", default=None, help="Topology name (default: the file's directory name).")
@common_options
def local(file, duration, name, conf):
    """Run a topology file in an in-process LocalCluster."""
    from daemons.local import LocalCluster
    from daemons.topology_file import load_topology_file

    try:
        tf = load_topology_file(file)
        topo_conf = merge_configs(tf.config, source=f"{file} config")
    except (InvalidTopologyError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    name = name or tf.path.parent.name.replace(".", "-") or "topology"
    spouts = set(tf.topology.spouts)
    start = time.monotonic()
    interrupted = False
    with LocalCluster(conf) as cluster:
        try:
            cluster.submit_topology(name, topo_conf, tf.topology)
        except (InvalidTopologyError, AlreadyAliveError, ConfigError) as exc:
            raise click.ClickException(str(exc)) from None
        last = (0, 0, 0)
        last_t = start
        try:
            while duration is None or time.monotonic() - start < duration:
                time.sleep(min(1.0, max(0.05, (duration or 1.0) - (time.monotonic() - start))))
                if cluster.died(name):
                    break
                now = time.monotonic()
                e, a, f, p = _spout_totals(cluster.component_stats(name), spouts)
                dt = max(1e-6, now - last_t)
                click.echo(f"[{now - start:6.1f}s] emitted {(e - last[0]) / dt:9.0f}/s  "
                           f"acked {(a - last[1]) / dt:9.0f}/s  failed {(f - last[2]) / dt:7.0f}/s  "
                           f"pending {p}")
                last, last_t = (e, a, f), now
        except KeyboardInterrupt:
            interrupted = True
            click.echo("interrupted: shutting down", err=True)
        stats = cluster.component_stats(name)
        died = cluster.died(name)
        errors = cluster.errors(name)
        elapsed = time.monotonic() - start
        cluster.kill_topology(name)
    e, a, f, _ = _spout_totals(stats, spouts)
    click.echo(f"summary: {name} ran {elapsed:.1f}s: spouts emitted {e}, acked {a}, failed {f} "
               f"({a / max(elapsed, 1e-6):.0f} acked/s)")
    for comp in sorted(stats):
        s = stats[comp]
        click.echo(f"  {comp:<20} emitted {s.get('emitted', 0):>10}  executed {s.get('executed', 0):>10}  "
                   f"acked {s.get('acked', 0):>10}  failed {s.get('failed', 0):>8}")
    for err in errors[-5:]:
        click.echo(f"  error in {err.component_id} task {err.task_id}: {err.error}", err=True)
    if died:
        d = died[0]
        click.echo(f"error: component {d.component_id!r} task {d.task_id} died in {d.where}: "
                   f"{type(d.original).__name__}: {d.original}\n{d.trace}", err=True)
        sys.exit(1)
    if interrupted:
        return


from daemons.cli_sink import sink  # noqa: E402

main.add_command(sink)


if __name__ == "__main__":
    main()
