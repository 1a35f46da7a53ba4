"""Real Redis servers for tests (star-imported by tests/conftest.py).

Fixtures:
- `redis_server` (function): one `redis-server` of its own on a free 127.0.0.1 port, with its
  own temp directory, the append-only file on (`appendonly yes`, `appendfsync always`) and no
  RDB snapshots (`save ''`), so that `stop()` then `start()` (same port, same data) loses no
  acknowledged write. Stopped by its pid at teardown.
- `redis_server_factory` (function): `start(password=None) -> RedisServer` for tests that need
  more than one server or one with `requirepass`; all are stopped at teardown.

A `RedisServer` offers `host`, `port`, `password`, `pid`, `running`, `start()`, `stop()`
(SIGTERM: Redis flushes and exits), `kill()` (SIGKILL: a crash), `conf(**overrides)` (the storm-py
conf selecting the redis state provider on this server: `topology.state.provider` and
`topology.state.provider.config`), `provider_config(**overrides)` (that mapping alone), `client()`
(a redis-py client for inspecting the server; close it) and `log_tail()`.

The server itself is cluster_state/redisserver.py's (`storm-py dev-cluster --redis` runs the
same). redis-server comes from the Debian package `redis-server` (deploy/install-test-deps.sh).
Without it these fixtures fail with a message saying so; STORM_PY_SKIP_REDIS=1 makes them skip.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from cluster_state import redisserver

__all__ = ["RedisServer", "redis_server", "redis_server_factory"]

KEY_PREFIX = "storm-py-test"


class RedisServer(redisserver.RedisServer):
    """The package's server, with a test's key prefix and short timeout, a client for looking
    inside, and a start that fails (or skips) the test instead of raising."""

    def start(self) -> "RedisServer":
        try:
            return super().start()
        except redisserver.RedisUnavailable as exc:
            message = (f"{exc} (bash deploy/install-test-deps.sh installs it)")
            if os.environ.get("STORM_PY_SKIP_REDIS") == "1" and "not on PATH" in message:
                pytest.skip(message)
            pytest.fail(message, pytrace=False)

    def provider_config(self, **overrides: Any) -> dict[str, Any]:
        return super().provider_config(**{"key_prefix": KEY_PREFIX, "timeout": 2.0, **overrides})

    def client(self):
        import redis

        return redis.Redis(host=self.host, port=self.port, password=self.password, protocol=2,
                           socket_timeout=5, socket_connect_timeout=5)


@pytest.fixture
def redis_server_factory(tmp_path_factory: pytest.TempPathFactory):
    servers: list[RedisServer] = []

    def start(password: str | None = None) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("redis"), password=password)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def redis_server(redis_server_factory) -> RedisServer:
    return redis_server_factory()
