"""Wait strategies (Storm's WaitStrategyProgressive.java, WaitStrategyPark.java): Progressive (spin, yield, sleep) and Park.

`idle(counter) -> counter` as in Storm's IWaitStrategy. The sleeper is injected: executors
pass a wait on their receive queue, so a "sleep" ends early as soon as input arrives (a
Python thread cannot be unparked otherwise); tests pass a fake.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from cluster_state.config import setting
from cluster_state.config_schema import WAIT_STRATEGY_NAMES
from executor.errors import InvalidTopologyError

Sleeper = Callable[[float], Any]

SPOUT_WAIT = "spout"
BOLT_WAIT = "bolt"
BACK_PRESSURE_WAIT = "backpressure"
SITUATIONS = (SPOUT_WAIT, BOLT_WAIT, BACK_PRESSURE_WAIT)


class ProgressiveWait:
    """Level 1: return at once for level1 idles; level 2: yield (sleeper(0)) for level2
    idles; level 3: sleeper(level3_secs) until the situation changes (counter reset)."""

    def __init__(self, level1: int, level2: int, level3_secs: float, sleeper: Sleeper):
        self.level1 = level1
        self.level2 = level2
        self.level3_secs = level3_secs
        self._sleep = sleeper

    def idle(self, counter: int) -> int:
        if counter < self.level1:
            return counter + 1
        if counter < self.level1 + self.level2:
            self._sleep(0.0)
            return counter + 1
        self._sleep(self.level3_secs)
        return counter


class ParkWait:
    """Always waits park_secs; 0 means return at once."""

    def __init__(self, park_secs: float, sleeper: Sleeper):
        self.park_secs = park_secs
        self._sleep = sleeper

    def idle(self, counter: int) -> int:
        if self.park_secs <= 0:
            return 1
        self._sleep(self.park_secs)
        return counter + 1


def make_wait_strategy(conf: Mapping[str, Any], situation: str, sleeper: Sleeper):
    """The strategy `topology.{situation}.wait.strategy` names, set from its keys in `conf`."""
    if situation not in SITUATIONS:
        raise ValueError(f"unknown wait situation {situation!r}")
    key = f"topology.{situation}.wait.strategy"
    name = _get(conf, key)
    kind = WAIT_STRATEGY_NAMES.get(str(name).lower())
    if kind is None:
        raise InvalidTopologyError(f"config key {key!r}: unknown wait strategy {name!r} (use Progressive or Park)")
    if kind == "park":
        return ParkWait(_get(conf, f"topology.{situation}.wait.park.microsec") / 1e6, sleeper)
    prefix = f"topology.{situation}.wait.progressive"
    return ProgressiveWait(
        int(_get(conf, f"{prefix}.level1.count")),
        int(_get(conf, f"{prefix}.level2.count")),
        _get(conf, f"{prefix}.level3.sleep.millis") / 1e3,
        sleeper,
    )


def _get(conf: Mapping[str, Any], key: str) -> Any:
    # Executors get their conf merged over the packaged defaults; a bare conf (tests, direct
    # callers) falls back to the same packaged value rather than a copy kept here.
    return setting(conf, key)
