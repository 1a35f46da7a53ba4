"""The suite's own layout decisions (tests/parallel.py, tests/shared_clusters.py): pure functions."""

from __future__ import annotations

from types import SimpleNamespace

from parallel import split_units
from shared_clusters import last_users


def _item(nodeid: str, *fixtures: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))


def _group(item) -> str:
    return item.nodeid.rsplit("@", 1)[1]


def test_the_shared_clusters_stop_after_the_last_test_of_each_group_that_uses_them():
    items = [_item("a.py::t1@g0", "shared_dev_cluster"), _item("a.py::t2@g0", "secured_dev_cluster"),
             _item("b.py::t3@g0", "tmp_path"),  # later in the group, but no cluster: not a user
             _item("c.py::t4@g1", "shared_dev_clusters"), _item("d.py::t5@g2")]
    assert last_users(items, _group) == {"a.py::t2@g0", "c.py::t4@g1"}
    assert last_users([], _group) == set()


def test_the_longest_units_go_first_into_the_lightest_bucket():
    assert split_units({"a": 10.0, "b": 6.0, "c": 5.0, "d": 1.0}, 2) == {"a": 0, "b": 1, "c": 1, "d": 0}
