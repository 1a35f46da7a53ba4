"""Unit tests for cluster_state/config.py: defaults, precedence, types, overrides."""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path

import pytest
import yaml

from cluster_state import config as config_mod
from cluster_state.config import (
    CONF_DIR_ENV,
    PACKAGED_SOURCE,
    ConfigError,
    default_config,
    load_storm_config,
    merge_configs,
    parse_override,
    parse_overrides,
    read_storm_config,
    validate_config,
)
from cluster_state.config_schema import SCHEMA, problem

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGED_DEFAULTS = Path(config_mod.__file__).with_name("defaults.yaml")
_KEY_LINE = re.compile(r"^([A-Za-z][\w.\-]*)\s*:")


@pytest.fixture(autouse=True)
def _no_env_conf_dir(monkeypatch):
    monkeypatch.delenv(CONF_DIR_ENV, raising=False)


def _write_storm_yaml(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "storm.yaml").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(autouse=True)
def _warnings_to_the_log():
    """Config warnings go to the log here, whatever an in-process CLI run set before (the CLI
    prints them instead: setup_logging sets a printer for its process)."""
    config_mod.set_warning_printer(None)
    yield
    config_mod.set_warning_printer(None)


def _unique_key() -> str:
    """An unknown key in a namespace storm-py owns (a typo, as far as it can tell)."""
    return f"topology.no.such.key{uuid.uuid4().hex}"


# ---------------------------------------------------------------- defaults


def test_default_config_has_storm_keys_and_is_a_fresh_copy():
    conf = default_config()
    assert conf["topology.workers"] == 1
    assert conf["topology.acker.executors"] is None
    assert conf["topology.message.timeout.secs"] == 30
    assert conf["topology.debug"] is False
    for situation in ("spout", "bolt", "backpressure"):
        assert f"topology.{situation}.wait.strategy" in conf
        assert f"topology.{situation}.wait.park.microsec" in conf
    conf["topology.workers"] = 99
    assert default_config()["topology.workers"] == 1


def test_defaults_validate_cleanly():
    validate_config(default_config(), "defaults")


def test_every_default_key_has_a_comment_line_directly_above():
    # conf/defaults.yaml is a symlink to this file (tests/test_packaging.py checks the link).
    path = PACKAGED_DEFAULTS
    lines = path.read_text(encoding="utf-8").splitlines()
    keys = []
    for i, line in enumerate(lines):
        m = _KEY_LINE.match(line)
        if not m:
            continue
        keys.append(m.group(1))
        above = lines[i - 1].strip() if i > 0 else ""
        assert above.startswith("#") and len(above.lstrip("#").strip()) > 0, \
            f"{path.name}: key {m.group(1)!r} (line {i + 1}) has no comment line directly above it"
    # the line scan found every key the YAML loader sees
    assert set(keys) == set(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert len(keys) == len(set(keys)), "duplicate keys in defaults"


def test_default_config_matches_packaged_file():
    assert default_config() == yaml.safe_load(PACKAGED_DEFAULTS.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- precedence


def test_precedence_defaults_then_storm_yaml_then_overrides(tmp_path):
    conf_dir = _write_storm_yaml(tmp_path / "conf", (
        "topology.workers: 2\n"
        "topology.debug: true\n"
        "topology.max.spout.pending: 50\n"
    ))
    conf = read_storm_config(conf_dir, {"topology.workers": 3, "topology.message.timeout.secs": 7})
    assert conf["topology.workers"] == 3  # override beats storm.yaml
    assert conf["topology.debug"] is True  # storm.yaml beats defaults
    assert conf["topology.max.spout.pending"] == 50
    assert conf["topology.message.timeout.secs"] == 7  # override beats defaults
    assert conf["topology.spout.recvq.skips"] == default_config()["topology.spout.recvq.skips"]

    only_yaml = read_storm_config(conf_dir)
    assert only_yaml["topology.workers"] == 2
    assert only_yaml["topology.message.timeout.secs"] == 30


def test_read_storm_config_without_conf_dir_is_defaults(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no implicit ./storm.yaml lookup
    _write_storm_yaml(tmp_path, "topology.workers: 5\n")
    assert read_storm_config() == default_config()
    assert read_storm_config(None, {"topology.workers": 4})["topology.workers"] == 4


def test_storm_conf_dir_env_var_is_honored(monkeypatch, tmp_path):
    conf_dir = _write_storm_yaml(tmp_path / "envconf", "topology.workers: 6\n")
    monkeypatch.setenv(CONF_DIR_ENV, str(conf_dir))
    assert read_storm_config()["topology.workers"] == 6
    assert read_storm_config(overrides={"topology.workers": 8})["topology.workers"] == 8


def test_explicit_conf_dir_beats_env_var(monkeypatch, tmp_path):
    env_dir = _write_storm_yaml(tmp_path / "env", "topology.workers: 6\n")
    cli_dir = _write_storm_yaml(tmp_path / "cli", "topology.workers: 9\n")
    monkeypatch.setenv(CONF_DIR_ENV, str(env_dir))
    assert read_storm_config(cli_dir)["topology.workers"] == 9


def test_explicit_conf_dir_without_storm_yaml_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="storm.yaml"):
        read_storm_config(tmp_path)


def test_empty_storm_yaml_is_defaults(tmp_path):
    conf_dir = _write_storm_yaml(tmp_path, "# nothing set\n")
    assert read_storm_config(conf_dir) == default_config()


@pytest.mark.parametrize("text", ["- a\n- b\n", "topology.workers: [unclosed\n"])
def test_malformed_storm_yaml_raises_config_error_naming_file(tmp_path, text):
    conf_dir = _write_storm_yaml(tmp_path, text)
    with pytest.raises(ConfigError, match="storm.yaml"):
        read_storm_config(conf_dir)


def test_merge_configs_later_layers_win_and_are_validated():
    merged = merge_configs(default_config(), None, {"topology.workers": 2}, {},
                           {"topology.workers": 3, "topology.debug": True})
    assert merged["topology.workers"] == 3 and merged["topology.debug"] is True
    assert merged["topology.message.timeout.secs"] == 30
    with pytest.raises(ConfigError, match="topology.workers") as info:
        merge_configs({"topology.workers": 2}, {"topology.workers": "x"}, source="topology 'wc' config")
    assert "topology 'wc' config" in str(info.value)


# ---------------------------------------------------------------- types


@pytest.mark.parametrize("key,value", [
    ("topology.workers", "two"),
    ("topology.workers", True),  # bool given for an int key
    ("topology.workers", 2.5),
    ("topology.debug", 3),
    ("topology.debug", "yes please"),
    ("topology.acker.executors", "one"),
    ("topology.acker.executors", False),
    ("topology.max.spout.pending", 1.5),
    ("topology.tick.tuple.freq.secs", "1s"),
    ("storm.zookeeper.servers", "localhost"),
    ("storm.zookeeper.port", "2181"),
    ("storm.local.dir", 5),
    ("topology.spout.wait.strategy", 1),
    ("topology.stats.sample.rate", "all"),
])
def test_wrong_type_raises_config_error_naming_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        validate_config({key: value})
    assert repr(key) in str(info.value) or key in str(info.value)


@pytest.mark.parametrize("key,value", [
    ("topology.workers", "two"),
    ("topology.debug", 3),
    ("topology.workers", True),
])
def test_wrong_type_in_storm_yaml_and_overrides_names_key_and_source(tmp_path, key, value):
    conf_dir = _write_storm_yaml(tmp_path, yaml.safe_dump({key: value}))
    with pytest.raises(ConfigError) as info:
        read_storm_config(conf_dir)
    assert key in str(info.value) and "storm.yaml" in str(info.value)
    with pytest.raises(ConfigError) as info:
        read_storm_config(None, {key: value})
    assert key in str(info.value)


@pytest.mark.parametrize("key,value", [
    ("topology.workers", 4),
    ("topology.debug", True),
    ("topology.acker.executors", 0),
    ("topology.acker.executors", None),
    ("topology.max.spout.pending", 1000),
    ("topology.tick.tuple.freq.secs", 0.5),
    ("topology.tick.tuple.freq.secs", 2),
    ("topology.message.timeout.secs", 1.5),
    ("topology.stats.sample.rate", 1),
    ("storm.zookeeper.servers", ["zk1", "zk2"]),
    ("storm.local.hostname", "host-a"),
    ("topology.spout.wait.strategy", "org.apache.storm.policy.WaitStrategyPark"),
    ("topology.max.task.parallelism", 1),
    ("topology.stats.sample.rate", 0),
    ("storm.zookeeper.servers", ["zk1:2182", "[::1]:2181", "::1"]),
    ("supervisor.slots.ports", []),
    ("supervisor.worker.shutdown.sleep.secs", 0),
    ("nimbus.task.timeout.secs", 1.5),
])
def test_well_typed_values_pass(key, value):
    validate_config({key: value})


def test_non_string_key_is_rejected():
    with pytest.raises(ConfigError):
        validate_config({3: "x"})


def test_unknown_key_warns_but_is_kept(caplog, tmp_path):
    key = _unique_key()
    caplog.set_level(logging.WARNING, logger="cluster_state.config")
    conf = read_storm_config(None, {key: "value"})
    assert conf[key] == "value"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and key in r.getMessage()]
    assert len(warnings) == 1

    key2 = _unique_key()
    conf_dir = _write_storm_yaml(tmp_path, f"{key2}: [1, 2]\n")
    caplog.clear()
    assert read_storm_config(conf_dir)[key2] == [1, 2]
    assert any(key2 in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)

    key3 = _unique_key()
    caplog.clear()
    assert merge_configs({key3: 1})[key3] == 1
    assert any(key3 in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_internal_open_prefix_and_users_own_keys_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="cluster_state.config")
    validate_config({"topology.name": "wc", "storm.id": "wc-1-1", f"spark.{uuid.uuid4().hex}": "x",
                     f"wordcount.table{uuid.uuid4().hex}": "/data/t", f"mlledger{uuid.uuid4().hex}.dir": "/x"})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_warning_printer_gets_one_line_naming_the_key_and_its_source():
    printed: list[str] = []
    config_mod.set_warning_printer(printed.append)
    try:
        key = _unique_key()
        validate_config({key: 1, f"myapp{uuid.uuid4().hex}.rate": 2}, "storm.yaml")
    finally:
        config_mod.set_warning_printer(None)
    assert printed == [f"storm.yaml: unknown config key {key!r} (kept, but storm-py does not read it; a typo?)"]


def test_an_unknown_key_close_to_a_known_one_names_it():
    printed: list[str] = []
    config_mod.set_warning_printer(printed.append)
    try:
        validate_config({"topology.workerz": 1}, "-c")
    finally:
        config_mod.set_warning_printer(None)
        config_mod._warned.discard("topology.workerz")
    assert printed == ["-c: unknown config key 'topology.workerz' (kept, but storm-py does not read it; "
                       "did you mean topology.workers?)"]


def test_storms_jvm_memory_keys_name_the_keys_that_limit_a_workers_memory():
    # issue 47, item 5: before, only "unknown config key" (a typo?) for a Storm user's -Xmx
    printed: list[str] = []
    config_mod.set_warning_printer(printed.append)
    saved = set(config_mod._warned)
    config_mod._warned.difference_update(config_mod._STORM_MEMORY_KEYS)
    try:
        validate_config({"worker.childopts": "-Xmx512m", "topology.worker.max.heap.size.mb": 768}, "-c")
    finally:
        config_mod.set_warning_printer(None)
        config_mod._warned.clear()
        config_mod._warned.update(saved | set(config_mod._STORM_MEMORY_KEYS))
    assert len(printed) == 2 and all("topology.worker.memory.limit.mb" in p and "supervisor.worker.memory.limit.mb"
                                     in p and "a typo?" not in p for p in printed), printed
    assert printed[0].startswith("-c: 'worker.childopts' is Storm's setting for a worker's JVM")


# ---------------------------------------------------------------- -c overrides


@pytest.mark.parametrize("item,expected", [
    ("topology.workers=3", ("topology.workers", 3)),
    ("topology.workers=-3", ("topology.workers", -3)),
    ("topology.message.timeout.secs=1.5", ("topology.message.timeout.secs", 1.5)),
    ("topology.debug=true", ("topology.debug", True)),
    ("topology.debug=false", ("topology.debug", False)),
    ("storm.zookeeper.servers=[zk1, zk2]", ("storm.zookeeper.servers", ["zk1", "zk2"])),
    ('storm.zookeeper.servers=["a.example", "b.example"]', ("storm.zookeeper.servers", ["a.example", "b.example"])),
    ("storm.local.dir=/tmp/storm", ("storm.local.dir", "/tmp/storm")),
    ("my.key=hello world", ("my.key", "hello world")),
    ('my.key="42"', ("my.key", "42")),
    ("my.key=a=b", ("my.key", "a=b")),
    ("topology.acker.executors=null", ("topology.acker.executors", None)),
    ("my.map={a: 1}", ("my.map", {"a": 1})),
    ("  spaced.key  =7", ("spaced.key", 7)),
    ("my.empty=", ("my.empty", "")),
])
def test_parse_override_yaml_scalars(item, expected):
    assert parse_override(item) == expected


@pytest.mark.parametrize("item", ["novalue", "", "=5", "  =5"])
def test_parse_override_rejects_malformed(item):
    with pytest.raises(ConfigError):
        parse_override(item)


def test_parse_override_invalid_yaml_names_key():
    with pytest.raises(ConfigError, match="my.key"):
        parse_override("my.key=[unclosed")


def test_parse_overrides_later_wins_and_feeds_read_storm_config():
    overrides = parse_overrides(["topology.workers=2", "topology.debug=true", "topology.workers=4"])
    assert overrides == {"topology.workers": 4, "topology.debug": True}
    conf = read_storm_config(None, overrides)
    assert conf["topology.workers"] == 4 and conf["topology.debug"] is True
    assert parse_overrides([]) == {}


def test_parsed_override_with_wrong_type_fails_naming_key():
    with pytest.raises(ConfigError, match="topology.workers"):
        read_storm_config(None, parse_overrides(["topology.workers=two"]))


# ---------------------------------------------------------------- schema


def test_schema_declares_exactly_the_default_keys():
    assert set(SCHEMA) == set(default_config())


@pytest.mark.parametrize("key", sorted(SCHEMA))
def test_every_default_passes_its_own_schema(key):
    assert problem(SCHEMA[key], default_config()[key]) is None


def test_section_13_keys_have_storms_defaults():
    d = default_config()
    keys = ["nimbus.monitor.freq.secs", "nimbus.task.timeout.secs", "nimbus.task.launch.secs",
            "nimbus.supervisor.timeout.secs", "supervisor.heartbeat.frequency.secs",
            "supervisor.monitor.frequency.secs", "supervisor.worker.start.timeout.secs",
            "supervisor.worker.timeout.secs", "supervisor.worker.shutdown.sleep.secs",
            "worker.heartbeat.frequency.secs", "task.heartbeat.frequency.secs", "task.refresh.poll.secs"]
    assert [d[k] for k in keys] == [10, 30, 120, 60, 5, 3, 120, 30, 3, 1, 3, 10]
    assert d["nimbus.seeds"] == ["localhost"] and d["nimbus.thrift.port"] == 6627
    assert d["nimbus.thrift.timeout"] == 10 and d["nimbus.authentication.secret"] is None
    assert d["supervisor.slots.ports"] == [6700, 6701, 6702, 6703]
    assert d["storm.log.dir"] is None and d["storm.package.max.bytes"] == 100 * 1024 * 1024
    assert d["topology.max.tuple.size.bytes"] == 16777216
    assert d["topology.executor.receive.buffer.bytes"] == 67108864


@pytest.mark.parametrize("key,value,allowed", [
    ("topology.max.spout.pending", -5, ">= 1 or null"),
    ("topology.max.spout.pending", 0, ">= 1 or null"),
    ("topology.message.timeout.secs", 0, "> 0"),
    ("topology.message.timeout.secs", float("nan"), "> 0"),
    ("topology.message.timeout.secs", float("inf"), "> 0"),
    ("topology.max.task.parallelism", 0, ">= 1 or null"),
    ("topology.workers", 0, ">= 1"),
    ("topology.workers", None, "null is not allowed"),
    ("topology.acker.executors", -1, ">= 0 or null"),
    ("topology.executor.receive.buffer.size", 0, ">= 1"),
    ("topology.transfer.buffer.size", 0, ">= 1"),
    ("topology.producer.batch.size", 0, ">= 1"),
    ("topology.executor.receive.buffer.bytes", 0, ">= 1"),
    ("topology.max.tuple.size.bytes", 0, ">= 1"),
    ("topology.stats.sample.rate", 1.5, "from 0 to 1"),
    ("topology.stats.sample.rate", -0.1, "from 0 to 1"),
    ("topology.tick.tuple.freq.secs", 0, "> 0"),
    ("storm.zookeeper.port", 0, "65535"),
    ("storm.zookeeper.port", 65536, "65535"),
    ("nimbus.thrift.port", -1, "65535"),
    ("supervisor.slots.ports", [6700, 70000], "65535"),
    ("supervisor.slots.ports", [6700, 6700], "twice"),
    ("topology.bolt.wait.strategy", "Spin", "Progressive or Park"),
    ("topology.spout.wait.progressive.level1.count", -1, ">= 0"),
    ("topology.backpressure.wait.park.microsec", -1, ">= 0"),
    ("nimbus.task.timeout.secs", 0, "> 0"),
    ("nimbus.seeds", [], "non-empty"),
    ("storm.zookeeper.root", "storm", "absolute"),
    ("storm.local.dir", "", "non-empty"),
])
def test_out_of_range_names_key_value_and_what_is_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as info:
        validate_config({key: value}, "topology file t.py config")
    msg = str(info.value)
    assert key in msg and allowed in msg and "topology file t.py config" in msg
    assert ("null" if value is None else repr(value)) in msg


@pytest.mark.parametrize("entry", ["", "  ", "zk1 zk2", "zk1,zk2", "zk1:port", "zk1:0", ":2181", 7, None])
def test_malformed_zookeeper_server_entry_names_key_and_entry(entry):
    with pytest.raises(ConfigError) as info:
        validate_config({"storm.zookeeper.servers": ["zk0", entry]})
    msg = str(info.value)
    assert "storm.zookeeper.servers" in msg and f"entry 1 ({entry!r})" in msg


def test_zk_settings_names_the_malformed_server_entry():
    from cluster_state.settings import zk_settings
    with pytest.raises(ConfigError, match=r"storm.zookeeper.servers.*'bad host'"):
        zk_settings({"storm.zookeeper.servers": ["ok", "bad host"]})


# ---------------------------------------------------------------- duplicate YAML keys


def test_duplicate_key_in_storm_yaml_names_key_and_file(tmp_path):
    conf_dir = _write_storm_yaml(tmp_path, "topology.workers: 2\ntopology.debug: true\ntopology.workers: 3\n")
    with pytest.raises(ConfigError) as info:
        read_storm_config(conf_dir)
    msg = str(info.value)
    assert "'topology.workers'" in msg and str(tmp_path / "storm.yaml") in msg and "line 3" in msg


def test_duplicate_key_in_a_nested_mapping_and_in_c_values():
    with pytest.raises(ConfigError, match="'a'"):
        parse_override("my.map={a: 1, a: 2}")


# ---------------------------------------------------------------- provenance


def test_sources_record_where_each_value_came_from(monkeypatch, tmp_path):
    conf_dir = _write_storm_yaml(tmp_path / "c", "topology.workers: 2\ntopology.debug: true\n")
    loaded = load_storm_config(conf_dir, {"topology.debug": False})
    assert loaded.source_of("topology.workers") == f"--conf-dir {conf_dir / 'storm.yaml'}"
    assert loaded.source_of("topology.debug") == "-c"
    assert loaded.source_of("topology.message.timeout.secs") == PACKAGED_SOURCE
    assert loaded.overrides == {"topology.debug": False}
    monkeypatch.setenv(CONF_DIR_ENV, str(conf_dir))
    env_loaded = load_storm_config()
    assert env_loaded.source_of("topology.workers") == f"$STORM_CONF_DIR/storm.yaml ({conf_dir / 'storm.yaml'})"


def test_error_names_storm_conf_dir_when_the_value_came_from_there(monkeypatch, tmp_path):
    conf_dir = _write_storm_yaml(tmp_path, "topology.max.spout.pending: -5\n")
    monkeypatch.setenv(CONF_DIR_ENV, str(conf_dir))
    with pytest.raises(ConfigError) as info:
        read_storm_config()
    assert "$STORM_CONF_DIR" in str(info.value) and "topology.max.spout.pending" in str(info.value)


def test_storm_conf_dir_that_is_not_a_directory_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv(CONF_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"\$STORM_CONF_DIR"):
        read_storm_config()


def test_storm_conf_dir_without_storm_yaml_is_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv(CONF_DIR_ENV, str(tmp_path))
    assert read_storm_config() == default_config()


def test_unreadable_storm_yaml_names_the_file(tmp_path):
    (tmp_path / "storm.yaml").mkdir()
    with pytest.raises(ConfigError, match="storm.yaml"):
        read_storm_config(tmp_path)


def test_worker_gc_thresholds_are_read_and_applied_and_bad_ones_named():
    import gc

    from executor.gc_policy import KEY, apply_gc_thresholds, gc_thresholds

    assert gc_thresholds(default_config()) == (10000, 10, 10)
    assert gc_thresholds({KEY: None}) is None
    assert gc_thresholds({KEY: [0]}) == (0,)
    before = gc.get_threshold()
    try:
        apply_gc_thresholds({KEY: [12345, 6, 7]})
        assert gc.get_threshold() == (12345, 6, 7)
        apply_gc_thresholds({KEY: None})  # Python's own settings are left alone
        assert gc.get_threshold() == (12345, 6, 7)
    finally:
        gc.set_threshold(*before)
    for bad, words in (([], "1 to 3"), ([1, 2, 3, 4], "1 to 3"), (["a"], "int >= 0"), ("10000", "list")):
        with pytest.raises(ConfigError, match=KEY.replace(".", r"\.")) as err:
            validate_config({KEY: bad}, "test")
        assert words in str(err.value)


def test_a_setting_missing_from_a_conf_is_the_packaged_default():
    from cluster_state.config import setting

    assert setting({}, "topology.worker.receive.overflow.size") == default_config()["topology.worker.receive.overflow.size"]
    assert setting({"topology.worker.receive.overflow.size": 7}, "topology.worker.receive.overflow.size") == 7


def test_the_receive_overflow_is_its_own_bound_and_never_past_an_executor_queue():
    from executor.worker import overflow_limit

    queue = {"topology.executor.receive.buffer.size": 32768}
    assert overflow_limit({**queue, "topology.worker.receive.overflow.size": 2048}) == 2048
    assert overflow_limit({"topology.executor.receive.buffer.size": 256,
                           "topology.worker.receive.overflow.size": 2048}) == 256
    # a topology's conf merged by a Nimbus that predates the key: the packaged default
    assert overflow_limit(queue) == min(32768, default_config()["topology.worker.receive.overflow.size"])


def test_a_workers_links_take_their_depth_from_the_topology_and_bad_values_are_named():
    from executor.worker_process import ProcessRuntime

    t = ProcessRuntime.transport(None, "127.0.0.1", {"topology.transfer.hwm": 3, "topology.transfer.socket.bytes": 65536})
    try:
        assert (t.hwm, t.sndbuf, t.rcvbuf) == (3, 65536, 65536)
    finally:
        t.close()
    t = ProcessRuntime.transport(None, "127.0.0.1", {})  # a conf merged by an older Nimbus: the defaults
    try:
        assert (t.hwm, t.sndbuf) == (default_config()["topology.transfer.hwm"],
                                     default_config()["topology.transfer.socket.bytes"])
    finally:
        t.close()
    t = ProcessRuntime.transport(None, "127.0.0.1", {"topology.transfer.socket.bytes": None})  # the OS's
    try:
        assert t.sndbuf is None and t.rcvbuf is None
    finally:
        t.close()
    for key, value in (("topology.transfer.hwm", 0), ("topology.transfer.socket.bytes", 100)):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            validate_config({key: value})
