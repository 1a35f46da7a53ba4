"""Every grouping at run time across two workers, on a LocalCluster and on the dev cluster (two
worker processes): each consumer task records what it got, checked once every message is acked."""

import collections

import pytest

pytestmark = pytest.mark.timeout(150)

CONSUMERS = ["shuffle", "fields", "all", "global", "none", "local", "pkg", "custom", "direct_sink"]


def test_all_groupings_route_as_specified(cluster):
    run = cluster.submit("groupings.py", "groupings")
    r = run.results
    # A message is acked once every consumer task it went to acked it (after recording it).
    run.wait(lambda: len(r.ids("ack")) == 60, lambda: f"60 messages acked (got {len(r.ids('ack'))})")
    assert sorted(r.ids("ack")) == list(range(60)) and r.ids("fail") == []
    sent = [[f"k{n % 5}", n] for n in range(60)]
    tasks = {c: sorted({x["task"] for x in r.records(c, "start")}) for c in CONSUMERS}
    by = {c: collections.defaultdict(list) for c in CONSUMERS}
    for c in CONSUMERS:
        for x in r.records(c, "got"):
            by[c][x["task"]].append(x["values"])

    def every(c):
        return sorted((v for vs in by[c].values() for v in vs), key=lambda v: v[1])

    for c in ("shuffle", "fields", "global", "none", "local", "pkg", "custom"):
        assert every(c) == sent, c  # each message exactly once
    assert len(by["shuffle"]) == 3 and all(15 <= len(v) <= 25 for v in by["shuffle"].values())
    key_to_task: dict = {}
    for task, vals in by["fields"].items():
        for key, _n in vals:
            assert key_to_task.setdefault(key, task) == task  # one task per key
    assert sorted(by["all"]) == tasks["all"] and all(sorted(v, key=lambda v: v[1]) == sent
                                                     for v in by["all"].values())
    assert list(by["global"]) == [min(tasks["global"])]
    for key in {k for k, _ in sent}:
        assert len({t for t, vals in by["pkg"].items() if any(v[0] == key for v in vals)}) <= 2
    for task, vals in by["custom"].items():
        assert all(tasks["custom"][n % 3] == task for _k, n in vals)
    for task, vals in by["direct_sink"].items():
        assert all(v[0] == task and tasks["direct_sink"][v[1] % 3] == task for v in vals)
    assert sorted(n for _t, n in every("direct_sink")) == list(range(60))
