"""The recursive shape check of REST answers against Storm's own UI fixtures (tests/storm_ui_api/).

Every field of the fixture must be in the answer with the same JSON type (bool, int, float, str,
list, object; a fixture's null accepts anything), recursively: a list's items are each checked
against the fixture's first item. Objects keyed by data rather than by field names (component
ids, config keys, logger names) are checked value by value against the fixture's first value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "storm_ui_api"

# Paths (dot-joined, lists as []) of objects keyed by data.
DATA_KEYED = {"", "workers[].componentNumTasks", "totalGenericResources",
              "usedGenericResources", "availGenericResources", "namedLoggerLevels"}


# The Prometheus families /metrics must hold (docs/ui.md, "Prometheus: /metrics"), named as
# prometheus-client parses them: counters without their _total suffix.
PROMETHEUS_FAMILIES = (
    "storm_topology_status", "storm_topology_workers", "storm_component_emitted", "storm_component_transferred",
    "storm_component_acked", "storm_component_failed", "storm_component_executed", "storm_component_capacity",
    "storm_component_complete_latency_ms", "storm_component_execute_latency_ms", "storm_component_backpressure",
    "storm_worker_restarts", "storm_supervisor_slots", "storm_supervisor_slots_used", "storm_nimbus_up")


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


# JSON's types as Python decodes them; bool before int (a bool is an int in Python).
_KINDS = ((type(None), "null"), (bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"),
          (dict, "object"))


def _kind(value: Any) -> str:
    return next((name for cls, name in _KINDS if isinstance(value, cls)), type(value).__name__)


def shape_problems(expected: Any, actual: Any, path: str = "", data_keyed: frozenset | set = frozenset()) -> list[str]:
    """Where `actual` does not have the shape of `expected` ([] when it does)."""
    if expected is None:
        return []
    where = path or "<root>"
    if _kind(expected) != _kind(actual):
        return [f"{where}: expected {_kind(expected)}, got {_kind(actual)} {json.dumps(actual)[:80]}"]
    problems: list[str] = []
    if isinstance(expected, dict):
        if path in data_keyed:
            if expected:
                template = next(iter(expected.values()))
                for key, value in actual.items():
                    problems += shape_problems(template, value, f"{path}.{key}".lstrip("."), data_keyed)
            return problems
        for key, value in expected.items():
            sub = f"{path}.{key}" if path else key
            if key not in actual:
                problems.append(f"{sub}: missing")
            else:
                problems += shape_problems(value, actual[key], sub, data_keyed)
    elif isinstance(expected, list) and expected:
        for i, item in enumerate(actual):
            problems += shape_problems(expected[0], item, f"{path}[]", data_keyed)
            if problems:
                problems = [p.replace(f"{path}[]", f"{path}[{i}]", 1) for p in problems]
                break
    return problems


def assert_shape(name: str, actual: Any, data_keyed: set | None = None) -> None:
    keyed = DATA_KEYED if data_keyed is None else data_keyed
    problems = shape_problems(fixture(name), actual, "", keyed if name == "topology-visualization" else keyed - {""})
    assert not problems, f"{name}: " + "; ".join(problems[:10])
