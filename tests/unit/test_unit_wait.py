"""Unit tests for executor/wait.py with a fake sleeper (no real sleeping)."""

from __future__ import annotations

import pytest

from cluster_state.config import default_config
from executor.errors import InvalidTopologyError
from executor.wait import (
    BACK_PRESSURE_WAIT,
    BOLT_WAIT,
    SITUATIONS,
    SPOUT_WAIT,
    ParkWait,
    ProgressiveWait,
    make_wait_strategy,
)


class FakeSleeper:
    def __init__(self):
        self.calls: list[float] = []

    def __call__(self, secs: float):
        self.calls.append(secs)


def _run(strategy, n: int, counter: int = 0) -> list[int]:
    counters = []
    for _ in range(n):
        counter = strategy.idle(counter)
        counters.append(counter)
    return counters


# ---------------------------------------------------------------- Progressive


def test_progressive_levels():
    sleep = FakeSleeper()
    w = ProgressiveWait(level1=3, level2=4, level3_secs=0.005, sleeper=sleep)
    counter = 0
    # level 1: returns immediately, no sleeping
    for i in range(3):
        counter = w.idle(counter)
        assert counter == i + 1
    assert sleep.calls == []
    # level 2: sleeper(0) for each of the level2 idles
    for i in range(4):
        counter = w.idle(counter)
        assert counter == 3 + i + 1
    assert sleep.calls == [0, 0, 0, 0]
    # level 3: sleeps level3 seconds and the counter stops growing
    for _ in range(5):
        assert w.idle(counter) == counter
    assert sleep.calls == [0] * 4 + [0.005] * 5


def test_progressive_counter_reset_starts_over():
    sleep = FakeSleeper()
    w = ProgressiveWait(2, 1, 0.001, sleep)
    c = 0
    for _ in range(6):
        c = w.idle(c)
    assert c == 3 and sleep.calls == [0, 0.001, 0.001, 0.001]
    sleep.calls.clear()
    # the executor resets the counter to 0 when work arrives: back to level 1
    assert w.idle(0) == 1 and sleep.calls == []


def test_progressive_zero_counts_goes_straight_to_level3():
    sleep = FakeSleeper()
    w = ProgressiveWait(0, 0, 0.002, sleep)
    assert _run(w, 3) == [0, 0, 0]
    assert sleep.calls == [0.002] * 3


def test_progressive_only_level2():
    sleep = FakeSleeper()
    w = ProgressiveWait(0, 2, 0.01, sleep)
    assert _run(w, 4) == [1, 2, 2, 2]
    assert sleep.calls == [0, 0, 0.01, 0.01]


# ---------------------------------------------------------------- Park


def test_park_sleeps_park_secs_each_time():
    sleep = FakeSleeper()
    w = ParkWait(0.0001, sleep)
    assert _run(w, 5) == [1, 2, 3, 4, 5]
    assert sleep.calls == [0.0001] * 5


def test_park_zero_never_sleeps():
    sleep = FakeSleeper()
    w = ParkWait(0, sleep)
    assert _run(w, 10, counter=7) == [1] * 10
    assert sleep.calls == []


# ---------------------------------------------------------------- make_wait_strategy


def _distinct_conf(strategy: str) -> dict:
    conf = default_config()
    for i, situation in enumerate(SITUATIONS, start=1):
        conf[f"topology.{situation}.wait.strategy"] = strategy
        conf[f"topology.{situation}.wait.progressive.level1.count"] = 10 * i + 1
        conf[f"topology.{situation}.wait.progressive.level2.count"] = 10 * i + 2
        conf[f"topology.{situation}.wait.progressive.level3.sleep.millis"] = 10 * i + 3
        conf[f"topology.{situation}.wait.park.microsec"] = 100 * i
    return conf


@pytest.mark.parametrize("situation,i", [(SPOUT_WAIT, 1), (BOLT_WAIT, 2), (BACK_PRESSURE_WAIT, 3)])
def test_make_progressive_reads_the_situation_keys(situation, i):
    sleep = FakeSleeper()
    w = make_wait_strategy(_distinct_conf("Progressive"), situation, sleep)
    assert isinstance(w, ProgressiveWait)
    assert w.level1 == 10 * i + 1
    assert w.level2 == 10 * i + 2
    assert w.level3_secs == pytest.approx((10 * i + 3) / 1000)
    c = 0
    for _ in range(w.level1 + w.level2 + 1):
        c = w.idle(c)
    assert sleep.calls[-1] == pytest.approx((10 * i + 3) / 1000)


@pytest.mark.parametrize("situation,i", [(SPOUT_WAIT, 1), (BOLT_WAIT, 2), (BACK_PRESSURE_WAIT, 3)])
def test_make_park_reads_the_situation_keys(situation, i):
    sleep = FakeSleeper()
    w = make_wait_strategy(_distinct_conf("Park"), situation, sleep)
    assert isinstance(w, ParkWait)
    assert w.park_secs == pytest.approx(100 * i / 1e6)
    w.idle(0)
    assert sleep.calls == [pytest.approx(100 * i / 1e6)]


def test_make_wait_strategy_per_situation_independently():
    conf = default_config()
    conf["topology.spout.wait.strategy"] = "Park"
    conf["topology.bolt.wait.strategy"] = "Progressive"
    conf["topology.backpressure.wait.strategy"] = "Park"
    sleep = FakeSleeper()
    assert isinstance(make_wait_strategy(conf, SPOUT_WAIT, sleep), ParkWait)
    assert isinstance(make_wait_strategy(conf, BOLT_WAIT, sleep), ProgressiveWait)
    assert isinstance(make_wait_strategy(conf, BACK_PRESSURE_WAIT, sleep), ParkWait)


@pytest.mark.parametrize("name,cls", [
    ("Park", ParkWait), ("park", ParkWait), ("PARK", ParkWait), ("WaitStrategyPark", ParkWait),
    ("org.apache.storm.policy.WaitStrategyPark", ParkWait),
    ("Progressive", ProgressiveWait), ("progressive", ProgressiveWait),
    ("WaitStrategyProgressive", ProgressiveWait),
    ("org.apache.storm.policy.WaitStrategyProgressive", ProgressiveWait),
])
def test_make_wait_strategy_accepts_short_and_storm_class_names(name, cls):
    conf = default_config()
    for situation in SITUATIONS:
        conf[f"topology.{situation}.wait.strategy"] = name
        assert isinstance(make_wait_strategy(conf, situation, FakeSleeper()), cls)


def test_make_wait_strategy_defaults_to_progressive():
    w = make_wait_strategy({}, BOLT_WAIT, FakeSleeper())
    assert isinstance(w, ProgressiveWait)
    w = make_wait_strategy(default_config(), SPOUT_WAIT, FakeSleeper())
    d = default_config()
    assert isinstance(w, ProgressiveWait)
    assert w.level1 == d["topology.spout.wait.progressive.level1.count"]
    assert w.level2 == d["topology.spout.wait.progressive.level2.count"]
    assert w.level3_secs == pytest.approx(d["topology.spout.wait.progressive.level3.sleep.millis"] / 1000)


def test_make_park_with_zero_microsec_never_sleeps():
    conf = default_config()
    conf["topology.bolt.wait.strategy"] = "Park"
    conf["topology.bolt.wait.park.microsec"] = 0
    sleep = FakeSleeper()
    w = make_wait_strategy(conf, BOLT_WAIT, sleep)
    for _ in range(5):
        w.idle(3)
    assert sleep.calls == []


@pytest.mark.parametrize("situation", SITUATIONS)
def test_unknown_strategy_name_raises_naming_the_key(situation):
    conf = {f"topology.{situation}.wait.strategy": "org.apache.storm.policy.WaitStrategySpin"}
    with pytest.raises(InvalidTopologyError) as info:
        make_wait_strategy(conf, situation, FakeSleeper())
    assert f"topology.{situation}.wait.strategy" in str(info.value)
    assert "WaitStrategySpin" in str(info.value)


def test_unknown_situation_raises():
    with pytest.raises(ValueError):
        make_wait_strategy({}, "nowhere", FakeSleeper())


def test_null_strategy_name_means_default():
    w = make_wait_strategy({"topology.bolt.wait.strategy": None}, BOLT_WAIT, FakeSleeper())
    assert isinstance(w, ProgressiveWait)


def test_missing_or_null_level_keys_take_the_packaged_defaults():
    d = default_config()
    conf = {"topology.bolt.wait.strategy": "Progressive",
            "topology.bolt.wait.progressive.level1.count": None,
            "topology.bolt.wait.progressive.level3.sleep.millis": None}
    w = make_wait_strategy(conf, BOLT_WAIT, FakeSleeper())
    assert w.level1 == d["topology.bolt.wait.progressive.level1.count"]
    assert w.level2 == d["topology.bolt.wait.progressive.level2.count"]
    assert w.level3_secs == pytest.approx(d["topology.bolt.wait.progressive.level3.sleep.millis"] / 1000)
    park = make_wait_strategy({"topology.spout.wait.strategy": "Park"}, SPOUT_WAIT, FakeSleeper())
    assert park.park_secs == pytest.approx(d["topology.spout.wait.park.microsec"] / 1e6)


def test_wait_strategy_names_are_the_schemas():
    # One list of accepted names: every name the schema accepts builds a strategy, and the
    # schema refuses a name make_wait_strategy refuses.
    from cluster_state.config import ConfigError, check_value
    from cluster_state.config_schema import WAIT_STRATEGY_NAMES

    for name in WAIT_STRATEGY_NAMES:
        check_value("topology.bolt.wait.strategy", name)
        make_wait_strategy({"topology.bolt.wait.strategy": name}, BOLT_WAIT, FakeSleeper())
    with pytest.raises(ConfigError, match="topology.bolt.wait.strategy"):
        check_value("topology.bolt.wait.strategy", "Spin")
