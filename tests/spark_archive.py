"""A class-data-sharing archive for the tests' Spark JVMs, built once per machine.

Every Spark JVM of a test run (a sink's in a worker, the CLI's readers, the test processes'
own) loads the same ~15,000 classes from the same jars; most of its start is that loading and
its verification. Java 17 can dump the classes one run loaded (-XX:ArchiveClassesAtExit) and
map them into later runs (-XX:SharedArchiveFile): the same Spark, with the start of a sink's
session and a few writes at about 60% of the CPU (bench figures in tests/DURATIONS.md).

The archive is built in the background at the start of a run, from a run of the sink's own
writer and reader, into a cache keyed by the Java and the Spark jars, and appears by an atomic
rename when complete: a JVM started before then finds no file and runs as without it (Java's
default -Xshare:auto), as does one whose Java or jars differ from the archive's.

usage: python tests/spark_archive.py build ARCHIVE
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The archive's own load warnings go to the JVM's stdout; a JVM that cannot use it says nothing.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def archive_path() -> Path | None:
    """Where this machine's archive is (or will be): named by the java binary, its version and
    the Spark jars (their directory, names and sizes), so a changed Java or Spark never maps a
    stale one. None when there is no java."""
    from executor.sinks._session import java_command  # the java PySpark launches

    java, _how = java_command(os.environ, lambda name: shutil.which(name, path=os.environ.get("PATH")))
    if java is None:
        return None
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    # The jars' own path too: an archive maps only into a JVM with the classpath it was dumped
    # from (another venv's copy of the same jars ran without it, silently: test_bad_sink 205 s ->
    # 647 s in a fresh clone's venv on a machine whose cache held the first checkout's archive).
    jars = _spark_home() / "jars"
    h = hashlib.sha256(f"{os.path.realpath(java)}\n{version}\n{os.path.realpath(jars)}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        h.update(f"{jar.name} {jar.stat().st_size}\n".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "storm-py-tests"
    return cache / f"spark-{h.hexdigest()[:16]}.jsa"


def start_build(archive: Path, jvm_opts: str) -> subprocess.Popen | None:
    """Start building `archive` in the background (None when it is already there). The caller
    stops the process at the end of its run if it is still going (stop_build)."""
    if archive.exists():
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": jvm_opts}
    log = open(archive.parent / "build.log", "w")  # noqa: SIM115 (the child owns it from here)
    try:
        return subprocess.Popen([sys.executable, __file__, "build", str(archive)], env=env,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=tempfile.gettempdir())
    finally:
        log.close()


def stop_build(proc: subprocess.Popen | None) -> None:
    """Stop a build still running (its JVM with it); a partial archive is never renamed in."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _build(archive: Path) -> int:
    """Run the sink's writer and reader once in a JVM that dumps its classes at exit, wait for
    that JVM to exit, and rename the archive in."""
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from executor.sinks._session import SparkSessionHolder
    from executor.sinks._writer import TableWriter
    from executor.sinks.spark import read_table, verify_table

    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    conf = {"topology.name": "class-archive",
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial}"}
    holder = SparkSessionHolder()
    with tempfile.TemporaryDirectory(prefix="storm-py-class-archive-") as d:
        writer = TableWriter(Path(d) / "t", ["word", "n"], "parquet", [], None, "word STRING, n BIGINT",
                             1, conf, holder)
        writer.prepare()
        spark = writer.session()
        for i in range(3):
            writer.write([[f"w{j}", i * j] for j in range(100)])
        verify_table(str(Path(d) / "t"), spark=spark)
        read_table(str(Path(d) / "t"), spark=spark).count()
        gateway = spark.sparkContext._gateway
        writer.close()
        # The JVM dumps the archive as it exits, which it does when its stdin closes.
        proc = gateway.proc
        proc.stdin.close()
        proc.wait(timeout=300)
    if not partial.exists() or partial.stat().st_size == 0:
        print(f"no archive was written to {partial}", file=sys.stderr)
        return 1
    os.replace(partial, archive)
    print(f"wrote {archive} ({archive.stat().st_size >> 20} MB)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit(__doc__.rsplit("usage: ", 1)[1])
    sys.exit(_build(Path(sys.argv[2])))
