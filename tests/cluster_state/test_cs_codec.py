"""Records, their msgpack codec, the path layout, connection settings and ACLs (pure code)."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest
from kazoo.security import make_digest_acl_credential

from cluster_state import (
    SCHEMA_VERSION,
    Assignment,
    DecodeError,
    ErrorInfo,
    LocalAssignment,
    StormBase,
    SupervisorInfo,
    WorkerDeath,
    WorkerHeartbeat,
    paths,
)
from cluster_state.auth import ROLE_TOPOLOGY, acl_entries, credentials, digest_id
from cluster_state.codec import RECORD_EXT, decode_record, decode_value, encode_record, encode_value
from cluster_state.config import ConfigError, default_config
from cluster_state.settings import zk_settings

pytestmark = pytest.mark.timeout(10)

RECORDS = [
    StormBase("wc", 1700000000, "rebalancing", 3, {"spout": 2, "bolt": 4}, prev_status="active",
              topology_action_options={"delay_secs": 30, "num_workers": 3}, owner="alice"),
    Assignment("/nimbus/stormdist/wc-1", {"n1": "h1", "n2": "h2"},
               {(1, 1): ("n1", 6700), (2, 3): ("n2", 6701), (-1, -1): ("n1", 6700)}, {(1, 1): 5, (2, 3): 6}),
    SupervisorInfo(1700000000, "h1", "sup-1", [6700], [6700, 6701], {"rack": "r1"}, 12, version="0.1.0"),
    WorkerHeartbeat("wc-1", [(1, 1), (2, 3)], 6700, 1700000000, 7, {(1, 1): {"acked": {"default": 3}}}),
    ErrorInfo("Traceback ...", 1700000000, "h1", 6700),
    LocalAssignment("wc-1", [[1, 1], (2, 3)]),
    WorkerDeath("wc-1", 6700, 1700000000, "worker w1 on port 6700 exited", exit_code=3,
                error_line="ValueError: bad", log_tail="one\ntwo"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_records_round_trip(record):
    data = encode_record(record)
    decoded = decode_record(data, "/p", type(record))
    assert decoded == record
    assert type(decoded) is type(record)


def test_supervisor_info_carries_worker_deaths_nested():
    deaths = [WorkerDeath("wc-1", 6700, 1700000000, "worker w1 on port 6700 exited", exit_code=1,
                          error_line="ValueError: bad", log_tail="Traceback ...\nValueError: bad"),
              WorkerDeath("wc-1", 6701, 1699999990, "worker w2 on port 6701 exited", signal="SIGKILL"),
              WorkerDeath("wc-2", 6702, 1699999980, "worker w3 on port 6702 timed out: last heartbeat 40s ago")]
    info = SupervisorInfo(1700000000, "h1", "sup-1", [6700], [6700, 6701, 6702], None, 12,
                          worker_restarts=[("wc-1", 6700, 2)], worker_deaths=deaths)
    decoded = decode_record(encode_record(info), "/supervisors/sup-1", SupervisorInfo)
    assert decoded == info and decoded.worker_deaths == tuple(deaths)
    assert all(type(d) is WorkerDeath for d in decoded.worker_deaths)
    assert decoded.worker_deaths[1].exit_code is None and decoded.worker_deaths[1].signal == "SIGKILL"
    # A writer without the field (older storm-py): no deaths.
    old = SupervisorInfo(1, "h", "s", [], [], None, 0)
    assert decode_record(encode_record(old), "/p", SupervisorInfo).worker_deaths == ()


def test_records_are_frozen_and_normalised():
    la = LocalAssignment("wc-1", [[1, 1], [2, 3]])
    assert la.executors == ((1, 1), (2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        la.storm_id = "other"
    info = SupervisorInfo(1, "h", "s", [1, 2], [1, 2, 3], None, 0)
    assert info.used_ports == (1, 2)


@pytest.mark.parametrize("make", [
    lambda: StormBase("wc", 1, "running", 1, {}),                # unknown status
    lambda: StormBase("wc", "1", "active", 1, {}),              # time as text
    lambda: Assignment("/c", {}, {(1, 2, 3): ("n", 1)}, {}),    # not an executor pair
    lambda: Assignment("/c", {}, {(1, 2): ("n", "6700")}, {}),  # port as text
    lambda: WorkerHeartbeat("wc", [(1, 1)], True, 1, 1),        # bool is not a port
    lambda: LocalAssignment("wc", "1-2"),
    lambda: ErrorInfo(None, 1),
    lambda: WorkerDeath("wc", 6700, 1, "exited", exit_code="1"),
    lambda: SupervisorInfo(1, "h", "s", [], [], None, 0, worker_deaths=[{"storm_id": "wc"}]),
])
def test_invalid_records_rejected(make):
    with pytest.raises((TypeError, ValueError)):
        make()


def test_wire_format_is_a_versioned_envelope():
    packed = msgpack.unpackb(encode_record(RECORDS[4]))
    assert isinstance(packed, msgpack.ExtType) and packed.code == RECORD_EXT
    envelope = msgpack.unpackb(packed.data)
    assert envelope["schema"] == SCHEMA_VERSION and envelope["type"] == "ErrorInfo"
    assert envelope["fields"]["error"] == "Traceback ..."


def _envelope(**changes):
    envelope = {"schema": SCHEMA_VERSION, "type": "ErrorInfo",
                "fields": {"error": "e", "time_secs": 1, "host": None, "port": None}}
    envelope.update(changes)
    return msgpack.packb(msgpack.ExtType(RECORD_EXT, msgpack.packb(envelope)))


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (b"\xc1", "not valid msgpack"),
    (encode_record(RECORDS[1])[:-3], "not valid msgpack"),
    (_envelope(schema=SCHEMA_VERSION + 1), "schema"),
    (_envelope(type="Nope"), "unknown record type"),
    (_envelope(fields={"error": "e"}), "invalid ErrorInfo"),
    (_envelope(fields={"error": 5, "time_secs": 1}), "invalid ErrorInfo"),
    (msgpack.packb(msgpack.ExtType(42, b"x")), "extension type 42"),
    (msgpack.packb({"not": "a record"}), "expected a ErrorInfo"),
])
def test_undecodable_data_names_the_path(data, reason):
    with pytest.raises(DecodeError) as info:
        decode_record(data, "/errors/wc-1/bolt/e0000000001", ErrorInfo)
    assert info.value.path == "/errors/wc-1/bolt/e0000000001"
    assert "/errors/wc-1/bolt/e0000000001" in str(info.value)
    assert reason in str(info.value)


def test_unknown_fields_of_same_schema_are_ignored():
    data = _envelope(fields={"error": "e", "time_secs": 1, "added_later": [1, 2]})
    assert decode_record(data, "/p", ErrorInfo) == ErrorInfo("e", 1)


def test_plain_values_with_records_and_int_keys():
    value = {6700: LocalAssignment("wc", [(1, 1)]), "ids": ["a", "b"], (1, 2): {"nested": True}}
    decoded = decode_value(encode_value(value), "/ls")
    assert decoded == {6700: LocalAssignment("wc", [(1, 1)]), "ids": ("a", "b"), (1, 2): {"nested": True}}
    with pytest.raises(TypeError):
        encode_value({"x": object()})


def test_paths_follow_storms_layout():
    assert paths.assignment_path("wc-1") == "/assignments/wc-1"
    assert paths.storm_path("wc-1") == "/storms/wc-1"
    assert paths.supervisor_path("s") == "/supervisors/s"
    assert paths.workerbeat_path("wc-1", "sup-a-1", 6700) == "/workerbeats/wc-1/sup-a-1-6700"
    assert paths.parse_node_port("sup-a-1-6700") == ("sup-a-1", 6700)
    assert paths.error_path("wc-1", "__acker") == "/errors/wc-1/__acker"
    assert paths.error_sequence("e0000000042") == 42 and paths.error_sequence("x") is None
    assert paths.tokenize_path("/assignments/wc-1") == ["assignments", "wc-1"]
    assert paths.parent_path("/a/b/c") == "/a/b" and paths.parent_path("/a") == "/"
    assert paths.normalize_path("a//b/") == "/a/b"
    for bad in ("", ".", "..", "a/b", 7):
        with pytest.raises((ValueError, TypeError)):
            paths.storm_path(bad)
    with pytest.raises(ValueError):
        paths.parse_node_port("no-port-x")
    with pytest.raises(ValueError):
        paths.workerbeat_path("wc", "n", 70000)


def test_zk_settings_from_conf():
    conf = dict(default_config(), **{"storm.zookeeper.servers": ["zk1", "zk2:2182"], "storm.zookeeper.port": 2181,
                                     "storm.zookeeper.root": "/storm-py/"})
    s = zk_settings(conf)
    assert s.connect_string == "zk1:2181,zk2:2182"
    assert s.root == "/storm-py"
    assert s.session_timeout_secs == 20.0 and s.connection_timeout_secs == 15.0
    assert (s.retry_times, s.retry_interval_secs, s.retry_ceiling_secs) == (5, 1.0, 30.0)
    for key, bad in [("storm.zookeeper.servers", []), ("storm.zookeeper.root", "storm"),
                     ("storm.zookeeper.port", "x"), ("storm.zookeeper.retry.times", 1.5)]:
        with pytest.raises(ConfigError, match=key):
            zk_settings(dict(conf, **{key: bad}))


def test_credentials_and_acls():
    conf = default_config()
    assert credentials(conf) is None and acl_entries(conf) is None
    conf["storm.zookeeper.auth.scheme"] = "digest"
    with pytest.raises(ConfigError, match="storm.zookeeper.auth.payload"):
        credentials(conf)
    conf["storm.zookeeper.auth.payload"] = "user:pw"
    assert "pw" not in repr(credentials(conf))
    # As printed by `java -cp zookeeper.jar ...server.auth.DigestAuthenticationProvider user:pw`
    assert digest_id("user:pw") == "user:2Om+GBbT2q/tS6pdvACZbbm7/1A="
    assert digest_id("user:pw") == make_digest_acl_credential("user", "pw")
    entries = acl_entries(conf)
    assert [(e.perms, e.scheme) for e in entries] == [(31, "digest"), (1, "world")]
    assert credentials(conf, ROLE_TOPOLOGY) is None
    with pytest.raises(ConfigError):
        credentials(dict(conf, **{"storm.zookeeper.auth.payload": "no-colon"}))


def test_each_topology_gets_an_identity_of_its_own():
    from cluster_state.auth import SUPER_ACL_KEY, super_acl, topology_of, topology_payload, worker_conf

    conf = dict(default_config(), **{"storm.zookeeper.auth.scheme": "digest",
                                     "storm.zookeeper.auth.payload": "storm-py:s3cret"})
    assert topology_of("/workerbeats/wc-1/host-6700") == "wc-1" and topology_of("/errors/wc-1") == "wc-1"
    assert topology_of("/workerbeats") is None and topology_of("/assignments/wc-1") is None
    a, b = topology_payload("storm-py:s3cret", "wc-1"), topology_payload("storm-py:s3cret", "wc-2")
    assert a.startswith("wc-1:") and a != b and a == topology_payload("storm-py:s3cret", "wc-1")
    assert topology_payload("storm-py:other", "wc-1") != a  # nobody without the secret derives it
    given = worker_conf(conf, "wc-1")
    assert "storm.zookeeper.auth.payload" not in given and "storm.zookeeper.auth.scheme" not in given
    assert given["storm.zookeeper.topology.auth.payload"] == a
    assert given[SUPER_ACL_KEY] == "digest:" + digest_id("storm-py:s3cret")
    # the daemons and the worker agree on the ACL of the topology's nodes; others' nodes differ
    assert acl_entries(given, "/errors/wc-1/spout") == acl_entries(conf, "/errors/wc-1/spout")
    assert acl_entries(conf, "/errors/wc-2/spout") != acl_entries(conf, "/errors/wc-1/spout")
    assert [e.scheme for e in acl_entries(conf, "/assignments/wc-1")] == ["digest", "world"]
    assert super_acl(given) == super_acl(conf)
    with pytest.raises(ConfigError, match=SUPER_ACL_KEY):
        super_acl({SUPER_ACL_KEY: "sasl:nimbus"})
    assert worker_conf(default_config(), "wc-1") == default_config()  # nothing to do without credentials
