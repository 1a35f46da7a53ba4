"""Where a topology's savepoints are kept, behind one protocol: the redis provider's own server
(store.py, read there by whoever takes the savepoint) or a directory (files.py, for the memory
provider, whose state lives only in the workers: they write it). Nimbus's swap
(daemons/nimbus/swaps/) and the savepoint commands see only this."""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from executor.savepoints.plan import SavepointRefused
from executor.savepoints.store import Manifest, Snapshot
from executor.state.provider import CONFIG_KEY, PROVIDER_KEY


class SavepointStores(Protocol):
    where: str            # for messages: "the redis state provider at HOST:PORT", "the savepoint directory D"
    workers_write: bool   # the workers write a savepoint's state (files.py request_dir); else it is read here

    def manifests(self, topology: str) -> list[Manifest]: ...

    def manifest(self, topology: str, savepoint: str) -> Manifest: ...

    def load(self, manifest: Manifest) -> Snapshot: ...

    def delete(self, topology: str, savepoint: str) -> None: ...

    def start_conf(self, topology: str, savepoint: str, storm_id: str) -> dict[str, Any]:
        """The topology config of `storm_id` starting from `savepoint` (known before the start is
        written: a swap installs the new code first)."""

    def start_from(self, manifest: Manifest, states: Mapping[str, list], checkpoint_tasks: int,
                   storm_id: str) -> None:
        """Write `states` (component -> per task index) as the state `storm_id` starts from."""

    def close(self) -> None: ...


def provider_of(conf: Mapping[str, Any]) -> str:
    return str(conf.get(PROVIDER_KEY) or "memory").lower()


def check_mode(name: str, conf: Mapping[str, Any], which: str, directory: str | None = None) -> None:
    """Refuse a topology whose state a savepoint cannot keep (in Redis, or in `directory` for
    the memory provider), one line naming it."""
    if not conf.get("topology.state.exactly.once"):
        raise SavepointRefused(f"{which} topology {name!r} is not in exactly-once mode "
                               f"(topology.state.exactly.once: true): savepoints are its checkpoints; "
                               f"kill and submit it instead")
    provider = provider_of(conf)
    if provider == "memory" and directory is None:
        raise SavepointRefused(f"{which} topology {name!r} keeps its state with the 'memory' provider, only in its "
                               f"workers: give --dir DIR (a directory every worker can write) for its savepoints")
    if provider == "redis" and directory is not None:
        raise SavepointRefused(f"{which} topology {name!r} keeps its state in Redis, and its savepoints there: "
                               f"--dir is for the memory provider")
    if provider not in ("memory", "redis"):
        raise SavepointRefused(f"{which} topology {name!r} keeps its state with the {provider!r} provider: "
                               f"savepoints need redis or memory")


def store_for(conf: Mapping[str, Any], directory: str | None = None,
              more: Mapping[str, Any] | None = None) -> SavepointStores:
    """Where the savepoints of a topology with `conf` are: `directory` (the memory provider's),
    else its Redis, its provider config completed by `more`'s (a password is a secret a
    topology's stored conf leaves out; the daemon's or the command's own conf has it)."""
    from executor.savepoints.files import DirectoryStore
    from executor.savepoints.store import SavepointStore
    from executor.state.redis_client import RedisSettings

    if directory:
        return DirectoryStore(directory)
    config = dict(conf.get(CONFIG_KEY) or {})
    for key, value in ((more or {}).get(CONFIG_KEY) or {}).items():
        config.setdefault(key, value)
    try:
        return SavepointStore(RedisSettings.from_config(config))
    except (TypeError, ValueError) as exc:
        raise SavepointRefused(f"{CONFIG_KEY}: {exc}") from None
