"""A dev cluster with the cluster's CurveZMQ keys (`storm-py secure credentials`): a topology
spread over two workers runs with its tuples crossing encrypted links, the CLI reaches Nimbus
with the keys from its conf and is refused without them, naming what to check."""

from __future__ import annotations

import os
import shutil
import textwrap

import pytest
import yaml
from devcluster_helpers import running_dev_cluster, storm_py
from testutil import wait_until

from executor.transport.curve import PUBLIC_KEY, SECRET_KEY

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

FAST = ["-c", "nimbus.monitor.freq.secs=1", "-c", "supervisor.monitor.frequency.secs=1",
        "-c", "supervisor.heartbeat.frequency.secs=1"]

COMPONENTS = '''
import os
import time

from executor.api import Bolt, Spout

OUT = {out!r}


class PidSpout(Spout):
    """Emits its process id with a counter, acked."""

    def declare_output_fields(self, declarer):
        declarer.declare(["v"])

    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        time.sleep(0.002)
        self.n += 1
        value = f"{{os.getpid()}}-{{self.n}}"
        self.collector.emit([value], msg_id=value)


class RecordBolt(Bolt):
    """Writes what it received to received-<its pid> before acking it."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.out = open(os.path.join(OUT, f"received-{{os.getpid()}}"), "a")

    def execute(self, tup):
        self.out.write(f"{{tup.values[0]}}\\n")
        self.out.flush()
        self.collector.ack(tup)
'''

TOPOLOGY = '''
from curve_components import PidSpout, RecordBolt

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("pids", PidSpout(), 1)
builder.set_bolt("record", RecordBolt(), 2).fields_grouping("pids", ["v"])  # (shuffles prefer the local task)
topology = builder.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 50}
'''


def crossed(out) -> list[str]:
    """Values a bolt received from a spout in another process: they crossed a worker link."""
    found = []
    for path in out.glob("received-*"):
        pid = path.name.split("-", 1)[1]
        found += [v for v in path.read_text().split() if v.split("-")[0] != pid]
    return found


def test_tuples_cross_encrypted_links_and_nimbus_refuses_clients_without_the_key(tmp_path):
    keys = yaml.safe_load(storm_py("secure", "credentials", check=0).stdout)
    curve = [f'{k}="{keys[k]}"' for k in (PUBLIC_KEY, SECRET_KEY)]
    out = tmp_path / "out"
    out.mkdir()
    code = tmp_path / "topology"
    code.mkdir()
    (code / "curve_components.py").write_text(textwrap.dedent(COMPONENTS.format(out=str(out))))
    (code / "topology.py").write_text(TOPOLOGY)
    with running_dev_cluster(tmp_path / "dev", "--supervisors", "2", "--slots", "1", *FAST,
                             *[a for kv in curve for a in ("-c", kv)]) as cluster:
        conf = cluster.conf()
        assert conf[PUBLIC_KEY] == keys[PUBLIC_KEY]  # every daemon's conf carries them
        storm_py("jar", "submit", str(code / "topology.py"), "--name", "sealed", conf_dir=cluster.conf_dir, check=0)
        wait_until(lambda: len(crossed(out)) >= 20, timeout=120, interval=0.2,
                   message=lambda: f"tuples received from the other worker:\n{cluster.output()}")
        # The workers' links are CURVE: their logs say nothing was refused among them.
        logs = "".join(p.read_text(errors="replace") for p in (cluster.base / "logs").rglob("worker.log"))
        assert "refused a connection" not in logs and "handshake with" not in logs

        # A client without the keys does not get through to Nimbus, and is told what to check.
        refused = storm_py("list", "-c", f"{PUBLIC_KEY}=null", "-c", f"{SECRET_KEY}=null",
                           "-c", "nimbus.thrift.timeout=3", conf_dir=cluster.conf_dir, check=1)
        assert refused.returncode != 0 and "cannot reach Nimbus" in refused.stderr, refused.stderr
        # said at once (not after the 3 s timeout: the message is not the timeout's), with the keys to set
        assert "it uses the cluster's CURVE keys and this client's config has none" in refused.stderr, refused.stderr
        assert "within 3s" not in refused.stderr, refused.stderr
        other = yaml.safe_load(storm_py("secure", "credentials", check=0).stdout)
        wrong = storm_py("list", *[a for k in (PUBLIC_KEY, SECRET_KEY) for a in ("-c", f'{k}="{other[k]}"')],
                         "-c", "nimbus.thrift.timeout=3", conf_dir=cluster.conf_dir, check=1)
        assert wrong.returncode != 0 and "storm.messaging.curve" in wrong.stderr, wrong.stderr
        listing = storm_py("list", conf_dir=cluster.conf_dir, check=0).stdout
        assert "sealed" in listing and "ACTIVE" in listing, listing
    assert os.listdir(out)
