"""The storm-py command line (entry point `daemons.cli:main`).

Each command group lives in its own module (cli_local, cli_sink, cli_jar, cli_admin,
cli_daemons); this one holds the root
group, whose StormGroup turns every failure into one `error:` line, and the small commands.
"""

from __future__ import annotations

import logging

import click
import yaml

from daemons.cli_options import StormGroup, common_options

log = logging.getLogger(__name__)


@click.group(cls=StormGroup)
@click.version_option(package_name="storm-py")
def main() -> None:
    """storm-py: Apache Storm's classic architecture in Python."""


@main.command()
def version() -> None:
    """Print the storm-py version and which per-tuple core runs (compiled or pure Python)."""
    from executor.core import describe
    from executor.package import storm_py_version

    click.echo(f"storm-py {storm_py_version()}")
    click.echo(f"core: {describe()}")


def format_value(value) -> str:
    """A config value as YAML flow text (what storm.yaml or -c would take)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text


@main.command()
@click.argument("key")
@common_options
def localconfvalue(key, conf, loaded):
    """Print KEY's effective value in this machine's config and where it came from."""
    if key not in conf:
        raise click.ClickException(f"config key {key!r} is not set (not in the packaged defaults, "
                                   f"storm.yaml or -c)")
    click.echo(f"{key}: {format_value(conf[key])}")
    click.echo(f"  (from {loaded.source_of(key)})")


from daemons.cli_admin import activate, deactivate, kill, list_, rebalance  # noqa: E402
from daemons.cli_daemons import logviewer, nimbus, supervisor, ui  # noqa: E402
from daemons.cli_dev import dev_cluster, dev_zookeeper  # noqa: E402
from daemons.cli_jar import jar  # noqa: E402
from daemons.cli_local import local  # noqa: E402
from daemons.cli_loglevel import set_log_level  # noqa: E402
from daemons.cli_monitor import monitor  # noqa: E402
from daemons.cli_savepoint import savepoint, savepoints, swap  # noqa: E402
from daemons.cli_secure import secure  # noqa: E402
from daemons.cli_sink import sink  # noqa: E402
from daemons.cli_spark import spark_connect  # noqa: E402

for _command in (local, sink, jar, list_, kill, activate, deactivate, rebalance, nimbus, supervisor,
                 dev_zookeeper, dev_cluster, ui, monitor, set_log_level, logviewer, secure, spark_connect,
                 savepoint, savepoints, swap):
    main.add_command(_command)


if __name__ == "__main__":
    main()
