"""`storm-py monitor NAME`: Storm's live throughput monitor, one line per interval.

As Storm's `Monitor`: every interval it reads the all-time emitted (or transferred) count of one
stream summed over a component's executors, and prints the difference and the throughput in
thousands of tuples a second. Without `-m` it watches every spout. When the topology is stuck,
the reasons (daemons/reports/views.py `diagnosis`) are printed as `# ...` lines whenever they change.
"""

from __future__ import annotations

import time

import click

from daemons.answers.details import TopologyDetails
from daemons.cli_admin import NimbusSession
from daemons.cli_options import command, common_options
from daemons.reports.formats import per_second

HEADER = "topology\tcomponent\tparallelism\tstream\ttime-diff ms\t{watch}\tthroughput (Kt/s)"


def monitor_line(topology: str, component: str, parallelism: int, stream: str, diff_ms: int, count_diff: int) -> str:
    """One of Storm's monitor lines (throughput: thousands of tuples a second)."""
    throughput = per_second(count_diff, diff_ms / 1000) / 1000
    return f"{topology}\t{component}\t{parallelism}\t{stream}\t{diff_ms}\t{count_diff}\t{throughput:.3f}"


def watched_components(details: TopologyDetails, component: str | None) -> list[str]:
    """The component asked for (checked), or every spout."""
    known = [c.id for c in details.components]
    if component is None:
        return [c.id for c in details.components if c.kind == "spout"]
    if component not in known:
        raise click.ClickException(f"topology {details.name} has no component {component!r} "
                                   f"(components: {', '.join(known)})")
    return [component]


@command()
@click.argument("name")
@click.option("-i", "--interval", type=click.FloatRange(min=1.0), default=4.0, show_default=True,
              help="Seconds between lines.")
@click.option("-m", "--component", default=None, help="Component to watch (default: every spout).")
@click.option("-s", "--stream", default="default", show_default=True, help="Stream to watch.")
@click.option("-w", "--watch", type=click.Choice(["emitted", "transferred"]), default="emitted",
              show_default=True, help="Which count to watch.")
@click.option("-n", "--count", type=click.IntRange(min=1), default=None,
              help="Stop after this many lines (default: until Ctrl-C).")
@common_options
def monitor(name, interval, component, stream, watch, count, conf):
    """Print a topology's throughput every interval, as Storm's `storm monitor` does."""
    from daemons.reports.views import monitor_reading

    with NimbusSession(conf) as nimbus:
        details = TopologyDetails.from_wire(nimbus.call("topology_details", name=name))
        comps = watched_components(details, component)
        if not comps:
            raise click.ClickException(f"topology {name} has no spout; name a component with -m")
        label = ",".join(comps)
        parallelism = sum(1 for e in details.executors if e.component in comps)
        click.echo(HEADER.format(watch=watch))
        last_count, last_at = monitor_reading(details, comps, stream, watch)[0], time.monotonic()
        said: list[str] = []
        printed = 0
        while count is None or printed < count:
            time.sleep(max(0.0, last_at + interval - time.monotonic()))
            details = TopologyDetails.from_wire(nimbus.call("topology_details", name=name))
            now, (total, reasons) = time.monotonic(), monitor_reading(details, comps, stream, watch)
            if reasons != said:
                for reason in reasons:
                    click.echo(f"# {reason}")
                said = reasons
            click.echo(monitor_line(name, label, parallelism, stream, int((now - last_at) * 1000),
                                    total - last_count))
            last_count, last_at = total, now
            printed += 1
