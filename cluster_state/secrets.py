"""Which config keys hold secrets, and values with them masked: what a UI, a REST answer or an
error message may show of a config. A nested mapping (topology.state.provider.config) is masked
by its own key names: its `password` too."""

from __future__ import annotations

from typing import Any, Mapping

SECRET_KEYS = frozenset({"nimbus.authentication.secret", "storm.zookeeper.auth.payload",
                         "storm.zookeeper.topology.auth.payload"})
SECRET_SUFFIXES = (".secret", ".password")
SECRET_NAMES = frozenset({"password", "secret"})  # a nested mapping's own keys
# Keys whose value is a mapping that may hold a secret: a value of another shape is not shown at all.
SECRET_HOLDERS = frozenset({"topology.state.provider.config"})
MASK = "********"


def is_secret_key(key: Any) -> bool:
    k = str(key).lower()
    return k in SECRET_KEYS or k.endswith(SECRET_SUFFIXES) or k in SECRET_NAMES


def redact(value: Any) -> Any:
    """`value` with the secrets of every mapping inside it replaced by MASK (a copy)."""
    if isinstance(value, Mapping):
        return {k: (MASK if is_secret_key(k) and v is not None else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def masked_value(key: Any, value: Any) -> Any:
    """A config key's value as it may be shown."""
    if value is None:
        return None
    if is_secret_key(key) or (str(key) in SECRET_HOLDERS and not isinstance(value, Mapping)):
        return MASK
    return redact(value)
