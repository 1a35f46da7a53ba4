"""The word count on a dev cluster for a long run: what its Spark table looks like as it ages.

Starts `storm-py dev-cluster` (2 supervisors), submits examples/word_count on 2 workers writing
a fresh table, and every --every seconds prints the table's state (committed batches, the
directories and files a read opens, directories on disk, log files); at the end it kills the
topology and times `storm-py sink show` and `top_words.py` on the table. One JSON line each.

usage: python bench/wordcount_table.py [--minutes 30] [--every 300] [--dir DIR] [-c KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from daemons.devcluster import DevCluster  # noqa: E402
from executor.sinks import _log as G  # noqa: E402
from executor.sinks.spark import table_stats  # noqa: E402


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def cli(*args: str, timeout: float = 3600) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - t0, out


def state(table: Path) -> dict:
    stats = table_stats(table)
    on_disk = sum(1 for n in os.listdir(table) if n.startswith("storm_batch_id="))
    compacted = table / "_storm_compacted"
    on_disk += len(os.listdir(compacted)) if compacted.exists() else 0
    return {"batches": len(stats["batches"]), "dirs_read": stats["batch_dirs"] + stats["compacted_dirs"],
            "files_read": stats["files"], "dirs_on_disk": on_disk,
            "log_files": len(os.listdir(G.log_dir(table))) if G.exists(table) else 0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--every", type=float, default=300)
    ap.add_argument("--dir", default=None)
    ap.add_argument("-c", action="append", default=[], metavar="KEY=VALUE", help="topology config (repeatable)")
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="storm-py-bench-wc-table-"))
    table = base / "table"
    common = {"bench": "wordcount_table", "minutes": args.minutes, "conf": args.c}
    dev = DevCluster(base / "dev", supervisors=2, slots=2)
    dev.start()
    try:
        conf = [a for kv in [f"wordcount.table={table}", "topology.workers=2", *args.c] for a in ("-c", kv)]
        _secs, out = cli("-m", "daemons.cli", "jar", "submit", str(REPO / "examples" / "word_count" / "topology.py"),
                         "--name", "wc", *conf, "--conf-dir", str(dev.conf_dir), timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"submit failed: {out.stderr}")
        start = time.monotonic()
        end = start + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(args.every, max(0.0, end - time.monotonic())))
            if table.exists():
                emit({**common, "phase": "running", "elapsed_min": round((time.monotonic() - start) / 60, 1),
                      **state(table)})
        cli("-m", "daemons.cli", "kill", "wc", "-w", "0", "--conf-dir", str(dev.conf_dir), timeout=120)
    finally:
        dev.stop()
    show_secs, out = cli("-m", "daemons.cli", "sink", "show", str(table), "--limit", "0")
    summary = out.stdout.strip().splitlines()[0] if out.returncode == 0 else out.stderr[-500:]
    top_secs, out2 = cli(str(REPO / "examples" / "word_count" / "top_words.py"), str(table), "-n", "3")
    emit({**common, "phase": "end", **state(table), "sink_show_secs": round(show_secs, 1), "sink_show": summary,
          "top_words_secs": round(top_secs, 1), "top_words_ok": out2.returncode == 0})


if __name__ == "__main__":
    main()
