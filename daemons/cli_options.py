"""What every storm-py command shares: --conf-dir, repeated -c key=value, --log-level, -h, and
one place that turns a failing command into one `error:` line.

Logging is configured here (for the CLI) and nowhere else.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from typing import Any, Mapping

import click

from cluster_state.config import (
    ConfigError,
    load_storm_config,
    parse_overrides,
    set_warning_printer,
    validate_config,
)

log = logging.getLogger(__name__)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
_LOG_LEVEL_KEY = "storm_py.log_level"  # the --log-level a user gave explicitly (None: the default)
_LOADED_KEY = "storm_py.loaded"  # the command's LoadedConfig (which storm.yaml it read)


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s",
                        stream=sys.stderr)
    # Warnings about the user's config are for the user: one line, no timestamp.
    set_warning_printer(lambda text: click.echo(f"warning: {text}", err=True))


def fail(message: str, code: int = 1) -> None:
    """Print one `error:` line on stderr and end the command with `code`."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


class StormCommand(click.Command):
    """A storm-py command: `-h` is its own, whatever group runs it. click builds a command's help
    option once, from the context of its first run, and keeps it: a command first run under
    another group (a test's, a plugin's) would otherwise answer `storm-py CMD -h` with "no such
    option" for the rest of the process."""

    def __init__(self, *args, context_settings: Mapping[str, Any] | None = None, **kwargs):
        super().__init__(*args, context_settings={**CONTEXT_SETTINGS, **(context_settings or {})},
                         **kwargs)


class StormSubgroup(StormCommand, click.Group):
    """A storm-py command group (jar, sink, secure): its commands and subgroups are storm-py's too."""

    command_class = StormCommand
    group_class = type  # subgroups of a StormSubgroup are StormSubgroups


def command(name: str | None = None, **kwargs: Any):
    """`click.command` for storm-py: a StormCommand."""
    return click.command(name, cls=StormCommand, **kwargs)


def group(name: str | None = None, **kwargs: Any):
    """`click.group` for storm-py: a StormSubgroup."""
    return click.group(name, cls=StormSubgroup, **kwargs)


class StormGroup(StormSubgroup):
    """The root group: every ClickException or UsageError, from any command or subgroup, becomes
    one lower-case `error:` line (click's own `Error:` block is never printed)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        prog_name = prog_name or "storm-py"  # not "python -m daemons.cli"
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else (prog_name or self.name)
            text = _lower_first(exc.format_message()).rstrip(".")
            fail(f"{where}: {text} (see '{where} -h')", exc.exit_code)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            fail("interrupted", 130)
        except Exception as exc:  # a bug of ours: still one line, the traceback in the debug log
            log.debug("unexpected error", exc_info=True)
            fail(f"unexpected {type(exc).__name__}: {exc} (run with --log-level DEBUG for details)")
        code = rv if isinstance(rv, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def topology_conf(own: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None, source: str) -> dict:
    """A topology's conf as submitted: its own config (validated, errors naming `source`) with
    the -c overrides on top, as Storm's submitter merges command-line options over it."""
    own = dict(own or {})
    validate_config(own, source)
    return {**own, **(overrides or {})}


def explicit_log_level() -> str | None:
    """The --log-level the user gave (DEBUG, INFO, ...), or None when they left the default."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_LOG_LEVEL_KEY) if ctx is not None else None


def loaded_config():
    """The running command's LoadedConfig (common_options), or None outside a command."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_LOADED_KEY) if ctx is not None else None


def common_options(fn):
    """Adds --conf-dir, -c and --log-level; the command receives the merged `conf`, and also
    `overrides` (the -c values alone) and/or `loaded` (a LoadedConfig) if it declares them."""
    wanted = inspect.signature(fn).parameters

    # $STORM_CONF_DIR is read by the loader, not by click, so errors can say it came from there.
    @click.option("--conf-dir", type=click.Path(file_okay=False),
                  help="Directory holding storm.yaml (default: $STORM_CONF_DIR).")
    @click.option("-c", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Override a config key (repeatable); the value is read as YAML. Wins over "
                       "storm.yaml and a topology's own config.")
    @click.option("--log-level", default="WARNING", show_default=True,
                  type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
    @functools.wraps(fn)
    def wrapper(conf_dir, overrides, log_level, **kwargs):
        setup_logging(log_level)
        ctx = click.get_current_context()
        given = ctx.get_parameter_source("log_level") is not click.core.ParameterSource.DEFAULT
        ctx.meta[_LOG_LEVEL_KEY] = log_level.upper() if given else None
        try:
            loaded = load_storm_config(conf_dir, parse_overrides(overrides))
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        ctx.meta[_LOADED_KEY] = loaded
        if "overrides" in wanted:
            kwargs["overrides"] = dict(loaded.overrides)
        if "loaded" in wanted:
            kwargs["loaded"] = loaded
        return fn(conf=loaded.conf, **kwargs)

    return wrapper
