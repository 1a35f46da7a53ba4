"""Dynamic log levels (`storm-py set_log_level`, Storm's "Dynamic Log Level Settings") on
Python's logging.

Nimbus keeps a topology's LogConfig in ZooKeeper (`/logconfigs/{id}`); each worker reads it (on
a watch and every few seconds), sets the named loggers' levels, remembers the level each had
before (its reset level) and puts that back when the entry's timeout passes or the entry is
removed. Levels use Storm's names; `ROOT` names the root logger.

`plan` decides (pure: the config, what was changed, the current levels and the time in);
`LogLevelKeeper` carries the plan out on the process's loggers.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Mapping

from cluster_state.records import LogConfig

log = logging.getLogger(__name__)

ROOT = "ROOT"

# Storm's (log4j's) level names on Python's levels. ALL is 1, not NOTSET (0): on a named logger
# NOTSET means "inherit the parent's level", not "everything".
STORM_LEVELS: dict[str, int] = {
    "ALL": 1,
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
# Python's own names are accepted too, and stored as Storm's.
_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}
# How a Python level is shown in log lines (the Storm name a user typed, where there is one).
_DISPLAY = {1: "ALL", logging.NOTSET: "NOTSET", logging.DEBUG: "DEBUG", logging.INFO: "INFO",
            logging.WARNING: "WARN", logging.ERROR: "ERROR", logging.CRITICAL: "FATAL",
            logging.CRITICAL + 10: "OFF"}


# Libraries whose DEBUG lines are their wire (kazoo logs every ZooKeeper packet, in binary): a
# ROOT change does not reach below INFO on them; naming one (`-l kazoo=DEBUG`) still does.
QUIET_UNLESS_NAMED = ("kazoo",)


def shielded_level(root_level: int, named: bool, shielded: bool) -> int | None:
    """The level to give a QUIET_UNLESS_NAMED logger, None to leave it: INFO while the root is
    below it and the log config does not name the logger; back to NOTSET (follow the root) once
    not, if it was this that set INFO (`shielded`)."""
    if not named and 0 < root_level < logging.INFO:
        return None if shielded else logging.INFO
    return logging.NOTSET if shielded else None


class UnknownLevelError(ValueError):
    """A level name that is neither Storm's nor Python's; the message names it and the choices."""


def storm_level(name: str) -> str:
    """The Storm name of a level given as Storm's or Python's name, any case (`warning` -> WARN)."""
    key = name.strip().upper() if isinstance(name, str) else name
    key = _ALIASES.get(key, key)
    if key not in STORM_LEVELS:
        raise UnknownLevelError(f"unknown log level {name!r} (one of {', '.join(STORM_LEVELS)})")
    return key


def python_level(name: str) -> int:
    """Python's level for a Storm (or Python) level name; UnknownLevelError naming it."""
    return STORM_LEVELS[storm_level(name)]


def level_name(level: int) -> str:
    return _DISPLAY.get(level, f"Level {level}")


def logger_key(name: str) -> str:
    """A logger name as the LogConfig keys it: `root` in any case is ROOT (Storm's equalsIgnoreCase)."""
    return ROOT if name.strip().upper() == ROOT else name.strip()


def get_logger(key: str) -> logging.Logger:
    return logging.getLogger() if key == ROOT else logging.getLogger(key)


@dataclass(frozen=True)
class Changed:
    """A logger set from a topology's log config: the level set, the level to put back, and
    the entry's timeout (epoch seconds, 0: none) as it was set."""

    level: int
    reset_level: int
    until: int


@dataclass(frozen=True)
class SetLevel:
    """Set `logger` (a LogConfig key) to `level`; `was` and `until` are for the log line, `why`
    says set, "timeout expired" or "setting removed"."""

    logger: str
    level: int
    was: int
    until: int
    why: str


@dataclass(frozen=True)
class Plan:
    changed: dict[str, Changed]
    actions: tuple[SetLevel, ...]
    # (logger, level name) entries skipped because the level is unknown (not written by Nimbus).
    unknown: tuple[tuple[str, str], ...] = ()


def plan(config: LogConfig | None, changed: Mapping[str, Changed], current: Mapping[str, int],
         now: float) -> Plan:
    """What to set and revert so the loggers follow `config` at `now`.

    `changed`: what earlier plans set (kept between calls); `current`: the current level of
    every logger named in `config` or `changed`. An entry is applied when it is new or was set
    again (another level or timeout), not on every call, so a component that changes its own
    logger's level is not overridden each poll. The reset level is the entry's, else the one
    recorded when the logger was first set (a re-set keeps it), else the level it has now. A
    logger whose entry timed out or went is put back to its reset level; an entry that timed
    out before this worker saw it is never applied.
    """
    entries = {} if config is None else config.named_logger_level
    new_changed: dict[str, Changed] = {}
    actions: list[SetLevel] = []
    unknown: list[tuple[str, str]] = []
    for name in sorted(entries):
        entry = entries[name]
        try:
            target = python_level(entry.target_level)
            entry_reset = None if entry.reset_level is None else python_level(entry.reset_level)
        except UnknownLevelError:
            unknown.append((name, entry.target_level if entry.reset_level is None else
                            f"{entry.target_level}/{entry.reset_level}"))
            continue
        until = entry.timeout_epoch_secs
        if until and now >= until:
            continue  # expired: reverted below if this process had set it
        prev = changed.get(name)
        if prev is not None and prev.level == target and prev.until == until \
                and (entry_reset is None or entry_reset == prev.reset_level):
            new_changed[name] = prev
            continue
        reset = entry_reset if entry_reset is not None else (prev.reset_level if prev else current[name])
        new_changed[name] = Changed(target, reset, until)
        actions.append(SetLevel(name, target, current[name], until, "set"))
    for name in sorted(set(changed) - set(new_changed)):
        entry = entries.get(name)
        expired = entry is not None and entry.timeout_epoch_secs and now >= entry.timeout_epoch_secs
        why = "timeout expired" if expired else "setting removed"
        actions.append(SetLevel(name, changed[name].reset_level, current[name], 0, why))
    return Plan(new_changed, tuple(actions), tuple(unknown))


def next_expiry(changed: Mapping[str, Changed]) -> int | None:
    """The earliest timeout among the loggers set (epoch seconds), None without one."""
    timeouts = [c.until for c in changed.values() if c.until]
    return min(timeouts) if timeouts else None


def _describe(action: SetLevel) -> str:
    if action.why != "set":
        return f"log level of {action.logger} reset to {level_name(action.level)} ({action.why})"
    until = "with no timeout" if not action.until else \
        "until " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(action.until))
    return f"log level of {action.logger} set to {level_name(action.level)} (was {level_name(action.was)}) {until}"


class LogLevelKeeper:
    """Carries out the plans on this process's loggers, for every topology whose workers run here.

    One per process (KEEPER): LocalCluster runs several workers in one process and they share
    its loggers, so what was changed is kept per topology, not per worker; a second worker of
    the same topology then neither takes the first one's level as the reset level nor reverts
    twice. When the last worker of a topology here stops, its levels are put back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed: dict[str, dict[str, Changed]] = {}
        self._users: collections.Counter[str] = collections.Counter()
        self._warned: set[tuple[str, str, str]] = set()
        self._shielded: set[str] = set()   # QUIET_UNLESS_NAMED loggers this set to INFO

    def attach(self, storm_id: str) -> None:
        with self._lock:
            self._users[storm_id] += 1

    def detach(self, storm_id: str) -> None:
        with self._lock:
            self._users[storm_id] -= 1
            if self._users[storm_id] > 0:
                return
            del self._users[storm_id]
            changed = self._changed.pop(storm_id, {})
            self._warned = {w for w in self._warned if w[0] != storm_id}
            for name in sorted(changed):
                logger = get_logger(name)
                was = logger.level
                logger.setLevel(changed[name].reset_level)
                log.info("%s", _describe(SetLevel(name, changed[name].reset_level, was, 0, "worker stopped")))
            self._shield(set())

    def _shield(self, named: set[str]) -> None:
        """QUIET_UNLESS_NAMED loggers kept out of a ROOT change (the lock held)."""
        named = named | {n for c in self._changed.values() for n in c}
        root = logging.getLogger().level
        for lib in QUIET_UNLESS_NAMED:
            level = shielded_level(root, any(n == lib or n.startswith(lib + ".") for n in named),
                                   lib in self._shielded)
            if level is not None:
                logging.getLogger(lib).setLevel(level)
                (self._shielded.add if level == logging.INFO else self._shielded.discard)(lib)

    def sync(self, storm_id: str, config: LogConfig | None, now: float) -> int | None:
        """Apply `config` for `storm_id` at `now`; returns the next timeout (epoch seconds) to
        come back at, or None."""
        with self._lock:
            changed = self._changed.get(storm_id, {})
            names = set(changed) | set(() if config is None else config.named_logger_level)
            current = {name: get_logger(name).level for name in names}
            result = plan(config, changed, current, now)
            for name, level in result.unknown:
                if (storm_id, name, level) not in self._warned:
                    self._warned.add((storm_id, name, level))
                    log.warning("log config of %s: unknown level %s for logger %s, ignored", storm_id, level, name)
            for action in result.actions:
                get_logger(action.logger).setLevel(action.level)
                log.info("%s", _describe(action))
            self._shield(set(result.changed))
            if result.changed:
                self._changed[storm_id] = result.changed
            else:
                self._changed.pop(storm_id, None)
            return next_expiry(result.changed)

    def changed(self, storm_id: str) -> dict[str, Changed]:
        with self._lock:
            return dict(self._changed.get(storm_id, {}))


KEEPER = LogLevelKeeper()
