"""Choosing and opening a state provider (Storm's StateFactory): `topology.state.provider`
names it (`memory`, the default, or `redis`), `topology.state.provider.config` configures the
redis one. `check_provider` and `probe_provider` let submit refuse a topology whose provider is
misconfigured or cannot be reached, with one line naming it."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from cluster_state.config_schema import SCHEMA, problem
from executor.errors import InvalidTopologyError
from executor.state.kv import KeyValueState

log = logging.getLogger(__name__)

PROVIDER_KEY = "topology.state.provider"
CONFIG_KEY = "topology.state.provider.config"
DEFAULT_PROVIDER = "memory"


def _provider(conf: Mapping[str, Any]) -> str:
    name = conf.get(PROVIDER_KEY)
    if name is None:
        return DEFAULT_PROVIDER
    bad = problem(SCHEMA[PROVIDER_KEY], name)
    if bad is not None:
        raise InvalidTopologyError(f"{PROVIDER_KEY} = {name!r}: {bad}")
    return name.lower()


def _config(conf: Mapping[str, Any]) -> dict[str, Any]:
    config = conf.get(CONFIG_KEY)
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidTopologyError(f"{CONFIG_KEY} must be a mapping (host, port, db, password, key_prefix, "
                                   f"timeout), not {type(config).__name__}")
    config = dict(config)
    bad = problem(SCHEMA[CONFIG_KEY], config)
    if bad is not None:  # never shows the mapping: it may hold a password
        raise InvalidTopologyError(f"{CONFIG_KEY}: {bad}")
    return config


def check_provider(conf: Mapping[str, Any]) -> None:
    """Raise InvalidTopologyError (one line naming the key) if the provider settings are wrong."""
    _provider(conf)
    _config(conf)


def probe_provider(conf: Mapping[str, Any]) -> str | None:
    """Reach the configured provider once (a short timeout): None if it answers (or needs no
    server), else the problem in one line naming it (for Redis: its host:port)."""
    try:
        name, config = _provider(conf), _config(conf)
    except InvalidTopologyError as exc:
        return str(exc)
    if name != "redis":
        return None
    from executor.state.redis_client import RedisSettings, probe

    return probe(RedisSettings.from_config(config))


def open_state(conf: Mapping[str, Any], namespace: str) -> KeyValueState:
    """The state of `namespace` (`name/component#index`, executor/state/kv.py task_namespace) as
    last committed (with a txid prepared and not committed, if the provider kept
    one). Raises InvalidTopologyError for bad settings, StateUnavailableError
    when the provider cannot be reached."""
    name, config = _provider(conf), _config(conf)
    if name == "redis":
        from executor.state.redis_client import RedisSettings
        from executor.state.redis_kv import RedisKeyValueState

        state: KeyValueState = RedisKeyValueState.open(namespace, RedisSettings.from_config(config))
    else:
        from executor.state.memory import InMemoryKeyValueState
        from executor.state.task_files import START_DIR_KEY

        state = InMemoryKeyValueState(namespace, conf.get(START_DIR_KEY))
    log.debug("opened %r", state)
    return state


