"""Bad config through the CLI: every malformed value is one `error:` line naming the key, the
value and where it came from (-c, storm.yaml, $STORM_CONF_DIR, the topology file); no Spark, no
ZooKeeper (`localconfvalue` loads the config and nothing else, so it runs in this process:
tests/cli_inprocess.py). A topology file's config is read by `storm-py local`, which imports the
user's file: those run the CLI as a process."""

from __future__ import annotations

import textwrap

import pytest
from cli_inprocess import storm_py
from testutil import one_error_line
from testutil import storm_py as storm_py_process

pytestmark = pytest.mark.timeout(60)


OUT_OF_RANGE = [
    ("topology.max.spout.pending", "-5"),
    ("topology.max.spout.pending", "0"),
    ("topology.message.timeout.secs", "0"),
    ("topology.message.timeout.secs", "-1.5"),
    ("topology.message.timeout.secs", ".nan"),
    ("topology.max.task.parallelism", "0"),
    ("topology.workers", "0"),
    ("topology.acker.executors", "-1"),
    ("topology.executor.receive.buffer.size", "0"),
    ("topology.transfer.buffer.size", "0"),
    ("topology.producer.batch.size", "0"),
    ("topology.executor.receive.buffer.bytes", "0"),
    ("topology.max.tuple.size.bytes", "0"),
    ("topology.spout.recvq.skips", "0"),
    ("topology.stats.sample.rate", "1.5"),
    ("topology.tick.tuple.freq.secs", "0"),
    ("storm.zookeeper.port", "0"),
    ("storm.zookeeper.port", "65536"),
    ("nimbus.thrift.port", "70000"),
    ("supervisor.slots.ports", "[6700, 0]"),
    ("supervisor.slots.ports", "[6700, 6700]"),
    ("topology.spout.wait.strategy", "Spin"),
    ("topology.bolt.wait.progressive.level2.count", "-1"),
    ("topology.backpressure.wait.park.microsec", "-1"),
    ("nimbus.task.timeout.secs", "0"),
    ("supervisor.worker.timeout.secs", "-3"),
    ("storm.package.max.bytes", "0"),
    ("storm.zookeeper.root", "storm"),
    ("storm.zookeeper.servers", "[]"),
    ("nimbus.seeds", "[]"),
    ("spark.remote", "http://127.0.0.1:15002"),
    ("spark.remote", "'sc://'"),
]

WRONG_TYPE = [
    ("topology.workers", "two"),
    ("topology.workers", "true"),
    ("topology.workers", "2.5"),
    ("topology.workers", "null"),
    ("topology.debug", "3"),
    ("topology.max.spout.pending", "1.5"),
    ("topology.message.timeout.secs", "soon"),
    ("storm.zookeeper.servers", "zk1"),
    ("storm.local.dir", "[a, b]"),
    ("topology.stats.sample.rate", "all"),
    ("spark.master", "7"),
]


@pytest.mark.parametrize("key,value", OUT_OF_RANGE + WRONG_TYPE)
def test_refused_value_via_c_names_key_value_and_source(key, value):
    line = one_error_line(storm_py("localconfvalue", key, "-c", f"{key}={value}"), key, "-c")
    assert "must" in line  # says what is allowed


@pytest.mark.parametrize("key,value", [("topology.max.spout.pending", "-5"), ("topology.workers", "0"),
                                       ("topology.debug", "3")])
def test_refused_value_in_storm_yaml_names_the_file(tmp_path, key, value):
    (tmp_path / "storm.yaml").write_text(f"{key}: {value}\n")
    one_error_line(storm_py("localconfvalue", key, "--conf-dir", str(tmp_path)), key, str(tmp_path / "storm.yaml"))


def test_refused_value_from_storm_conf_dir_names_the_env_var(tmp_path):
    (tmp_path / "storm.yaml").write_text("topology.message.timeout.secs: 0\n")
    one_error_line(storm_py("localconfvalue", "topology.workers", env_extra={"STORM_CONF_DIR": str(tmp_path)}),
              "topology.message.timeout.secs", "$STORM_CONF_DIR", str(tmp_path / "storm.yaml"))


def test_storm_conf_dir_not_a_directory(tmp_path):
    one_error_line(storm_py("localconfvalue", "topology.workers", env_extra={"STORM_CONF_DIR": str(tmp_path / "no")}),
              "$STORM_CONF_DIR", str(tmp_path / "no"))


def test_conf_dir_without_storm_yaml(tmp_path):
    one_error_line(storm_py("localconfvalue", "topology.workers", "--conf-dir", str(tmp_path)),
              "--conf-dir", str(tmp_path), "storm.yaml")


def test_duplicate_key_in_storm_yaml_names_key_and_file(tmp_path):
    (tmp_path / "storm.yaml").write_text("topology.workers: 2\ntopology.debug: false\ntopology.workers: 4\n")
    one_error_line(storm_py("localconfvalue", "topology.workers", "--conf-dir", str(tmp_path)),
              "'topology.workers'", str(tmp_path / "storm.yaml"), "twice")


@pytest.mark.parametrize("text", ["- a\n- b\n", "topology.workers: [unclosed\n", "just a string\n",
                                  "\tbad: indent\n"])
def test_malformed_storm_yaml_names_the_file(tmp_path, text):
    (tmp_path / "storm.yaml").write_text(text)
    one_error_line(storm_py("localconfvalue", "topology.workers", "--conf-dir", str(tmp_path)),
              str(tmp_path / "storm.yaml"))


def test_storm_yaml_not_utf8_names_the_file(tmp_path):
    (tmp_path / "storm.yaml").write_bytes(b"topology.workers: \xff\xfe\n")
    one_error_line(storm_py("localconfvalue", "topology.workers", "--conf-dir", str(tmp_path)),
              str(tmp_path / "storm.yaml"))


@pytest.mark.parametrize("servers,entry", [
    ('["zk1", "zk2 zk3"]', "'zk2 zk3'"), ('["zk1,zk2"]', "'zk1,zk2'"), ('["zk1", ""]', "''"),
    ('["zk1:port"]', "'zk1:port'"), ('["zk1", 7]', "7"), ('["zk1:99999"]', "'zk1:99999'"),
])
def test_malformed_zookeeper_servers_entry_names_key_and_entry(tmp_path, servers, entry):
    (tmp_path / "storm.yaml").write_text(f"storm.zookeeper.servers: {servers}\n")
    one_error_line(storm_py("localconfvalue", "storm.zookeeper.servers", "--conf-dir", str(tmp_path)),
              "storm.zookeeper.servers", entry)


@pytest.mark.parametrize("item,names", [
    ("topology.workers", ["topology.workers", "KEY=VALUE"]),
    ("=3", ["=3", "empty key"]),
    ("my.key=[unclosed", ["my.key"]),
    ("my.map={a: 1, a: 2}", ["my.map", "'a'"]),
])
def test_malformed_c_option(item, names):
    one_error_line(storm_py("localconfvalue", "topology.workers", "-c", item), *names)


def test_unknown_localconfvalue_key():
    one_error_line(storm_py("localconfvalue", "no.such.key"), "no.such.key")


def test_localconfvalue_names_where_each_value_came_from(tmp_path):
    (tmp_path / "storm.yaml").write_text("topology.workers: 3\nnimbus.seeds: [a, b]\n")
    out = storm_py("localconfvalue", "topology.workers", "--conf-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "topology.workers: 3"
    assert f"--conf-dir {tmp_path / 'storm.yaml'}" in out.stdout
    env = {"STORM_CONF_DIR": str(tmp_path)}
    out = storm_py("localconfvalue", "nimbus.seeds", env_extra=env)
    assert out.stdout.splitlines()[0] == "nimbus.seeds: [a, b]"
    assert f"$STORM_CONF_DIR/storm.yaml ({tmp_path / 'storm.yaml'})" in out.stdout
    out = storm_py("localconfvalue", "topology.workers", "-c", "topology.workers=5", env_extra=env)
    assert out.stdout.splitlines() == ["topology.workers: 5", "  (from -c)"]
    out = storm_py("localconfvalue", "nimbus.thrift.port", env_extra=env)
    assert out.stdout.splitlines() == ["nimbus.thrift.port: 6627", "  (from packaged defaults)"]
    out = storm_py("localconfvalue", "nimbus.authentication.secret")
    assert out.stdout.splitlines()[0] == "nimbus.authentication.secret: null"


TOPOLOGY = textwrap.dedent('''
    from executor.api import Spout, TopologyBuilder

    class Quiet(Spout):
        def next_tuple(self):
            pass

    b = TopologyBuilder()
    b.set_spout("quiet", Quiet())
    topology = b.create_topology()
    config = CONFIG
''')


@pytest.mark.cluster  # the CLI as a process: it imports the topology file
@pytest.mark.parametrize("conf,key", [
    ({"topology.max.spout.pending": -5}, "topology.max.spout.pending"),
    ({"topology.message.timeout.secs": 0}, "topology.message.timeout.secs"),
    ({"topology.workers": 0}, "topology.workers"),
    ({"topology.acker.executors": -1}, "topology.acker.executors"),
    ({"topology.max.task.parallelism": 0}, "topology.max.task.parallelism"),
    ({"topology.debug": "yes"}, "topology.debug"),
])
def test_refused_value_in_the_topology_files_config_names_the_file(tmp_path, conf, key):
    f = tmp_path / "topo.py"
    f.write_text(TOPOLOGY.replace("CONFIG", repr(conf)))
    one_error_line(storm_py_process("local", str(f), "--duration", "5", cwd=tmp_path, timeout=30),
                   key, "topology file", str(f))


@pytest.mark.cluster  # the CLI as a process: it imports the topology file
def test_refused_c_value_wins_over_a_valid_topology_config(tmp_path):
    f = tmp_path / "topo.py"
    f.write_text(TOPOLOGY.replace("CONFIG", repr({"topology.max.spout.pending": 5})))
    one_error_line(storm_py_process("local", str(f), "--duration", "5", "-c", "topology.max.spout.pending=-1",
                                    cwd=tmp_path, timeout=30),
                   "topology.max.spout.pending", "-c")


def test_a_typo_in_storm_s_namespace_is_one_warning_line_and_a_user_s_own_key_is_silent(tmp_path):
    (tmp_path / "storm.yaml").write_text("wordcount.table: /data/counts\n")
    out = storm_py("localconfvalue", "topology.workers", "-c", "topology.wokers=2", "-c", "mlledger.dir=/x",
                   conf_dir=tmp_path, check=0)
    assert out.stderr.splitlines() == [
        "warning: -c: unknown config key 'topology.wokers' (kept, but storm-py does not read it; did you mean "
        "topology.workers?)"]
