"""`storm-py set_log_level` on a dev cluster, as a user runs it: a topology whose bolt logs at DEBUG
under a logger of its own; the command makes those lines appear in the worker's log within
seconds, the timeout reverts the level, and `-r` reverts it at once."""

from __future__ import annotations

import inspect
import shutil
import textwrap
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from devcluster_helpers import storm_py
from testutil import wait_until

from cluster_state.config import default_config
from daemons.cli_loglevel import set_log_level
from daemons.cli_options import StormGroup
from daemons.nimbus import handlers
from daemons.nimbus.handlers import make_handlers
from daemons.rpc.client import client_from_conf

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)


def _nimbus_serves_log_configs() -> bool:
    try:
        return "set_log_config" in make_handlers(mock.MagicMock(), mock.MagicMock(), 1, lambda: None)
    except Exception:  # make_handlers' signature changed: look for the wiring in its source instead
        return "log_config_handlers(" in inspect.getsource(handlers)


pytestmark.append(pytest.mark.skipif(
    not _nimbus_serves_log_configs(),
    reason="Nimbus does not serve set_log_config yet (log_config_handlers not merged into make_handlers)"))

LOGGER = "loglevel_demo.bolts"

COMPONENTS = textwrap.dedent('''
    import logging
    import time

    from executor.api import Bolt, Spout

    log = logging.getLogger("loglevel_demo.bolts")


    class PacedSpout(Spout):
        """A tuple every 50 ms."""

        def declare_output_fields(self, declarer):
            declarer.declare(["n"])

        def open(self, conf, context, collector):
            self.collector, self.n, self.next_at = collector, 0, 0.0

        def next_tuple(self):
            now = time.monotonic()
            if now < self.next_at:
                return
            self.next_at = now + 0.05
            self.n += 1
            self.collector.emit([self.n])


    class ChattyBolt(Bolt):
        """DEBUG on every tuple; INFO on every 10th, so the test sees time pass in the log."""

        def declare_output_fields(self, declarer):
            pass

        def execute(self, tup):
            n = tup.values[0]
            log.debug("debug-line %d", n)
            if n % 10 == 0:
                log.info("info-line %d", n)
''')

TOPOLOGY = textwrap.dedent('''
    from loglevel_demo_components import ChattyBolt, PacedSpout
    from executor.api import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout("paced", PacedSpout())
    builder.set_bolt("chatty", ChattyBolt()).shuffle_grouping("paced")
    topology = builder.create_topology()
    config = {"topology.workers": 1}
''')


def _set_log_level(cluster, *args: str) -> str:
    group = StormGroup("storm-py")
    group.add_command(set_log_level)
    result = CliRunner().invoke(group, ["set_log_level", *args, "--conf-dir", str(cluster.conf_dir)])
    assert result.exit_code == 0, result.output
    return result.output


class WorkerLog:
    def __init__(self, base: Path, storm_id: str):
        self.base, self.storm_id = base, storm_id

    def text(self) -> str:
        logs = sorted(self.base.rglob(f"workers-artifacts/{self.storm_id}/*/worker.log"))
        return logs[0].read_text(encoding="utf-8", errors="replace") if logs else ""

    def wait_for(self, needle: str, after: int = 0, timeout: float = 60) -> int:
        """The offset of `needle`'s first occurrence at or after `after`, once it is there."""
        return wait_until(lambda: self.text().find(needle, after) + 1, timeout=timeout, interval=0.2,
                          message=lambda: f"{needle!r} in the worker log:\n{self.text()[-3000:]}") - 1

    def quiet_after(self, offset: int) -> None:
        """Once the level is reverted at `offset`: from the next INFO marker (a tuple logging as
        the level changed is done by then) through two more, no DEBUG line."""
        start = self.wait_for("info-line", offset)
        end = self.wait_for("info-line", self.wait_for("info-line", start + 1) + 1)
        assert "debug-line" not in self.text()[start:end], self.text()[offset:end]


def test_set_log_level_sets_a_running_worker_s_logger_and_reverts_it(shared_dev_cluster, tmp_path):
    c = shared_dev_cluster
    topo = tmp_path / "topo"
    topo.mkdir()
    (topo / "loglevel_demo_components.py").write_text(COMPONENTS)
    (topo / "topology.py").write_text(TOPOLOGY)
    out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "loglevels", conf_dir=c.conf_dir)
    storm_id = [ln for ln in out.stdout.splitlines() if ln.startswith("submitted topology")][0].rsplit(" ", 1)[1]
    log = WorkerLog(c.base_dir, storm_id)
    log.wait_for("info-line", timeout=120)
    assert "debug-line" not in log.text()

    # Set with a 3 s timeout: DEBUG lines appear, then stop once the worker reverts the level.
    printed = _set_log_level(c, "loglevels", "-l", f"{LOGGER}=DEBUG:3")
    assert printed.strip() == f"topology loglevels: log level of {LOGGER} set to DEBUG for 3 s"
    at = log.wait_for(f"log level of {LOGGER} set to DEBUG (was NOTSET) until ")
    log.wait_for("debug-line", at)
    with client_from_conf({**default_config(), **c.conf}) as nimbus:
        entry = nimbus.call("get_log_config", name="loglevels")["namedLoggerLevels"][LOGGER]
    assert entry["target_level"] == "DEBUG" and entry["timeout"] == 3 and entry["timeout_epoch"] > 0
    reverted = log.wait_for(f"log level of {LOGGER} reset to NOTSET (timeout expired)", at)
    log.quiet_after(reverted)

    # Set without a timeout, then removed with -r: reverted at once.
    _set_log_level(c, "loglevels", "-l", f"{LOGGER}=TRACE")
    at = log.wait_for(f"log level of {LOGGER} set to DEBUG (was NOTSET) with no timeout", reverted)
    log.wait_for("debug-line", at)
    printed = _set_log_level(c, "loglevels", "-r", LOGGER)
    assert printed.strip() == f"topology loglevels: removed the log level of {LOGGER} (back to its reset level)"
    log.quiet_after(log.wait_for(f"log level of {LOGGER} reset to NOTSET (setting removed)", at))
