"""streamparse's quickstart project on a dev cluster, as its user submits it from the project's
root (`storm-py jar submit topologies/...`): the package holds the project, two workers run its
components through streamparse_run, counts are exact, no subprocess is restarted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from devcluster_helpers import storm_py
from testutil import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "multilang"))
from test_multilang_streamparse import CHECK_BOLT, CHECKED_TOPOLOGY  # noqa: E402


def counts(where: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for path in where.glob("counts-*"):
        for line in path.read_text().splitlines():
            try:
                word, count = json.loads(line)
            except ValueError:
                continue  # a line being written
            out.setdefault(word, []).append(count)
    return out


def test_the_quickstart_project_on_a_dev_cluster(tmp_path, shared_dev_cluster):
    where = tmp_path / "sparse"
    where.mkdir()
    sparse = Path(sys.executable).parent / "sparse"
    made = subprocess.run([str(sparse), "quickstart", "wordcount"], cwd=where, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "LEIN_ROOT": "1"}, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    project = where / "wordcount"
    out_dir = tmp_path / "counts"
    out_dir.mkdir()
    (project / "src" / "bolts" / "check.py").write_text(CHECK_BOLT)
    (project / "topologies" / "wordcount_checked.py").write_text(
        textwrap.dedent(CHECKED_TOPOLOGY.format(out=str(out_dir))))
    cluster = shared_dev_cluster
    submitted = storm_py("jar", "submit", "topologies/wordcount_checked.py", "-c", "topology.workers=2",
                         conf_dir=cluster.conf_dir, cwd=project, timeout=120)
    assert "submitted topology wordcount_checked as " in submitted.stdout, submitted.stdout
    storm_id = next(ln for ln in submitted.stdout.splitlines() if ln.startswith("submitted topology")).rsplit(" ", 1)[1]
    wait_until(lambda: len(counts(out_dir)) == 4 and min(len(v) for v in counts(out_dir).values()) >= 300,
               timeout=120, message=lambda: f"counts from the topology: {dict((k, len(v)) for k, v in counts(out_dir).items())}")
    storm_py("kill", "wordcount_checked", "-w", "0", conf_dir=cluster.conf_dir)
    logs = sorted(cluster.base_dir.rglob(f"workers-artifacts/{storm_id}/*/worker.log"))
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    for word, seen in counts(out_dir).items():
        step = 10 if word == "dog" else 1
        seen = sorted(seen)  # two check tasks' files; each word goes to one of them
        assert seen == [step * (i + 1) for i in range(len(seen))], (word, seen[:20])
    launched = [ln for ln in text.splitlines() if "launched subprocess `streamparse_run" in ln]
    assert len(launched) == 5, launched  # word_spout, count_bolt x2, check_bolt x2: none restarted
    assert len(logs) == 2
