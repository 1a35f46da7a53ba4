"""ZooKeeper connection settings read from the `storm.zookeeper.*` keys (pure, no kazoo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .config import ConfigError, check_value, default_config
from .paths import normalize_path


@dataclass(frozen=True)
class ZkSettings:
    servers: tuple[str, ...]
    port: int
    root: str
    session_timeout_secs: float
    connection_timeout_secs: float
    retry_times: int
    retry_interval_secs: float
    retry_ceiling_secs: float

    @property
    def connect_string(self) -> str:
        """`host:port,...`; a server entry that carries its own `:port` keeps it."""
        return ",".join(s if _has_port(s) else f"{s}:{self.port}" for s in self.servers)


def _has_port(server: str) -> bool:
    if server.startswith("["):  # [ipv6]:port
        return "]:" in server
    return server.count(":") == 1


_KEYS = ("storm.zookeeper.servers", "storm.zookeeper.port", "storm.zookeeper.root",
         "storm.zookeeper.session.timeout", "storm.zookeeper.connection.timeout",
         "storm.zookeeper.retry.times", "storm.zookeeper.retry.interval",
         "storm.zookeeper.retry.intervalceiling.millis")


def _get(conf: Mapping[str, Any], key: str) -> Any:
    value = conf.get(key)
    return default_config()[key] if value is None else value


def zk_settings(conf: Mapping[str, Any]) -> ZkSettings:
    """Validated settings (config_schema's rules); a missing key takes its packaged default."""
    values = {}
    for key in _KEYS:
        value = _get(conf, key)
        if key == "storm.zookeeper.servers" and isinstance(value, str):
            value = [value]  # one host given as a plain string
        check_value(key, value)
        values[key] = value
    try:
        root = normalize_path(values["storm.zookeeper.root"])
    except ValueError as exc:
        raise ConfigError(f"config key 'storm.zookeeper.root': {exc}") from None
    interval = values["storm.zookeeper.retry.interval"] / 1000.0
    ceiling = values["storm.zookeeper.retry.intervalceiling.millis"] / 1000.0
    return ZkSettings(
        servers=tuple(s.strip() for s in values["storm.zookeeper.servers"]),
        port=values["storm.zookeeper.port"],
        root=root,
        session_timeout_secs=values["storm.zookeeper.session.timeout"] / 1000.0,
        connection_timeout_secs=values["storm.zookeeper.connection.timeout"] / 1000.0,
        retry_times=values["storm.zookeeper.retry.times"],
        retry_interval_secs=interval,
        retry_ceiling_secs=max(ceiling, interval),
    )
