"""Nimbus's set_log_config / get_log_config (daemons/nimbus/log_config_ops.py) on a NimbusCore over
an in-memory cluster state with a fake clock, then through a real RPC server and the
set_log_level CLI (in-process, no ZooKeeper)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner
from nimbus_helpers import package, register_supervisor

from cluster_state import InMemoryStore, LogConfig, LogLevel
from cluster_state.config import default_config
from cluster_state.factory import mk_storm_cluster_state
from daemons.cli_loglevel import set_log_level
from daemons.cli_options import StormGroup
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.handlers import make_handlers
from daemons.nimbus.log_config_ops import log_config_handlers
from daemons.rpc.protocol import BadRequestError
from daemons.rpc.server import RpcServer
from executor.errors import NotAliveError

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env(tmp_path):
    conf = {**default_config(), "storm.local.dir": str(tmp_path / "local")}
    cluster = mk_storm_cluster_state(conf, store=InMemoryStore())
    store = CodeStore(tmp_path / "local" / "nimbus")
    store.open()
    core = NimbusCore(conf, cluster, store, clock=Clock())
    core.recover()
    register_supervisor(cluster, "sup-1", "host-a")
    storm_id = core.submit("topo", package(tmp_path))

    class Env:
        pass

    e = Env()
    e.conf, e.cluster, e.store, e.core, e.storm_id, e.root = conf, cluster, store, core, storm_id, tmp_path
    e.ops = log_config_handlers(core)
    yield e
    cluster.disconnect()


def test_set_merges_into_the_topology_s_log_config_and_get_shows_it_as_storm_s_rest_api(env):
    ops, clock = env.ops, env.core.clock
    assert ops["get_log_config"]({"name": "topo"}) == {"namedLoggerLevels": {}}
    assert env.cluster.topology_log_config(env.storm_id) is None

    result = ops["set_log_config"]({"name": "topo", "named_logger_levels": {
        "root": {"target_level": "debug", "timeout": 30}, "my.app": {"target_level": "WARN"}}})
    stored = env.cluster.topology_log_config(env.storm_id)
    assert stored == LogConfig({"ROOT": LogLevel("DEBUG", None, 30, 1_000_030), "my.app": LogLevel("WARN")})
    expected = {"namedLoggerLevels": {
        "ROOT": {"target_level": "DEBUG", "reset_level": "", "timeout": 30, "timeout_epoch": 1_000_030_000},
        "my.app": {"target_level": "WARN", "reset_level": "", "timeout": 0, "timeout_epoch": 0}}}
    assert result == expected
    # By name or by id (the REST API's).
    assert ops["get_log_config"]({"name": "topo"}) == ops["get_log_config"]({"name": env.storm_id}) == expected

    # Later: one logger set again (a new timeout from now), one removed, the others untouched.
    clock.now += 100
    ops["set_log_config"]({"name": env.storm_id, "named_logger_levels": {
        "ROOT": {"target_level": "ERROR", "timeout": 5}, "my.app": {"target_level": ""},
        "never.set": {"target_level": None}, "other": {"target_level": "TRACE", "timeout": 0}}})
    assert env.cluster.topology_log_config(env.storm_id) == LogConfig({
        "ROOT": LogLevel("ERROR", None, 5, 1_000_105), "other": LogLevel("TRACE")})


def test_a_re_set_keeps_the_reset_level_stored_with_the_entry(env):
    env.cluster.set_topology_log_config(env.storm_id, LogConfig({"app": LogLevel("DEBUG", "INFO", 0, 0)}))
    env.ops["set_log_config"]({"name": "topo", "named_logger_levels": {"app": {"target_level": "WARN", "timeout": 2}}})
    assert env.cluster.topology_log_config(env.storm_id).named_logger_level["app"] == \
        LogLevel("WARN", "INFO", 2, 1_000_002)


@pytest.mark.parametrize("args, match", [
    ({"named_logger_levels": {"app": {"target_level": "DEBUG"}}}, "argument 'name' is required"),
    ({"name": "topo"}, "argument 'named_logger_levels' is required"),
    ({"name": "topo", "named_logger_levels": {"app": {"target_level": "LOUD"}}},
     "logger 'app': unknown log level 'LOUD'"),
    ({"name": "topo", "named_logger_levels": {"app": {"target_level": "DEBUG", "timeout": -5}}},
     "logger 'app': timeout must be whole seconds"),
    ({"name": "topo", "named_logger_levels": {" ": {"target_level": "DEBUG"}}}, "ROOT for the root logger"),
])
def test_bad_requests_name_what_is_wrong_and_change_nothing(env, args, match):
    with pytest.raises(BadRequestError, match=match):
        env.ops["set_log_config"](args)
    assert env.cluster.topology_log_config(env.storm_id) is None


def test_a_topology_that_is_not_alive_is_refused(env):
    for op, args in [("set_log_config", {"named_logger_levels": {"app": {"target_level": "DEBUG"}}}),
                     ("get_log_config", {})]:
        with pytest.raises(NotAliveError, match="'ghost' is not alive"):
            env.ops[op]({"name": "ghost", **args})


def test_killing_the_topology_removes_its_log_config_and_orphans_can_be_cleaned_up(env):
    env.ops["set_log_config"]({"name": "topo", "named_logger_levels": {"app": {"target_level": "DEBUG"}}})
    env.cluster.set_topology_log_config("ghost-1-1", LogConfig({"x": LogLevel("INFO")}))
    assert sorted(env.cluster.log_config_topologies()) == sorted([env.storm_id, "ghost-1-1"])
    env.core.kill("topo", 0)
    env.core.fire_timers()
    assert env.cluster.topology_log_config(env.storm_id) is None
    assert env.cluster.log_config_topologies() == ["ghost-1-1"]
    # What Nimbus's cleanup does for topologies that are gone (one line in NimbusCore.cleanup).
    for storm_id in set(env.cluster.log_config_topologies()) - set(env.cluster.active_storms()):
        env.cluster.teardown_log_config(storm_id)
    assert env.cluster.log_config_topologies() == []


def test_the_cli_sets_levels_through_a_nimbus_rpc_server(env, tmp_path):
    handlers = {**make_handlers(env.core, env.store, 1 << 20, lambda: None), **log_config_handlers(env.core)}
    server = RpcServer("127.0.0.1", 0, handlers, name="test-log-config-rpc")
    server.start()
    try:
        conf_dir = tmp_path / "conf"
        conf_dir.mkdir()
        (conf_dir / "storm.yaml").write_text(yaml.safe_dump({"nimbus.seeds": ["127.0.0.1"],
                                                             "nimbus.thrift.port": server.port}))
        group = StormGroup("storm-py")
        group.add_command(set_log_level)
        runner = CliRunner()
        ok = runner.invoke(group, ["set_log_level", "topo", "-l", "my.app=DEBUG:3", "--conf-dir", str(conf_dir)])
        assert ok.exit_code == 0, ok.output
        assert ok.output.strip() == "topology topo: log level of my.app set to DEBUG for 3 s"
        assert env.cluster.topology_log_config(env.storm_id) == LogConfig({"my.app": LogLevel("DEBUG", None, 3,
                                                                                               1_000_003)})
        never = runner.invoke(group, ["set_log_level", "topo", "-r", "never.set", "--conf-dir", str(conf_dir)])
        assert never.exit_code == 1, never.output
        assert never.output.strip() == ("error: topology topo has no log level set for never.set: nothing to remove "
                                        "(loggers with a level set: my.app); nothing was changed")
        assert set(env.cluster.topology_log_config(env.storm_id).named_logger_level) == {"my.app"}
        removed = runner.invoke(group, ["set_log_level", "topo", "-r", "my.app", "--conf-dir", str(conf_dir)])
        assert removed.exit_code == 0, removed.output
        assert removed.output.strip() == "topology topo: removed the log level of my.app (back to its reset level)"
        assert not env.cluster.topology_log_config(env.storm_id).named_logger_level
        gone = runner.invoke(group, ["set_log_level", "nope", "-r", "my.app", "--conf-dir", str(conf_dir)])
        assert gone.exit_code == 1 and gone.output.strip() == "error: topology 'nope' is not alive", gone.output
    finally:
        server.stop()

