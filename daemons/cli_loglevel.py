"""`storm-py set_log_level`: change the log levels of a running topology's workers (Storm's
command of the same name; docs/operations.md, "Changing log levels of a running topology")."""

from __future__ import annotations

import click

from daemons.cli_admin import call
from daemons.cli_options import command, common_options
from executor.log_levels import STORM_LEVELS, UnknownLevelError, logger_key, storm_level

_SYNTAX = "LOGGER=LEVEL[:TIMEOUT_SECS]"


def parse_level(item: str) -> tuple[str, str, int]:
    """`-l LOGGER=LEVEL[:TIMEOUT_SECS]` -> (logger, Storm level name, timeout secs, 0: none);
    ClickException naming the argument."""
    logger, sep, rest = item.rpartition("=")  # a level never holds "=", a logger name might
    level, colon, timeout = rest.partition(":")
    if not sep or not logger.strip() or not level.strip():
        raise click.ClickException(f"-l {item!r}: expected {_SYNTAX}, e.g. -l ROOT=DEBUG:30")
    try:
        level = storm_level(level)
    except UnknownLevelError as exc:
        raise click.ClickException(f"-l {item!r}: {exc}") from None
    timeout = timeout.strip()
    if colon and not (timeout.isascii() and timeout.isdigit()):
        raise click.ClickException(f"-l {item!r}: the timeout must be whole seconds >= 0, got {timeout!r}")
    return logger_key(logger), level, int(timeout) if colon else 0


def requested(levels: tuple[str, ...], removals: tuple[str, ...]) -> dict[str, dict]:
    """The `named_logger_levels` argument of Nimbus's set_log_config."""
    if not levels and not removals:
        raise click.ClickException(f"nothing to change: give -l {_SYNTAX} or -r LOGGER (repeatable)")
    out: dict[str, dict] = {}
    for item in levels:
        logger, level, timeout = parse_level(item)
        if logger in out:
            raise click.ClickException(f"-l {item!r}: logger {logger} is given twice")
        out[logger] = {"target_level": level, "timeout": timeout}
    for item in removals:
        if not item.strip():
            raise click.ClickException("-r '': expected a logger name (ROOT for the root logger)")
        logger = logger_key(item)
        if logger in out:
            raise click.ClickException(f"-r {item!r}: logger {logger} is both set and removed")
        out[logger] = {"target_level": None, "timeout": 0}
    return out


def check_removals(name: str, removed: list[str], current: dict) -> None:
    """-r of a logger the topology has no level set for is an error naming it (nothing is changed)."""
    have = (current or {}).get("namedLoggerLevels") or {}
    missing = [logger for logger in removed if logger not in have]
    if missing:
        set_ones = ", ".join(sorted(have)) or "none"
        raise click.ClickException(
            f"topology {name} has no log level set for {', '.join(missing)}: nothing to remove "
            f"(loggers with a level set: {set_ones}); nothing was changed")


@command("set_log_level")
@click.argument("name")
@click.option("-l", "levels", multiple=True, metavar=_SYNTAX,
              help="Set LOGGER (a Python logger name; ROOT: the root logger) to LEVEL, reverted after "
                   f"TIMEOUT_SECS (0 or none: never). Levels: {', '.join(STORM_LEVELS)}. Repeatable.")
@click.option("-r", "removals", multiple=True, metavar="LOGGER",
              help="Remove LOGGER's setting: its level goes back to what it was. Repeatable.")
@common_options
def set_log_level(name, levels, removals, conf):
    """Change the log levels of topology NAME's workers while it runs.

    \b
    storm-py set_log_level wc -l ROOT=DEBUG:30      DEBUG everywhere for 30 s
    storm-py set_log_level wc -l my_topology.bolts=WARN -r ROOT
    """
    named = requested(levels, removals)
    removed = [logger for logger, entry in named.items() if entry["target_level"] is None]
    if removed:
        check_removals(name, removed, call(conf, "get_log_config", name=name))
    call(conf, "set_log_config", name=name, named_logger_levels=named)
    for logger, entry in named.items():
        if entry["target_level"] is None:
            click.echo(f"topology {name}: removed the log level of {logger} (back to its reset level)")
        else:
            until = f" for {entry['timeout']} s" if entry["timeout"] else " (no timeout)"
            click.echo(f"topology {name}: log level of {logger} set to {entry['target_level']}{until}")


COMMANDS = (set_log_level,)
