"""Fixtures shared by the cluster-state tests."""

from __future__ import annotations

import pytest

from cluster_state import mk_storm_cluster_state


@pytest.fixture
def states():
    """mk_storm_cluster_state for the test, all disconnected afterwards."""
    made = []

    def make(conf, **kwargs):
        state = mk_storm_cluster_state(conf, **kwargs)
        made.append(state)
        return state

    yield make
    for state in reversed(made):
        state.disconnect()
