"""How the suite splits over pytest-xdist's workers (a pytest plugin, loaded by tests/conftest.py;
the run is `python3 -m pytest -n 2 --dist loadgroup`, as .ci/run does).

- Each test module goes to one worker whole (its module fixtures start once), and so do the tests
  that share a session resource that is costly to start twice: the shared dev clusters
  (tests/shared_clusters.py) and the sink tests' Spark session (tests/sink/conftest.py).
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
DEFAULT_SECS = 1.0


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return marker.args[0] if marker.args else marker.kwargs["name"]
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in SHARED:
            return SHARED[fixture]
    return item.nodeid.split("::", 1)[0]


# tryfirst: xdist's worker names each test after its xdist_group markers in this same hook, so
# the markers must be there before it runs (a conftest hook runs before a plugin's unless marked).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        name = _group(item)
        groups.setdefault(name, []).append(item)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name))
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        secs = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        secs = {}

    def weight(name: str) -> float:
        files = {i.nodeid.split("::", 1)[0] for i in groups[name]}
        return sum(secs.get(f, DEFAULT_SECS) for f in files)

    order = sorted(groups, key=weight, reverse=True)  # stable: equal weights keep collection order
    items[:] = [item for name in order for item in groups[name]]
