"""The spout side of the executor's adapter seam (executor/adapters.py, executor/adapting.py):
every kind of spout comes out of adapt_spout a SpoutAdapter with its kind's answers, and a plain
spout's own object is what the executor calls (nothing between it and next_tuple, ack, fail)."""

from __future__ import annotations

import inspect

import pytest

from executor.adapters import PlainSpout, SpoutAdapter, SpoutComponentAdapter, user_component
from executor.adapting import adapt_spout
from executor.checkpoint.api import BaseStatefulSpout
from executor.checkpoint.spout import CheckpointSpout
from executor.checkpoint.spout_side import StatefulSpoutAdapter
from executor.components import Spout
from executor.multilang.component import ShellComponent
from executor.multilang.spout import ShellSpout


class _Plain(Spout):
    def next_tuple(self) -> None:
        pass


class _DuckTyped:  # a spout need not subclass Spout: next_tuple is all a topology checks
    def next_tuple(self) -> None:
        pass


class _Stateful(BaseStatefulSpout):
    def init_state(self, state) -> None:
        self.state = state


def _methods(cls: type) -> dict:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)}


def _shape(fn) -> list:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("user", [_Plain(), _DuckTyped()], ids=["Spout", "duck-typed"])
def test_a_plain_spout_is_called_as_it_is(user):
    adapter = adapt_spout(user)
    assert type(adapter) is PlainSpout
    assert isinstance(adapter, SpoutComponentAdapter)
    assert adapter.spout is user
    assert user_component(adapter) is user
    assert (adapter.runs_while_inactive, adapter.takes_barriers) == (False, False)
    assert adapter.gauges() == {}
    assert adapter.handle_checkpoint("PREPARE", 1) is False
    with pytest.raises(NotImplementedError, match="coordinates no checkpoints"):
        adapter.request_rollback(3)


def test_the_checkpoint_spout_is_its_own_adapter_and_runs_while_inactive():
    cp = CheckpointSpout()
    assert adapt_spout(cp) is cp and cp.spout is cp
    assert isinstance(cp, SpoutComponentAdapter)
    assert (cp.runs_while_inactive, cp.takes_barriers) == (True, False)
    assert cp.gauges()["commits"] == 0


def test_a_stateful_spout_is_wrapped_and_takes_the_checkpoint_steps():
    user = _Stateful()
    adapter = adapt_spout(user)
    assert type(adapter) is StatefulSpoutAdapter
    assert adapter.spout is adapter  # its next_tuple waits for the state
    assert user_component(adapter) is user
    assert (adapter.runs_while_inactive, adapter.takes_barriers) == (False, True)
    assert adapter.handle_checkpoint("PREPARE", 1) is False  # no state yet: the step fails


def test_a_shell_spout_is_its_own_adapter_and_released_after_a_death():
    shell = ShellSpout("python3", "spout.py", outputs=["word"])
    assert adapt_spout(shell) is shell and shell.spout is shell
    assert isinstance(shell, SpoutComponentAdapter)
    assert type(shell).release_on_death is ShellComponent.release_on_death
    shell.release_on_death()  # never opened: nothing to kill


@pytest.mark.parametrize("cls", [SpoutAdapter, PlainSpout, CheckpointSpout, StatefulSpoutAdapter])
def test_what_a_spout_adapter_answers_has_the_protocol_shape(cls):
    declared = _methods(SpoutComponentAdapter)
    assert {"handle_checkpoint", "request_rollback", "gauges", "release_on_death"} <= set(declared)
    for name, fn in declared.items():
        found = inspect.getattr_static(cls, name)
        assert inspect.isfunction(found), f"{cls.__name__}.{name}"
        assert _shape(found) == _shape(fn), f"{cls.__name__}.{name} differs from the protocol"
    for name in ("runs_while_inactive", "takes_barriers"):
        assert isinstance(getattr(cls, name), bool), f"{cls.__name__}.{name}"
    assert isinstance(inspect.getattr_static(cls, "spout"), property)
