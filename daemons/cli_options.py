"""Options every storm-py command takes: --conf-dir, repeated -c key=value, --log-level.

Logging is configured here (for the CLI) and nowhere else.
"""

from __future__ import annotations

import functools
import logging
import sys

import click

from cluster_state.config import ConfigError, parse_overrides, read_storm_config


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s",
                        stream=sys.stderr)


def common_options(fn):
    """Adds --conf-dir, -c and --log-level; the command receives the merged `conf`."""

    @click.option("--conf-dir", envvar="STORM_CONF_DIR", type=click.Path(file_okay=False),
                  help="Directory holding storm.yaml (default: $STORM_CONF_DIR).")
    @click.option("-c", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Override a config key (repeatable); the value is read as YAML.")
    @click.option("--log-level", default="WARNING", show_default=True,
                  type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
    @functools.wraps(fn)
    def wrapper(conf_dir, overrides, log_level, **kwargs):
        setup_logging(log_level)
        try:
            conf = read_storm_config(conf_dir, parse_overrides(overrides))
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        return fn(conf=conf, **kwargs)

    return wrapper
