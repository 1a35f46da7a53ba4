"""Reading Nimbus's `topology_details` answer (pure): its stats records per component, and
`topology_info`'s summary derived from it. Shared by Nimbus, the UI and the CLI, so the answer's
form is read in one place."""

from __future__ import annotations

from typing import Any, Mapping

from executor.stats import component_figures
from executor.stats_record import ExecutorStats, decode_records
from executor.stats_windows import ALL_TIME


def records_by_component(details: Mapping[str, Any],
                         records: Mapping[tuple[int, int], ExecutorStats] | None = None) -> dict[str, list[ExecutorStats]]:
    """topology_details' stats records (decoded here unless given: a garbage one is left out
    with a warning) per component, every component present ([] when none reported)."""
    if records is None:
        records = decode_records(details["id"], {tuple(e["executor"]): e["stats"] for e in details["executors"]})
    out: dict[str, list[ExecutorStats]] = {c["id"]: [] for c in details["components"]}
    for e in details["executors"]:
        rec = records.get(tuple(e["executor"]))
        if rec is not None:
            out.setdefault(e["component"], []).append(rec)
    return out


def info_from_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """topology_info's answer from topology_details' (pure): the records merged per component,
    all time, system streams included."""
    records = records_by_component(details)
    components = []
    for comp in details["components"]:
        execs = [e for e in details["executors"] if e["component"] == comp["id"]]
        figures = component_figures(records[comp["id"]], ALL_TIME, True)
        figures.update(kind=comp["kind"])
        figures.setdefault("executed", 0)
        figures.setdefault("complete_latency_ms", None)
        figures.pop("executors", None)
        errors = details["errors"].get(comp["id"]) or []
        components.append({"id": comp["id"], "tasks": comp["tasks"], **figures,
                           "executors": [{k: e[k] for k in ("executor", "host", "port", "alive")} for e in execs],
                           "last_error": errors[0] if errors else None})
    slots = {(e["node"], e["port"]) for e in details["executors"] if e["node"] is not None}
    return {"name": details["name"], "id": details["id"], "status": details["status"],
            "uptime_secs": details["uptime_secs"], "num_workers": len(slots), "components": components}
