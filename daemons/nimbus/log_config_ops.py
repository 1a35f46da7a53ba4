"""Nimbus's RPC operations for dynamic log levels (Storm's setLogConfig / getLogConfig).

    set_log_config {name, named_logger_levels: {logger: {target_level, timeout?}}} -> as get_log_config
    get_log_config {name}  -> {"namedLoggerLevels": {logger: {target_level, reset_level, timeout,
                                                              timeout_epoch}}}

`name` is a live topology's name or id. In set_log_config a logger whose target_level is empty
or None is removed (its workers put its level back at once); any other is set, with a timeout
in seconds after which the workers revert it (0 or absent: none). Loggers not named keep their
setting. get_log_config has the shape of Storm's REST `GET /api/v1/topology/{id}/logconfig`
(`timeout_epoch` in milliseconds, 0 without a timeout; `reset_level` "" when the workers revert
to the level each logger had). The config is stored in ZooKeeper at `/logconfigs/{id}`; the
workers apply it (executor/log_levels.py).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Mapping

from cluster_state.errors import DecodeError
from cluster_state.records import LogConfig, LogLevel
from daemons.rpc.protocol import BadRequestError, arg
from executor.log_levels import UnknownLevelError, logger_key, storm_level

log = logging.getLogger(__name__)

# Timeouts are stored as epoch seconds in a msgpack int; anything longer is a mistake.
MAX_TIMEOUT_SECS = 2**31 - 1


def requested_levels(named: Mapping[Any, Any]) -> dict[str, tuple[str | None, int]]:
    """`named_logger_levels` checked: logger -> (Storm level name or None to remove, timeout
    secs); BadRequestError naming the logger and what is wrong with it."""
    if not named:
        raise BadRequestError("named_logger_levels is empty: name at least one logger")
    out: dict[str, tuple[str | None, int]] = {}
    for name, entry in named.items():
        if not isinstance(name, str) or not name.strip():
            raise BadRequestError(f"logger names must be non-empty strings (ROOT for the root logger), "
                                  f"got {name!r}")
        if not isinstance(entry, Mapping):
            raise BadRequestError(f"logger {name!r}: expected {{target_level, timeout}}, got {entry!r}")
        target = entry.get("target_level")
        if target is not None and not isinstance(target, str):
            raise BadRequestError(f"logger {name!r}: target_level must be a string, got {target!r}")
        try:
            level = storm_level(target) if target else None
        except UnknownLevelError as exc:
            raise BadRequestError(f"logger {name!r}: {exc}") from None
        timeout = entry.get("timeout") or 0
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 <= timeout <= MAX_TIMEOUT_SECS:
            raise BadRequestError(f"logger {name!r}: timeout must be whole seconds from 0 to {MAX_TIMEOUT_SECS}, "
                                  f"got {timeout!r}")
        out[logger_key(name)] = (level, timeout)
    return out


def merge_log_config(current: LogConfig | None, requested: Mapping[str, tuple[str | None, int]],
                     now: float) -> LogConfig:
    """Storm's merge: named loggers are set (a re-set keeps the entry's reset level) or removed;
    the others stay as they are."""
    levels = dict(current.named_logger_level) if current is not None else {}
    for name, (target, timeout) in requested.items():
        if target is None:
            levels.pop(name, None)
            continue
        prev = levels.get(name)
        # Rounded up: the level lasts at least the timeout asked for.
        until = math.ceil(now + timeout) if timeout else 0
        levels[name] = LogLevel(target, None if prev is None else prev.reset_level, timeout, until)
    return LogConfig(levels)


def log_config_view(config: LogConfig | None) -> dict[str, Any]:
    """Storm's REST shape of a log config."""
    levels = {} if config is None else config.named_logger_level
    return {"namedLoggerLevels": {
        name: {"target_level": e.target_level, "reset_level": e.reset_level or "", "timeout": e.timeout_secs,
               "timeout_epoch": e.timeout_epoch_secs * 1000}
        for name, e in sorted(levels.items())}}


def log_config_handlers(core) -> dict[str, Callable[[dict], Any]]:
    """The two operations on a NimbusCore (its cluster state, lock, clock and resolve)."""

    def current(storm_id: str) -> LogConfig | None:
        try:
            return core.cluster.topology_log_config(storm_id)
        except DecodeError as exc:
            log.warning("topology %s: unreadable log config, starting from none: %s", storm_id, exc)
            return None

    def set_log_config(a: dict) -> dict:
        name = arg(a, "name", str)
        requested = requested_levels(arg(a, "named_logger_levels", dict))
        with core.lock:
            storm_id = core.resolve(name)
            merged = merge_log_config(current(storm_id), requested, core.clock())
            core.cluster.set_topology_log_config(storm_id, merged)
        log.info("topology %s: log levels %s", storm_id,
                 ", ".join(f"{n}={t or 'removed'}" + (f" for {s}s" if t and s else "")
                           for n, (t, s) in sorted(requested.items())))
        return log_config_view(merged)

    def get_log_config(a: dict) -> dict:
        name = arg(a, "name", str)
        with core.lock:
            return log_config_view(current(core.resolve(name)))

    return {"set_log_config": set_log_config, "get_log_config": get_log_config}
