"""How the suite splits over pytest-xdist's workers (a pytest plugin, loaded by tests/conftest.py;
the run is `python3 -m pytest -n WORKERS --dist loadgroup`, as .ci/run does, 2 workers a core).

- Each test module goes to one worker whole (its module fixtures start once). The modules that
  share a session resource that is costly to start (the shared dev clusters,
  tests/shared_clusters.py; the sink tests' Spark session, tests/sink/conftest.py) go to SPLIT
  groups, balanced by their seconds: each worker that takes one starts the resource once. One
  group would be the run's critical path (the dev-cluster modules take ~750 s together, 60% of
  a 2-worker run's wall time), and a resource starts in ~15 s.
- Workers take the longest groups first (their seconds in tests/durations.json, a measured run's;
  a module missing there counts as short), so the last minutes are short modules on both workers
  rather than one long module on one of them. The order is the same in every worker, as xdist
  requires; a run without workers keeps the modules' own order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# Fixtures whose tests share one group: one worker starts the resource.
SHARED = {"shared_dev_cluster": "shared-clusters", "secured_dev_cluster": "shared-clusters",
          "shared_dev_clusters": "shared-clusters", "spark": "spark-session"}
# Groups per shared resource, and whether its tests may part from their module's (no module
# fixtures in the sink modules; the dev-cluster modules' topologies are module fixtures).
SPLIT = {"shared-clusters": (3, False), "spark-session": (2, True)}
DEFAULT_SECS = 1.0


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return marker.args[0] if marker.args else marker.kwargs["name"]
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in SHARED:
            return SHARED[fixture]
    return item.nodeid.split("::", 1)[0]


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def split_units(unit_secs: dict[str, float], parts: int) -> dict[str, int]:
    """Unit (a module or a test) -> one of `parts` buckets, the longest first into the lightest
    (pure; the same in every worker)."""
    load = [0.0] * parts
    out = {}
    for unit in sorted(unit_secs, key=lambda u: (-unit_secs[u], u)):
        i = min(range(parts), key=lambda b: (load[b], b))
        out[unit] = i
        load[i] += unit_secs[unit]
    return out


def _units(items: list[pytest.Item], secs: dict[str, float], by_test: bool) -> dict[str, float]:
    """The seconds of each module of `items`, or of each test (its module's share)."""
    per_module: dict[str, int] = {}
    for item in items:
        per_module[_module(item)] = per_module.get(_module(item), 0) + 1
    if not by_test:
        return {m: secs.get(m, DEFAULT_SECS) for m in per_module}
    return {i.nodeid: secs.get(_module(i), DEFAULT_SECS) / per_module[_module(i)] for i in items}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    # A wrapper's first half runs before every plain implementation whatever the plugins' order:
    # xdist's (remote.py) names each test after the xdist_group markers it finds in its own.
    assign_groups(items)
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    """--dist loadgroup needs xdist's renaming of each test after its group (remote.py sets
    Node._nodeid), which pytest 9.2 ignores (Node.nodeid comes from Node._id there): every test
    was then its own unit, modules ran split over the workers, each with its own shared cluster
    and browser (the UI pages' 401s of a fresh venv, issue 69). pyproject.toml keeps pytest
    below 9.2; a run with another one stops here, saying why, instead of failing at random."""
    if config.getoption("dist", None) != "loadgroup":
        return
    version = tuple(int(p) for p in pytest.__version__.split(".")[:2] if p.isdigit())
    if version >= (9, 2):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} does not keep pytest-xdist's --dist loadgroup groups (tests of one "
            f"module would run split over the workers): install the test extras again (pip install -e '.[test]', "
            f"which keeps pytest below 9.2), or run without -n")


def assign_groups(items: list[pytest.Item]) -> None:
    """Put every item in its xdist group (and, in a worker, the longest groups first)."""
    try:
        secs = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        secs = {}
    named = [(item, _group(item)) for item in items]
    buckets, by_tests = {}, {}
    for shared, (parts, by_test) in SPLIT.items():
        buckets[shared] = split_units(_units([i for i, name in named if name == shared], secs, by_test), parts)
        by_tests[shared] = by_test
    groups = {}
    for item, name in named:
        if name in buckets:
            name = f"{name}-{buckets[name][item.nodeid if by_tests[name] else _module(item)]}"
            # first among the item's own markers: it wins over an explicit "shared-clusters"
            # (the scenarios' dev-cluster parameters carry one)
            item.add_marker(pytest.mark.xdist_group(name), append=False)
        elif item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name))
        groups.setdefault(name, []).append(item)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def weight(name: str) -> float:
        files = {_module(i) for i in groups[name]}
        return sum(secs.get(f, DEFAULT_SECS) for f in files)

    order = sorted(groups, key=weight, reverse=True)  # stable: equal weights keep collection order
    items[:] = [item for name in order for item in groups[name]]
