"""Configuration: packaged defaults < storm.yaml < topology config < -c < component config.

Keys are Storm's dotted names, each declared once in config_schema.SCHEMA (type, null, range,
allowed names). A value the schema refuses raises ConfigError naming the key, the value, what
is allowed and where the value came from; an unknown key only warns (users keep their own keys
in topology configs, as in Storm). The loader records where each effective value came from.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from .config_schema import SCHEMA, problem
from .secrets import masked_value

log = logging.getLogger(__name__)

CONF_DIR_ENV = "STORM_CONF_DIR"
PACKAGED_SOURCE = "packaged defaults"
OVERRIDE_SOURCE = "-c"

# Keys Storm sets itself on a submitted topology.
# Set by storm-py itself: the name and id, and the marks TopologyBuilder puts on the components
# of a topology with checkpoints (executor/topology.py).
_INTERNAL_KEYS = {"topology.name", "storm.id", "topology.bolts.stateful", "topology.spouts.stateful",
                  "topology.spouts.rewindable"}
# Namespaces storm-py (or Storm, whose keys users bring) owns: an unknown key there is most
# likely a typo and is warned about. Keys elsewhere are the user's own (`wordcount.table`, a
# component's settings) and pass silently, as in Storm.
_OWNED_PREFIXES = ("storm.", "topology.", "nimbus.", "supervisor.", "worker.", "task.", "ui.",
                   "logviewer.", "drpc.", "pacemaker.", "transactional.", "dev.zookeeper.")

_warned: set[str] = set()

# Storm's JVM memory settings: a storm-py worker is a Python process, so they cannot apply; the
# warning names the keys that limit a worker's memory here (daemons/supervisor/slot.py).
_STORM_MEMORY_KEYS = ("worker.childopts", "topology.worker.childopts", "worker.heap.memory.mb",
                      "topology.worker.max.heap.size.mb")


def _log_warning(text: str) -> None:
    log.warning("%s", text)


# How a warning about the config reaches the user: the worker log by default; the CLI prints a
# one-line "warning:" instead (set_warning_printer).
_warn: Callable[[str], None] = _log_warning


def set_warning_printer(printer: Callable[[str], None] | None) -> None:
    """Where warnings about config keys go (None: back to the log)."""
    global _warn
    _warn = printer or _log_warning


class ConfigError(ValueError):
    """A configuration value is missing, malformed, of the wrong type or out of range."""


# ---------------------------------------------------------------- YAML without duplicate keys


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int):
        super().__init__(f"duplicate key {key!r} (line {line})")
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping naming the same key twice (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if duplicate:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error or a duplicate key is a ConfigError naming `source`."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(f"{source}: config key {exc.key!r} is set twice (line {exc.line}); "
                          f"keep one") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None


# ---------------------------------------------------------------- defaults


def _defaults_text() -> str:
    return resources.files("cluster_state").joinpath("defaults.yaml").read_text(encoding="utf-8")


_DEFAULTS: dict[str, Any] | None = None


def default_config() -> dict[str, Any]:
    """A fresh copy of the packaged defaults."""
    global _DEFAULTS
    if _DEFAULTS is None:
        data = load_yaml(_defaults_text(), "packaged defaults.yaml") or {}
        _DEFAULTS = dict(data)
    return dict(_DEFAULTS)


def setting(conf: Mapping[str, Any], key: str) -> Any:
    """`conf`'s value of `key`, or the packaged default where it has none: a bare conf (tests,
    direct callers), or a topology's conf merged by a Nimbus older than the key."""
    value = conf.get(key)
    return default_config()[key] if value is None else value


# ---------------------------------------------------------------- validation


def _short(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def check_value(key: str, value: Any, source: str = "config") -> None:
    """Raise ConfigError if the schema refuses `value` for the known `key`."""
    rule = SCHEMA.get(key)
    if rule is None:
        return
    bad = problem(rule, value)
    if bad is not None:
        raise ConfigError(f"config key {key!r} = {_short(masked_value(key, value))} in {source}: {bad}")


def validate_config(conf: Mapping[str, Any], source: str = "config") -> None:
    """Raise ConfigError on a refused value of a known key; warn once per unknown key."""
    for key, value in conf.items():
        if not isinstance(key, str):
            raise ConfigError(f"{source}: config key {key!r} is not a string")
        if key in SCHEMA:
            check_value(key, value, source)
        elif key in _STORM_MEMORY_KEYS and key not in _warned:
            _warned.add(key)
            _warn(f"{source}: {key!r} is Storm's setting for a worker's JVM, which storm-py's Python workers "
                  f"do not have: a worker's memory limit is topology.worker.memory.limit.mb (this topology's) "
                  f"or supervisor.worker.memory.limit.mb (the supervisor's, default 2048)")
        elif key not in _INTERNAL_KEYS and key.startswith(_OWNED_PREFIXES) and key not in _warned:
            _warned.add(key)
            near = close_key(key)
            hint = f"; did you mean {near}?" if near else "; a typo?"
            _warn(f"{source}: unknown config key {key!r} (kept, but storm-py does not read it{hint})")


def close_key(key: str) -> str | None:
    """The known key an unknown one most likely misspells (difflib's ratio), or None."""
    import difflib

    found = difflib.get_close_matches(key, list(SCHEMA), n=1, cutoff=0.85)
    return found[0] if found else None


# ---------------------------------------------------------------- -c key=value


def parse_override(item: str) -> tuple[str, Any]:
    """Parse one `-c key=value`; the value is read as a YAML scalar/flow value."""
    if "=" not in item:
        raise ConfigError(f"-c {item!r}: expected KEY=VALUE (e.g. -c topology.workers=2)")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"-c {item!r}: empty key")
    value = load_yaml(raw, f"-c {item!r}: value for {key!r}") if raw.strip() else ""
    return key, value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    return dict(parse_override(i) for i in items)


# ---------------------------------------------------------------- storm.yaml and provenance


def read_yaml_config(path: Path, source: str | None = None) -> dict[str, Any]:
    """A YAML file holding a mapping of config keys (empty file: {})."""
    source = source or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot be read: {exc}") from None
    data = load_yaml(text, source)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of config keys, got {type(data).__name__}")
    return data


@dataclass
class LoadedConfig:
    """The effective config, where each value came from, and the -c overrides on their own."""

    conf: dict[str, Any]
    sources: dict[str, str]
    overrides: dict[str, Any] = field(default_factory=dict)
    # The storm.yaml read (from --conf-dir or $STORM_CONF_DIR) and its source label; None: none was.
    storm_yaml: Path | None = None
    storm_yaml_source: str | None = None

    def source_of(self, key: str) -> str | None:
        return self.sources.get(key)

    def apply(self, layer: Mapping[str, Any] | None, source: str) -> None:
        """Validate `layer` (naming `source`) and lay it over the config."""
        if layer:
            validate_config(layer, source)
            self.conf.update(layer)
            self.sources.update(dict.fromkeys(layer, source))


def _storm_yaml(conf_dir: str | os.PathLike | None) -> tuple[Path, str] | None:
    """storm.yaml's path and its source label, or None when there is none to read."""
    if conf_dir is not None:
        path = Path(conf_dir) / "storm.yaml"
        if not path.exists():
            raise ConfigError(f"--conf-dir {conf_dir}: no storm.yaml there")
        return path, f"--conf-dir {path}"
    env = os.environ.get(CONF_DIR_ENV) or None
    if env is None:
        return None
    path = Path(env) / "storm.yaml"
    if not Path(env).is_dir():
        raise ConfigError(f"${CONF_DIR_ENV}={env}: not a directory (unset it or point it at the "
                          f"directory holding storm.yaml)")
    return (path, f"${CONF_DIR_ENV}/storm.yaml ({path})") if path.exists() else None


def load_storm_config(
    conf_dir: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None
) -> LoadedConfig:
    """Defaults < storm.yaml (conf_dir, else $STORM_CONF_DIR) < overrides, validated, with sources."""
    loaded = LoadedConfig(default_config(), dict.fromkeys(default_config(), PACKAGED_SOURCE),
                          dict(overrides or {}))
    found = _storm_yaml(conf_dir)
    if found is not None:
        path, source = found
        loaded.apply(read_yaml_config(path, source), source)
        loaded.storm_yaml, loaded.storm_yaml_source = path, source
    loaded.apply(overrides, OVERRIDE_SOURCE)
    return loaded


def read_storm_config(
    conf_dir: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Defaults < conf_dir/storm.yaml < overrides, validated."""
    return load_storm_config(conf_dir, overrides).conf


def merge_configs(*layers: Mapping[str, Any] | None, source: str = "topology config") -> dict[str, Any]:
    """Later layers win; every layer is validated."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            validate_config(layer, source)
            out.update(layer)
    return out
