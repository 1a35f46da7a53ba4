"""Choosing a provider, the submit-time checks (check_provider, probe_provider) and the config
keys of state and checkpoints."""

from __future__ import annotations

import socket

import pytest

from cluster_state.config import ConfigError, check_value, default_config
from cluster_state.config_schema import SCHEMA, problem
from executor.errors import InvalidTopologyError
from executor.state import check_provider, open_state, probe_provider
from executor.state.memory import InMemoryKeyValueState

pytestmark = pytest.mark.timeout(60)

CONFIG = "topology.state.provider.config"


def _redis(config) -> dict:
    return {"topology.state.provider": "redis", CONFIG: config}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_defaults():
    d = default_config()
    assert d["topology.state.provider"] == "memory"
    assert d[CONFIG] == {}
    assert d["topology.state.checkpoint.interval.ms"] == 1000
    assert d["topology.state.exactly.once"] is False
    check_provider(d)
    assert probe_provider(d) is None


@pytest.mark.parametrize("key,value", [
    ("topology.state.provider", "file"),
    ("topology.state.provider", None),
    (CONFIG, "host=localhost"),
    (CONFIG, {"port": "6379"}),
    (CONFIG, {"hots": "localhost"}),
    ("topology.state.checkpoint.interval.ms", 0),
    ("topology.state.checkpoint.interval.ms", 1.5),
    ("topology.state.exactly.once", "yes"),
])
def test_the_schema_refuses(key, value):
    assert problem(SCHEMA[key], value) is not None
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_value(key, value)


def test_the_schema_accepts_a_full_redis_config():
    full = {"host": "redis.example", "port": 6380, "db": 2, "password": "pw", "key_prefix": "wc", "timeout": 0.5}
    assert problem(SCHEMA[CONFIG], full) is None
    assert problem(SCHEMA["topology.state.provider"], "Redis") is None


def test_open_state_defaults_to_memory():
    for conf in ({}, {"topology.state.provider": None}, {"topology.state.provider": "MEMORY"}):
        assert isinstance(open_state(conf, "ns"), InMemoryKeyValueState)


@pytest.mark.parametrize("conf,expected", [
    ({"topology.state.provider": "file"}, "topology.state.provider = 'file': must be a string (one of memory, redis)"),
    ({"topology.state.provider": 3}, "topology.state.provider = 3: must be a string (one of memory, redis)"),
    (_redis(["localhost"]), f"{CONFIG} must be a mapping (host, port, db, password, key_prefix, timeout), not list"),
    (_redis("{host: x}"), f"{CONFIG} must be a mapping (host, port, db, password, key_prefix, timeout), not str"),
    (_redis({"port": "6379"}), f"{CONFIG}: key 'port' must be a port (an int from 1 to 65535)"),
    (_redis({"port": True}), f"{CONFIG}: key 'port' must be a port (an int from 1 to 65535)"),
    (_redis({"port": 70000}), f"{CONFIG}: key 'port' must be a port (an int from 1 to 65535)"),
    (_redis({"db": -1}), f"{CONFIG}: key 'db' must be an int >= 0"),
    (_redis({"host": ""}), f"{CONFIG}: key 'host' must be a non-empty string"),
    (_redis({"key_prefix": None}), f"{CONFIG}: key 'key_prefix' must be a non-empty string (null is not allowed)"),
    (_redis({"timeout": 0}), f"{CONFIG}: key 'timeout' must be a number of seconds > 0"),
    (_redis({"hots": "x"}), f"{CONFIG}: has an unknown key 'hots' (known: host, port, db, password, key_prefix, timeout)"),
])
def test_check_provider_refuses_with_one_line_naming_the_key(conf, expected):
    with pytest.raises(InvalidTopologyError) as info:
        check_provider(conf)
    assert str(info.value) == expected
    assert probe_provider(conf) == expected
    with pytest.raises(InvalidTopologyError):
        open_state(conf, "ns")


def test_check_provider_never_shows_the_password():
    conf = _redis({"password": "s3cret-pw", "prot": 1})
    with pytest.raises(InvalidTopologyError) as info:
        check_provider(conf)
    assert "s3cret-pw" not in str(info.value) and "'prot'" in str(info.value)
    with pytest.raises(InvalidTopologyError) as info:
        check_provider(_redis({"password": 12345}))
    assert "12345" not in str(info.value) and "'password'" in str(info.value)


def test_check_provider_accepts():
    check_provider({})
    check_provider({"topology.state.provider": "redis"})
    check_provider(_redis(None))
    check_provider(_redis({"host": "h", "port": 1, "db": 0, "password": None, "key_prefix": "p", "timeout": 3}))


def test_probe_an_unreachable_redis():
    port = _free_port()
    assert probe_provider(_redis({"host": "127.0.0.1", "port": port})) == (
        f"redis state provider at 127.0.0.1:{port} is unreachable: Connection refused")


@pytest.mark.redis
def test_probe_a_running_redis(redis_server_factory):
    open_server = redis_server_factory()
    assert probe_provider(open_server.conf()) is None
    locked = redis_server_factory(password="pw")
    assert probe_provider(locked.conf()) is None
    assert probe_provider(locked.conf(password="nope")).startswith(
        f"redis state provider at 127.0.0.1:{locked.port} refused the password: ")
    assert probe_provider(locked.conf(password=None)).startswith(
        f"redis state provider at 127.0.0.1:{locked.port} requires a password")
