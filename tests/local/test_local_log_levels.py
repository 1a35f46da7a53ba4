"""Dynamic log levels on LocalCluster: Nimbus's set_log_config reaches the running workers (two,
sharing this process's loggers), which set the level live, revert it when its timeout passes and
at once when it is removed, always back to the level it had before."""

from __future__ import annotations

import logging
import threading

import pytest
from local_helpers import poll

from daemons.local import LocalCluster
from daemons.nimbus.log_config_ops import log_config_handlers
from executor.api import Bolt, Spout, TopologyBuilder

pytestmark = pytest.mark.timeout(60)

LOGGER = "local_log_levels_test.bolt"


class Counter:
    """Tuples the bolt executed, per task (shared by the test and the bolt's task copies)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.n: dict[int, int] = {}

    def add(self, task: int) -> None:
        with self.lock:
            self.n[task] = self.n.get(task, 0) + 1

    def per_task(self) -> dict[int, int]:
        with self.lock:
            return dict(self.n)

    def __deepcopy__(self, memo):
        return self


class TickSpout(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n])


class DebugBolt(Bolt):
    def __init__(self, counter: Counter):
        self.counter = counter

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.log = logging.getLogger(LOGGER)
        self.task = context.this_task_index

    def execute(self, tup):
        self.log.debug("executing %s", tup.values[0])
        self.counter.add(self.task)


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.NOTSET)
        self.debug = 0

    def emit(self, record):
        if record.levelno == logging.DEBUG:
            self.debug += 1


def test_levels_are_set_live_reverted_after_the_timeout_and_on_removal():
    logger = logging.getLogger(LOGGER)
    assert logger.level == logging.NOTSET
    records, counter = Records(), Counter()
    logger.addHandler(records)
    b = TopologyBuilder()
    b.set_spout("spout", TickSpout())
    b.set_bolt("bolt", DebugBolt(counter), 2).shuffle_grouping("spout")
    try:
        with LocalCluster() as cluster:
            # plain shuffles: both bolt tasks (one per worker) must get tuples, which a
            # locality-aware shuffle would keep in the spout's worker
            cluster.submit_topology("levels", {"topology.workers": 2, "topology.max.spout.pending": 100,
                                               "topology.disable.loadaware.messaging": True},
                                    b.create_topology())
            ops = log_config_handlers(cluster.nimbus.core)

            def more_executed() -> None:
                """Every bolt task executes two more tuples: the first may have passed its
                level check before the level changed (and logs after it), the second started
                after the change. A total over both tasks is not enough: one task can run
                hundreds of tuples while the other waits for the GIL mid-`debug`."""
                start = counter.per_task()
                poll(lambda: all(counter.per_task().get(t, 0) >= start.get(t, 0) + 2 for t in (0, 1)),
                     message="each bolt task to execute two more tuples")

            more_executed()
            assert records.debug == 0

            ops["set_log_config"]({"name": "levels", "named_logger_levels": {LOGGER: {"target_level": "DEBUG",
                                                                                     "timeout": 2}}})
            poll(lambda: records.debug > 0, message="DEBUG records after set_log_config")
            assert logger.level == logging.DEBUG
            # Back to NOTSET (the level it had), not DEBUG: the second worker did not take the
            # first one's DEBUG for the level to revert to.
            poll(lambda: logger.level == logging.NOTSET, timeout=15, message="the revert after the timeout")
            more_executed()  # a tuple that was logging as the level changed is done by now
            after = records.debug
            more_executed()
            assert records.debug == after

            ops["set_log_config"]({"name": "levels", "named_logger_levels": {LOGGER: {"target_level": "TRACE"}}})
            poll(lambda: records.debug > after, message="DEBUG records after a set without timeout")
            ops["set_log_config"]({"name": "levels", "named_logger_levels": {LOGGER: {"target_level": None}}})
            poll(lambda: logger.level == logging.NOTSET, message="the revert on removal")
            more_executed()
            after = records.debug
            more_executed()
            assert records.debug == after
    finally:
        logger.removeHandler(records)
        logger.setLevel(logging.NOTSET)
