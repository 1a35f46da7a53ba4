"""Nimbus's RPC operations: argument checking and mapping onto NimbusCore (quick, no waiting).

Operations (args -> result):
    begin_upload {size, checksum}                  -> {upload_id, chunk_bytes}
    upload_chunk {upload_id, offset, data}         -> {received}
    submit {name, upload_id, initial_status?, from_savepoint?, allow_dropped_state?, dir?, provider_config?}
                                                   -> {id, notes}
    swap {name, upload_id, conf?, wait_secs, allow_dropped_state?, dir?, provider_config?}
                                                   -> the swap's record (daemons/nimbus/swaps/)
    swap_status {name}                             -> the swap's record, or None
    kill {name, wait_secs?} / activate {name} / deactivate {name, note?}
    rebalance {name, wait_secs?, num_workers?, executors?: {component: n}}
    cluster_info {}                                -> supervisors and topologies
    topology_info {name}                           -> status, components, stats, last errors
    topology_details {name (or id)}                -> base, conf, components, executors with raw stats, errors,
                                                      worker deaths
    nimbus_conf {}                                 -> Nimbus's config, secrets masked
    set_log_config / get_log_config                (daemons/nimbus/log_config_ops.py)
    download_info {id, file}                       -> {size, checksum}     (supervisors)
    download_chunk {id, file, offset, length}      -> {data}

Nimbus HA (docs/operations.md): with `require_leader`, a standby refuses every write (uploads,
submit, kill, activate, deactivate, rebalance, set_log_config) with NotLeaderError naming the
leader, before doing anything; it answers reads itself (ZooKeeper is shared), except those
that need a topology's code it has not copied yet, which it refuses the same way so the
client asks the leader. `nimbus_rows` adds every registered Nimbus to cluster_info. The reads
answer with the to_wire() of the classes in daemons/answers/.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any, Callable

from cluster_state.records import SwapRecord
from daemons.answers.cluster import NimbusRow
from daemons.nimbus.code_store import CodeStore, UploadError, UploadTooLargeError
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.log_config_ops import log_config_handlers
from daemons.nimbus.swaps import starts
from daemons.nimbus.swaps.driver import SwapDriver
from daemons.nimbus.transitions import MAX_WAIT_SECS
from daemons.rpc.code_transfer import CHUNK_BYTES
from daemons.rpc.protocol import BadRequestError, TooLargeError, arg
from executor.errors import NotAliveError
from executor.package import file_checksum, masked
from executor.state.provider import CONFIG_KEY


def make_handlers(core: NimbusCore, store: CodeStore, max_package_bytes: int,
                  after_change: Callable[[], Any], *, require_leader: Callable[[], None] | None = None,
                  nimbus_rows: Callable[[], list[NimbusRow]] | None = None,
                  swaps: SwapDriver | None = None) -> dict[str, Callable[[dict], Any]]:
    """`after_change` runs after an event that may schedule a timer (wakes the monitor)."""

    def begin_upload(a: dict) -> dict:
        size = arg(a, "size", int)
        checksum = arg(a, "checksum", str)
        if size < 0:
            raise BadRequestError(f"upload size must be >= 0, got {size}")
        if size > max_package_bytes:
            raise TooLargeError(f"package of {size} bytes exceeds storm.package.max.bytes ({max_package_bytes})")
        with core.lock:
            return {"upload_id": _upload(lambda: store.begin_upload(size, checksum, max_package_bytes)),
                    "chunk_bytes": CHUNK_BYTES}

    def upload_chunk(a: dict) -> dict:
        upload_id = arg(a, "upload_id", str)
        offset = arg(a, "offset", int)
        data = arg(a, "data", bytes)
        with core.lock:
            return {"received": _upload(lambda: store.upload_chunk(upload_id, offset, data))}

    def submit(a: dict) -> dict:
        name = arg(a, "name", str)
        upload_id = arg(a, "upload_id", str)
        status = arg(a, "initial_status", str, "active")
        overrides = arg(a, "conf", dict, {})
        # How long the client waits (its timeout; older clients: Nimbus's own): a submit that
        # cannot finish in time is undone rather than left to start after the client gave up.
        waits = arg(a, "client_timeout_secs", (int, float), None) or float(core.conf["nimbus.thrift.timeout"])
        deadline = time.monotonic() + max(0.5, 0.8 * float(waits))
        savepoint = arg(a, "from_savepoint", str, None)
        more = {**core.conf, **_provider_conf(a)}
        notes: list[str] = []
        if savepoint:
            before = starts.from_savepoint(name, savepoint, arg(a, "allow_dropped_state", bool, False),
                                           arg(a, "dir", str, None), more, arg(a, "allow_repeated_output", bool, False))
        else:
            before = starts.continuing(name, more, notes)
        with core.lock:
            package = _upload(lambda: store.finish_upload(upload_id))
        storm_id = _upload(lambda: core.submit(name, package, status, overrides, deadline=deadline,
                                               before_start=before))
        return {"id": storm_id, "notes": notes}

    def swap(a: dict) -> dict:
        if swaps is None:
            raise BadRequestError("this Nimbus runs no swaps")
        name = arg(a, "name", str)
        upload_id = arg(a, "upload_id", str)
        wait = _wait(a)
        if wait is None or wait < 1:
            raise BadRequestError(f"swap {name}: wait must be at least a second, got {wait}")
        with core.lock:
            package = _upload(lambda: store.finish_upload(upload_id))
        record = swaps.begin(name, package, arg(a, "conf", dict, {}), wait, arg(a, "allow_dropped_state", bool, False),
                             arg(a, "dir", str, None), _provider_conf(a))
        after_change()
        return _record(record)

    def swap_status(a: dict) -> dict | None:
        if swaps is None:
            return None
        record = swaps.status(arg(a, "name", str))
        return None if record is None else _record(record)

    def kill(a: dict) -> dict:
        seconds = core.kill(arg(a, "name", str), _wait(a))
        after_change()
        return {"wait_secs": seconds}

    def activate(a: dict) -> None:
        core.activate(arg(a, "name", str))

    def deactivate(a: dict) -> None:
        note = a.get("note")
        core.deactivate(arg(a, "name", str), note if isinstance(note, str) and note else None)

    def request_savepoint(a: dict) -> None:
        core.request_savepoint(arg(a, "name", str), arg(a, "dir", str, None))

    def rebalance(a: dict) -> dict:
        executors = arg(a, "executors", dict, None)
        if executors is not None:
            for comp, n in executors.items():
                if not isinstance(comp, str) or isinstance(n, bool) or not isinstance(n, int):
                    raise BadRequestError(f"executors must map component ids to counts, got {comp!r}: {n!r}")
        started = core.rebalance(arg(a, "name", str), _wait(a), arg(a, "num_workers", int, None), executors)
        after_change()
        return {"notes": started.notes, "wait_secs": started.seconds_left}

    def download_info(a: dict) -> dict:
        path = _download_path(a)
        return {"size": path.stat().st_size, "checksum": file_checksum(path)}

    def download_chunk(a: dict) -> dict:
        path = _download_path(a)
        offset = arg(a, "offset", int)
        length = min(arg(a, "length", int, CHUNK_BYTES), CHUNK_BYTES)
        if offset < 0 or length < 0:
            raise BadRequestError("offset and length must be >= 0")
        with open(path, "rb") as f:
            f.seek(offset)
            return {"data": f.read(length)}

    def _download_path(a: dict):
        storm_id = arg(a, "id", str)
        name = arg(a, "file", str)
        path = _upload(lambda: store.file_path(storm_id, name))
        if not path.is_file():
            raise NotAliveError(f"no code for topology {storm_id} on this Nimbus")
        return path

    def cluster_info(_a: dict) -> dict:
        info = core.cluster_info()
        if nimbus_rows is not None:
            info = replace(info, nimbuses=tuple(nimbus_rows()))
        return info.to_wire()

    def needs_code(fn: Callable[[dict], Any], key: str) -> Callable[[dict], Any]:
        """A read answered from a topology's code: a standby without it yet sends the client on."""
        def read(a: dict) -> Any:
            if require_leader is not None:
                try:
                    storm_id = core.resolve(arg(a, key, str))
                    has = store.has(storm_id)
                except (NotAliveError, UploadError):
                    has = True  # the read itself answers with the error
                if not has:
                    require_leader()
            return fn(a)
        return read

    handlers = {
        "begin_upload": begin_upload, "upload_chunk": upload_chunk, "submit": submit,
        "kill": kill, "activate": activate, "deactivate": deactivate, "rebalance": rebalance,
        "request_savepoint": request_savepoint, "swap": swap, "swap_status": swap_status,
        "cluster_info": cluster_info,
        "topology_info": needs_code(lambda a: core.topology_info(arg(a, "name", str)).to_wire(), "name"),
        "topology_details": needs_code(lambda a: core.topology_details(arg(a, "name", str)).to_wire(), "name"),
        "nimbus_conf": lambda a: masked(core.conf),
        "download_info": needs_code(download_info, "id"), "download_chunk": needs_code(download_chunk, "id"),
        **log_config_handlers(core),
    }
    if require_leader is not None:
        for op in WRITES:
            handlers[op] = _leader_only(handlers[op], require_leader)
    return handlers


# Refused by a standby Nimbus (Storm's Nimbus.java assertIsLeader).
WRITES = ("begin_upload", "upload_chunk", "submit", "kill", "activate", "deactivate", "rebalance",
          "set_log_config", "request_savepoint", "swap")


def _leader_only(fn: Callable[[dict], Any], require_leader: Callable[[], None]) -> Callable[[dict], Any]:
    def write(a: dict) -> Any:
        require_leader()
        return fn(a)
    return write


def _wait(a: dict) -> float | None:
    wait = arg(a, "wait_secs", (int, float), None)
    # nan and inf too: a deadline that never comes blocked Nimbus's timer for every topology
    if wait is not None and not (0 <= wait < MAX_WAIT_SECS):
        raise BadRequestError(f"wait must be a number of seconds from 0 to {MAX_WAIT_SECS:g}, got {wait}")
    return wait


def _provider_conf(a: dict) -> dict:
    """The state provider config a client sent (a password its storm.yaml has), kept in memory only."""
    config = arg(a, "provider_config", dict, None)
    return {CONFIG_KEY: config} if config else {}


def _record(record: SwapRecord) -> dict:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _upload(fn):
    try:
        return fn()
    except UploadTooLargeError as exc:
        raise TooLargeError(str(exc)) from None
    except UploadError as exc:
        raise BadRequestError(str(exc)) from None
