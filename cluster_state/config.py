"""Configuration: packaged defaults < storm.yaml < -c overrides < topology < component.

Keys are Storm's dotted names. A value of the wrong type raises ConfigError naming the key;
an unknown key only warns (users keep their own keys in topology configs, as in Storm).
"""

from __future__ import annotations

import logging
import os
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

log = logging.getLogger(__name__)

CONF_DIR_ENV = "STORM_CONF_DIR"

# Keys whose packaged default is null, with the types they take when set.
_NUMBER = (int, float)
_NULLABLE_TYPES: dict[str, tuple[type, ...]] = {
    "storm.zookeeper.auth.scheme": (str,),
    "storm.zookeeper.auth.payload": (str,),
    "storm.zookeeper.topology.auth.scheme": (str,),
    "storm.zookeeper.topology.auth.payload": (str,),
    "storm.local.hostname": (str,),
    "topology.acker.executors": (int,),
    "topology.max.spout.pending": (int,),
    "topology.tick.tuple.freq.secs": _NUMBER,
    "topology.max.task.parallelism": (int,),
}
# Keys that take fractional values although their default is a whole number.
_FRACTIONAL_OK = {
    "topology.message.timeout.secs",
    "topology.stats.sample.rate",
}
# Keys Storm sets itself on a submitted topology.
_INTERNAL_KEYS = {"topology.name", "storm.id"}
# Key prefixes users may freely add (e.g. spark.* passed through to Spark).
_OPEN_PREFIXES = ("spark.",)

_warned: set[str] = set()


class ConfigError(ValueError):
    """A configuration value is missing, malformed or of the wrong type."""


def _defaults_text() -> str:
    return resources.files("cluster_state").joinpath("defaults.yaml").read_text(encoding="utf-8")


_DEFAULTS: dict[str, Any] | None = None


def default_config() -> dict[str, Any]:
    """A fresh copy of the packaged defaults."""
    global _DEFAULTS
    if _DEFAULTS is None:
        data = yaml.safe_load(_defaults_text()) or {}
        _DEFAULTS = dict(data)
    return dict(_DEFAULTS)


def expected_types(key: str) -> tuple[type, ...] | None:
    """The types a known key accepts, or None for an unknown key."""
    defaults = default_config()
    if key in _NULLABLE_TYPES:
        return _NULLABLE_TYPES[key]
    if key not in defaults:
        return None
    value = defaults[key]
    if isinstance(value, bool):
        return (bool,)
    if isinstance(value, int):
        return _NUMBER if key in _FRACTIONAL_OK else (int,)
    if isinstance(value, float):
        return _NUMBER
    if isinstance(value, list):
        return (list,)
    if isinstance(value, dict):
        return (dict,)
    return (type(value),)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if value is None:
        return True  # null means "use the built-in behaviour" for every key
    if isinstance(value, bool) and bool not in types:
        return False  # bool is an int subclass; True is never a count
    return isinstance(value, types)


def validate_config(conf: Mapping[str, Any], source: str = "config") -> None:
    """Raise ConfigError on a wrongly typed known key; warn once per unknown key."""
    for key, value in conf.items():
        if not isinstance(key, str):
            raise ConfigError(f"{source}: config key {key!r} is not a string")
        types = expected_types(key)
        if types is None:
            if key not in _INTERNAL_KEYS and not key.startswith(_OPEN_PREFIXES) and key not in _warned:
                _warned.add(key)
                log.warning("%s: unknown config key %r (kept, but storm-py does not read it)", source, key)
            continue
        if not _type_ok(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise ConfigError(
                f"{source}: config key {key!r} must be {names}, got {type(value).__name__} {value!r}"
            )


def parse_override(item: str) -> tuple[str, Any]:
    """Parse one `-c key=value`; the value is read as a YAML scalar/flow value."""
    if "=" not in item:
        raise ConfigError(f"-c {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"-c {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"-c {item!r}: value for {key!r} is not valid YAML: {exc}") from None
    return key, value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    return dict(parse_override(i) for i in items)


def read_yaml_config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def resolve_conf_dir(conf_dir: str | os.PathLike | None) -> Path | None:
    if conf_dir is None:
        conf_dir = os.environ.get(CONF_DIR_ENV) or None
    return Path(conf_dir) if conf_dir is not None else None


def read_storm_config(
    conf_dir: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Defaults < conf_dir/storm.yaml < overrides, validated."""
    conf = default_config()
    directory = resolve_conf_dir(conf_dir)
    if directory is not None:
        path = directory / "storm.yaml"
        if path.exists():
            user = read_yaml_config(path)
            validate_config(user, str(path))
            conf.update(user)
        elif conf_dir is not None:
            raise ConfigError(f"--conf-dir {directory}: no storm.yaml there")
    if overrides:
        validate_config(overrides, "-c")
        conf.update(overrides)
    return conf


def merge_configs(*layers: Mapping[str, Any] | None, source: str = "topology config") -> dict[str, Any]:
    """Later layers win; every layer is validated."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            validate_config(layer, source)
            out.update(layer)
    return out
