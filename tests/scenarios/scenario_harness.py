"""One interface over LocalCluster and a dev cluster for the scenario suite: submit a topology
file with a config, poll its results (records its components write under a results directory,
see topologies/scenario_parts.py), steer it through control files, kill it.

"local" loads the file in this process and runs it on a LocalCluster; "dev" packages the file's
directory and submits it to a DevCluster through Nimbus's RPC, as `storm-py jar submit FILE -c
key=value` does (the package carries the file's `config`, the RPC the `-c` values)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from testutil import wait_until

TOPOLOGIES = Path(__file__).resolve().parent / "topologies"
RESULTS_KEY = "scenario.results.dir"  # the key scenario_parts.Recorder reads
# Worker processes take a few seconds to start on a busy 2-core machine; LocalCluster none.
DEADLINE = {"local": 30.0, "dev": 90.0}


def read_records(root: Path) -> list[dict]:
    """Every complete record under `root`, ordered by their (machine-wide monotonic) time."""
    out: list[dict] = []
    for path in root.glob("*.jsonl"):
        text = path.read_text()
        lines = text.split("\n")[:-1]  # a line still being written has no newline yet: skipped
        out.extend(json.loads(line) for line in lines if line)
    out.sort(key=lambda r: r["t"])
    return out


class Results:
    """The records of one run; every call reads the files again."""

    def __init__(self, root: Path):
        self.root = root

    def records(self, component: str | None = None, kind: str | None = None) -> list[dict]:
        return [r for r in read_records(self.root)
                if component in (None, r["component"]) and kind in (None, r["kind"])]

    def ids(self, kind: str, component: str | None = None) -> list:
        """The message ids of the spout records of `kind` ("emit", "ack", "fail"), in order."""
        return [r["id"] for r in self.records(component, kind)]

    def values(self, kind: str, component: str | None = None) -> list[list]:
        return [r["values"] for r in self.records(component, kind)]

    def workers(self) -> set[tuple[int, int]]:
        """(pid, worker port) of every worker any task of the run started in."""
        return {(r["pid"], r["port"]) for r in self.records(kind="start")}

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for r in read_records(self.root):
            key = f"{r['component']}:{r['kind']}"
            counts[key] = counts.get(key, 0) + 1
        return ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no records"


class Run:
    """One submitted scenario topology."""

    def __init__(self, harness: Harness, name: str, results_dir: Path):
        self.harness = harness
        self.name = name
        self.results = Results(results_dir)
        self.killed = False

    def wait(self, predicate: Callable[[], Any], message: Any, timeout: float | None = None) -> Any:
        """Poll `predicate` (failing at once if a component died) until truthy or the deadline;
        the failure names what was awaited, what the components recorded and the cluster's view."""
        def check():
            self.harness.check_healthy(self.name)
            return predicate()

        def text():
            what = message() if callable(message) else message
            return (f"{what}\n  records: {self.results.summary()}\n"
                    f"  {self.harness.mode} cluster: {self.harness.describe(self.name)}")

        return wait_until(check, timeout=timeout or DEADLINE[self.harness.mode], message=text, interval=0.05)

    def release(self, component: str, count: int) -> None:
        """Let `component` (a HoldBolt) process its first `count` held tuples (written atomically)."""
        control = self.results.root / "control"
        control.mkdir(exist_ok=True)
        tmp = control / f".release-{component}.tmp"
        tmp.write_text(str(count))
        os.replace(tmp, control / f"release-{component}")

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            self.harness.kill(self.name)


class Harness:
    """What both modes implement; tests only use submit() and the Run it returns."""

    mode = "?"

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.runs: list[Run] = []
        self.thread_mode: str | None = None  # topology.executor.thread.mode for every submit, if set

    def submit(self, topology_file: str | Path, name: str, conf: dict | None = None) -> Run:
        """Run `topology_file` (a name under topologies/ or a path) as `name` with `conf` over
        the file's own config; the results directory is added to the conf."""
        path = Path(topology_file)
        if not path.is_absolute():
            path = TOPOLOGIES / path
        results = self.tmp / f"results-{name}"
        results.mkdir()
        mode = {"topology.executor.thread.mode": self.thread_mode} if self.thread_mode else {}
        conf = {**mode, **(conf or {}), RESULTS_KEY: str(results)}
        self._submit(path, name, conf)
        run = Run(self, name, results)
        self.runs.append(run)
        return run

    def close(self) -> None:
        """Kill what is still running (every run, even after a failed one)."""
        errors = []
        for run in self.runs:
            try:
                run.kill()
            except Exception as exc:  # noqa: BLE001 - the others must still be killed
                errors.append(f"{run.name}: {exc}")
        self._close()
        assert not errors, "killing the scenario topologies failed: " + "; ".join(errors)

    # -- per mode ------------------------------------------------------------------------------

    def _submit(self, path: Path, name: str, conf: dict) -> None:
        raise NotImplementedError

    def kill(self, name: str) -> None:
        raise NotImplementedError

    def check_healthy(self, name: str) -> None:
        """Raise AssertionError if a component of `name` died or reported an error."""

    def describe(self, name: str) -> str:
        return ""

    def _close(self) -> None:
        pass


class LocalHarness(Harness):
    """The file loaded here and run on a LocalCluster (its public API only)."""

    mode = "local"

    def __init__(self, tmp: Path):
        from daemons.local import LocalCluster

        super().__init__(tmp)
        self.cluster = LocalCluster()

    def _submit(self, path: Path, name: str, conf: dict) -> None:
        from executor.topology_file import load_topology_file

        tf = load_topology_file(path)
        self.cluster.submit_topology(name, {**tf.config, **conf}, tf.topology)

    def kill(self, name: str) -> None:
        self.cluster.kill_topology(name)

    def check_healthy(self, name: str) -> None:
        # errors() (public API) rather than died(): a dying executor reports its error there too.
        errors = self.cluster.errors(name)
        assert not errors, f"components of {name!r} reported errors: {errors[:3]}"

    def topology_details(self, name: str) -> dict:
        return self.cluster.nimbus_calls().call("topology_details", name=name)

    def describe(self, name: str) -> str:
        try:
            return f"stats {self.cluster.component_stats(name)}, errors {self.cluster.errors(name)[-3:]}"
        except Exception as exc:  # noqa: BLE001 - a description must not hide the real failure
            return f"(no description: {exc})"

    def _close(self) -> None:
        self.cluster.shutdown()


class DevHarness(Harness):
    """The file's directory packaged and submitted to a running DevCluster over RPC."""

    mode = "dev"
    ERROR_POLL_SECS = 2.0  # how often a wait asks Nimbus for component errors

    def __init__(self, tmp: Path, dev):
        from cluster_state.config import default_config
        from daemons.rpc.client import client_from_conf

        super().__init__(tmp)
        self.dev = dev
        self.conf = {**default_config(), **dev.conf}
        self.client = client_from_conf(self.conf)
        self.storm_ids: dict[str, str] = {}
        self._errors_checked = 0.0

    def _submit(self, path: Path, name: str, conf: dict) -> None:
        from daemons.cli_jar import build_from_topology_file, upload

        package = self.tmp / f"{name}.zip"
        build_from_topology_file(path, package, self.conf)
        upload_id = upload(self.client, package)
        reply = self.client.call("submit", name=name, upload_id=upload_id, initial_status="active", conf=conf)
        self.storm_ids[name] = reply["id"]

    def kill(self, name: str) -> None:
        """Kill without waiting, then wait until Nimbus forgot it and its workers exited (the
        next scenario gets free slots, and no worker outlives its test)."""
        storm_id = self.storm_ids[name]
        pids = {pid for pid, _port in self._run(name).results.workers()}
        self.client.call("kill", name=name, wait_secs=0)
        wait_until(lambda: name not in self._listed() and not self._workers(storm_id), timeout=60,
                   interval=0.2, message=lambda: f"{name} to be gone from Nimbus and its workers to exit "
                                                 f"(listed: {sorted(self._listed())}, workers: {self._workers(storm_id)})")
        # Every scenario runs >= 2 workers with user components in each: tuples crossed processes.
        # (No records at all: the test failed before its workers ran, and says so itself.)
        assert not pids or len(pids) >= 2, f"{name}: its components all ran in one process {pids}"

    def _run(self, name: str) -> Run:
        return next(r for r in self.runs if r.name == name)

    def _listed(self) -> set[str]:
        return {t["name"] for t in self.client.call("cluster_info")["topologies"]}

    def _workers(self, storm_id: str) -> list[int]:
        from daemons.devcluster import worker_processes

        pids = []
        for i in range(self.dev.n_supervisors):
            for pid, proc in worker_processes(self.dev.supervisor_conf(i)).items():
                try:
                    if storm_id in proc.cmdline():
                        pids.append(pid)
                except Exception:  # noqa: BLE001 - it exited meanwhile
                    continue
        return pids

    def _errors(self, name: str) -> list[str]:
        info = self.client.call("topology_info", name=name)
        return [f"{c['id']}: {c['last_error']['error']}" for c in info.get("components", []) if c.get("last_error")]

    def topology_details(self, name: str) -> dict:
        return self.client.call("topology_details", name=name)

    def check_healthy(self, name: str) -> None:
        now = time.monotonic()
        if now - self._errors_checked < self.ERROR_POLL_SECS:
            return
        self._errors_checked = now
        errors = self._errors(name)
        assert not errors, f"components of {name!r} reported errors: {errors}\n{self._log_tails(name)}"

    def describe(self, name: str) -> str:
        try:
            info = self.client.call("topology_info", name=name)
        except Exception as exc:  # noqa: BLE001 - a description must not hide the real failure
            info = f"(topology_info failed: {exc})"
        return f"topology_info {info}\n{self._log_tails(name)}"

    def _log_tails(self, name: str) -> str:
        storm_id = self.storm_ids.get(name, "?")
        logs = sorted(self.dev.log_dir.glob(f"*/workers-artifacts/{storm_id}/*/worker.log"))
        return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}" for p in logs) or "(no worker logs)"

    def _close(self) -> None:
        self.client.close()
