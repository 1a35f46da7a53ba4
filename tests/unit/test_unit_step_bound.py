"""How many inputs a bolt step takes, from the tuples it sends per input (executor/bolt.py)."""

from __future__ import annotations

from executor.bolt import _CONSUME_MAX, _CONSUME_MIN, step_input_bound


def test_a_bolt_that_sends_little_takes_a_full_step():
    assert step_input_bound(0.0) == _CONSUME_MAX      # a count: nothing sent
    assert step_input_bound(1.0) == _CONSUME_MAX      # a filter or a map


def test_a_fanning_bolt_takes_what_keeps_its_step_output_about_the_same():
    assert step_input_bound(10.0) == 100             # a split: ten words a sentence
    assert step_input_bound(4.0) == 250
    assert step_input_bound(1000.0) == _CONSUME_MIN  # never fewer than a few batches' worth
