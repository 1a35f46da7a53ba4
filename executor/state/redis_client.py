"""The redis provider's settings, its client, and the one-line errors its failures become.

The client never retries on its own beyond one immediate reconnect (a connection the server
closed while it restarted is replaced transparently); every other failure is a
StateUnavailableError naming the server, and the state's next call connects again. Every
command the state sends is idempotent, so a command re-sent after a lost answer is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from executor.state.errors import StateUnavailableError

DEFAULTS: dict[str, Any] = {"host": "localhost", "port": 6379, "db": 0, "password": None,
                            "key_prefix": "storm-py", "timeout": 5.0}
PROBE_TIMEOUT_SECS = 2.0


@dataclass(frozen=True)
class RedisSettings:
    host: str
    port: int
    db: int
    password: str | None
    key_prefix: str
    timeout: float

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> "RedisSettings":
        """From an already checked topology.state.provider.config (missing keys: DEFAULTS)."""
        merged = {**DEFAULTS, **(config or {})}
        return cls(str(merged["host"]), int(merged["port"]), int(merged["db"]), merged["password"],
                   str(merged["key_prefix"]), float(merged["timeout"]))

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __repr__(self) -> str:  # never shows the password
        return (f"RedisSettings({self.address}, db={self.db}, key_prefix={self.key_prefix!r}, "
                f"password={'set' if self.password else 'none'})")


def connect(settings: RedisSettings, timeout: float | None = None, retries: int = 1, text: bool = False):
    """A client (connections are made on first use). RESP2: the same answers from any Redis
    server version and redis-py release. `retries`: immediate reconnects after a connection
    error (one replaces a connection the server closed while it restarted). `text`: replies
    decoded as UTF-8 by the reply parser, bytes that are not UTF-8 kept as lone surrogates
    ("surrogateescape", which also encodes them back unchanged in commands)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    secs = settings.timeout if timeout is None else timeout
    return redis.Redis(host=settings.host, port=settings.port, db=settings.db, password=settings.password,
                       socket_timeout=secs, socket_connect_timeout=secs, retry=Retry(NoBackoff(), retries),
                       protocol=2, health_check_interval=0, decode_responses=text,
                       encoding_errors="surrogateescape" if text else "strict")


def _cause(exc: BaseException) -> str:
    """The reason in a redis-py message, without the address it repeats."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    # "Error 111 connecting to 127.0.0.1:6390. Connection refused."
    marker = text.find("connecting to ")
    if marker >= 0:
        rest = text[marker + len("connecting to "):]
        _, _, reason = rest.partition(". ")
        text = reason or text
    return text.rstrip(".") or type(exc).__name__


def problem_of(exc: BaseException, settings: RedisSettings, who: str = "redis state provider",
               password_from: str = "topology.state.provider.config") -> str:
    """One line saying what went wrong with the server, naming it (`who` uses it; `password_from`
    is where its password would be set)."""
    import redis.exceptions as rex

    where = f"{who} at {settings.address}"
    cause = _cause(exc)
    if isinstance(exc, rex.AuthenticationError) or "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
        if settings.password is None:
            return f"{where} requires a password (none is set in {password_from}): {cause}"
        return f"{where} refused the password: {cause}"
    if isinstance(exc, rex.ResponseError) and "DB index" in str(exc):
        return f"{where} refused db {settings.db}: {cause}"
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        return f"{where} is unreachable: {cause}"
    return f"{where} failed: {cause}"


def unavailable(exc: BaseException, settings: RedisSettings, what: str) -> StateUnavailableError:
    return StateUnavailableError(f"{problem_of(exc, settings)} ({what})")


def probe(settings: RedisSettings) -> str | None:
    """Reach the server once (PING, a short timeout): None, or the problem in one line."""
    import redis.exceptions as rex

    client = connect(settings, timeout=min(settings.timeout, PROBE_TIMEOUT_SECS), retries=0)
    try:
        client.ping()
    except (rex.RedisError, OSError) as exc:
        return problem_of(exc, settings)
    finally:
        client.close()
    return None
