"""The scenario harness's pure parts: reading the records components append."""

import json

from scenario_harness import Results, read_records


def _line(**r) -> str:
    return json.dumps(r) + "\n"


def test_records_are_merged_across_files_by_time_and_a_half_written_line_is_skipped(tmp_path):
    (tmp_path / "spout-1.jsonl").write_text(_line(component="spout", task=1, kind="emit", t=1, id=0)
                                            + _line(component="spout", task=1, kind="ack", t=4, id=0))
    (tmp_path / "b-2.jsonl").write_text(_line(component="b", task=2, kind="acked", t=3, values=[0])
                                        + '{"component": "b", "task": 2, "ki')  # still being written
    assert [(r["component"], r["kind"]) for r in read_records(tmp_path)] == [
        ("spout", "emit"), ("b", "acked"), ("spout", "ack")]
    results = Results(tmp_path)
    assert results.ids("ack") == [0] and results.values("acked", "b") == [[0]]
    assert results.summary() == "b:acked=1, spout:ack=1, spout:emit=1"
