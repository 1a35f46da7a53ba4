"""Tick tuples configured for the topology or for one component, on a LocalCluster and on the
dev cluster: repeated system ticks carrying the configured interval, to the bolts configured
for them only."""

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("level", ["topology", "component"])
def test_tick_tuples_arrive_at_the_configured_frequency(cluster, level):
    run = cluster.submit(f"ticks_{level}_level.py", f"ticks-{level}")
    r = run.results
    run.wait(lambda: len(r.records("ticks", "tick")) >= 4, "four ticks")
    if level == "topology":
        run.wait(lambda: len(r.records("plain", "tick")) >= 4, "four ticks at the other bolt too")
    # behaviour, not timing: system ticks carrying the configured interval; the spout, never
    # sent a tuple, gives the bolts nothing else.
    ticks = r.records("ticks", "tick") + r.records("plain", "tick")
    assert {(x["source"], x["stream"]) for x in ticks} == {("__system", "__tick")}
    assert {x["values"][0] for x in ticks} == {0.2}
    assert r.records(kind="got") == []
    if level == "component":
        assert r.records("plain", "tick") == []  # only the component configured for them
