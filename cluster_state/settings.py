"""ZooKeeper connection settings read from the `storm.zookeeper.*` keys (pure, no kazoo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .config import ConfigError, default_config
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


def _get(conf: Mapping[str, Any], key: str) -> Any:
    value = conf.get(key)
    return default_config()[key] if value is None else value


def _number(conf: Mapping[str, Any], key: str, minimum: float) -> float:
    value = _get(conf, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"config key {key!r} must be a number >= {minimum}, got {value!r}")
    return value


def zk_settings(conf: Mapping[str, Any]) -> ZkSettings:
    """Validated settings; a missing key takes its packaged default."""
    servers = _get(conf, "storm.zookeeper.servers")
    if isinstance(servers, str):
        servers = [servers]
    if not isinstance(servers, (list, tuple)) or not servers or not all(
        isinstance(s, str) and s.strip() for s in servers
    ):
        raise ConfigError(f"config key 'storm.zookeeper.servers' must be a non-empty list of hosts, got {servers!r}")
    port = _number(conf, "storm.zookeeper.port", 1)
    if not isinstance(port, int) or port > 65535:
        raise ConfigError(f"config key 'storm.zookeeper.port' must be an int port, got {port!r}")
    root = _get(conf, "storm.zookeeper.root")
    if not isinstance(root, str) or not root.startswith("/"):
        raise ConfigError(f"config key 'storm.zookeeper.root' must be an absolute path, got {root!r}")
    try:
        root = normalize_path(root)
    except ValueError as exc:
        raise ConfigError(f"config key 'storm.zookeeper.root': {exc}") from None
    retry_times = _number(conf, "storm.zookeeper.retry.times", 0)
    if not isinstance(retry_times, int):
        raise ConfigError(f"config key 'storm.zookeeper.retry.times' must be an int, got {retry_times!r}")
    interval = _number(conf, "storm.zookeeper.retry.interval", 0) / 1000.0
    ceiling = _number(conf, "storm.zookeeper.retry.intervalceiling.millis", 0) / 1000.0
    return ZkSettings(
        servers=tuple(s.strip() for s in servers),
        port=port,
        root=root,
        session_timeout_secs=_number(conf, "storm.zookeeper.session.timeout", 1) / 1000.0,
        connection_timeout_secs=_number(conf, "storm.zookeeper.connection.timeout", 1) / 1000.0,
        retry_times=retry_times,
        retry_interval_secs=interval,
        retry_ceiling_secs=max(ceiling, interval),
    )
