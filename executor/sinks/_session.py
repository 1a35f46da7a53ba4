"""One SparkSession per worker process, shared by every sink task in it.

The session is created on first use from the topology config (`spark.master`, default
`local[1]`, plus every other `spark.*` key), reference-counted by the sink tasks using it, and
stopped when the last one releases it. A session that existed before (one the user or a test
created, or one handed over with `use_session`) is used but never stopped here: whoever made
it owns it.

PySpark is imported inside these functions only, so importing this module costs nothing.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from typing import Any, Callable, Mapping

from executor.sinks._integrity import PARQUET_CHECKSUMS, summarize_error

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[1]"
MIN_JAVA = 17  # what Spark 4 runs on


class SparkStartError(RuntimeError):
    """Spark cannot start in this process (no usable Java, or the session failed); one line."""

# Applied unless the config sets them: a worker has no use for the web UI (it would also
# grab port 4040+), Spark's console progress bar would scribble over the worker's stderr, and
# adaptive query execution only adds planning work to the sink's one-stage writes (~20% of the
# JVM CPU a small write costs).
_QUIET_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
    # Parquet page checksums: a changed byte in a data page is an error when read, not a changed value.
    **{f"spark.hadoop.{k}": v for k, v in PARQUET_CHECKSUMS.items()},
}


def spark_settings(conf: Mapping[str, Any]) -> dict[str, str]:
    """The Spark settings a worker with topology config `conf` uses, as strings."""
    out = dict(_QUIET_DEFAULTS)
    out["spark.master"] = DEFAULT_MASTER
    name = conf.get("topology.name")
    out["spark.app.name"] = f"storm-py-{name}" if name else "storm-py"
    # Spark creates its warehouse directory (which the sink never uses) in the working directory
    # otherwise, wherever the worker or the CLI happens to run.
    out["spark.sql.warehouse.dir"] = os.path.join(tempfile.gettempdir(), "storm-py-spark-warehouse")
    for key, value in conf.items():
        if isinstance(key, str) and key.startswith("spark.") and value is not None:
            # Spark reads every setting as a string; YAML booleans must become "true"/"false".
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


_QUIET_LOG4J = """\
# Written by storm-py for Spark sessions that only read: errors reach Python as exceptions
# (reported in one line there), so the JVM's own log would only repeat them.
rootLogger.level = off
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %m%n
"""


def reader_shuffle_partitions(master: str) -> int | None:
    """Shuffle partitions for a reading session on `master`: twice its cores for a local one;
    None (Spark's default) for a cluster. A read's checks, counts and dedupe each shuffle: with
    Spark's 200 partitions on local[1], 200 tasks one after the other made `sink show` of a
    small table read for 18 s instead of 8)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    n = m.group(1)
    cores = 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)
    return max(2, 2 * cores)


def quiet_reader_settings(conf: Mapping[str, Any]) -> dict[str, str]:
    """spark_settings(conf) for a session that only reads, with the JVM's log off from its start
    (spark.log.level alone applies only after the startup messages) and few shuffle partitions
    on a local master (unless the config sets them)."""
    out = {**spark_settings(conf), "spark.log.level": "FATAL"}
    partitions = reader_shuffle_partitions(out["spark.master"])
    if partitions is not None:
        out.setdefault("spark.sql.shuffle.partitions", str(partitions))
    if "spark.driver.extraJavaOptions" not in out:
        path = os.path.join(tempfile.gettempdir(), f"storm-py-log4j2-quiet-{os.getuid()}.properties")
        try:
            with open(path, "w", encoding="ascii") as f:
                f.write(_QUIET_LOG4J)
        except OSError:
            log.debug("cannot write %s; Spark logs at its defaults", path, exc_info=True)
        else:
            out["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{path}"
    return out


def java_command(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> tuple[str | None, str]:
    """(the java PySpark would launch, or None; how it was found). A pure function of env:
    PySpark runs $JAVA_HOME/bin/java when JAVA_HOME is set, else the `java` on PATH."""
    home = env.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        ok = os.path.isfile(java) and os.access(java, os.X_OK)
        return (java if ok else None), f"JAVA_HOME={home}" + ("" if ok else f", no executable {java}")
    java = which("java")
    return java, ("`java` on PATH" if java else "JAVA_HOME unset, no `java` on PATH")


def java_major(version_text: str) -> int | None:
    """The major version in `java -version` output ('1.8.0_292' -> 8, '17.0.15' -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


_java_ok: dict[tuple[str | None, str | None], str | None] = {}


def java_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why Spark cannot start on this machine's Java (a phrase), or None. Checked once per
    JAVA_HOME and PATH per process (it runs `java -version`)."""
    env = os.environ if env is None else env
    key = (env.get("JAVA_HOME"), env.get("PATH"))
    if key in _java_ok:
        return _java_ok[key]
    java, how = java_command(env, lambda name: shutil.which(name, path=env.get("PATH")))
    problem = None
    if java is None:
        problem = f"no usable Java ({how}); Spark needs Java {MIN_JAVA}+"
    else:
        try:
            out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
            major = java_major(out.stderr + out.stdout)
        except (OSError, subprocess.SubprocessError) as exc:
            problem = f"cannot run {java} ({how}): {exc}; Spark needs Java {MIN_JAVA}+"
        else:
            if major is None or out.returncode != 0:
                problem = f"{java} -version failed ({how}); Spark needs Java {MIN_JAVA}+"
            elif major < MIN_JAVA:
                problem = f"{java} is Java {major} ({how}); Spark needs Java {MIN_JAVA}+"
    _java_ok[key] = problem
    return problem


def _build_session(settings: Mapping[str, str]):
    """Start a SparkSession; SparkStartError (one line) when Java is missing or the start fails."""
    problem = java_problem()
    if problem:
        raise SparkStartError(problem)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # py4j and PySpark errors share no base class
        log.debug("SparkSession start failed", exc_info=True)
        raise SparkStartError(f"starting Spark (master {settings.get('spark.master')}) failed: "
                              f"{summarize_error(exc)}") from None


def _existing_session():
    """The session this process already has, if any (active, or the default one)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except PySparkException:
        return None


class SparkSessionHolder:
    """A refcounted, lazily created SparkSession. Thread-safe."""

    def __init__(self, build: Callable[[Mapping[str, str]], Any] = _build_session,
                 existing: Callable[[], Any] = _existing_session):
        self._build = build
        self._existing = existing
        self._lock = threading.Lock()
        self._session = None
        self._owned = False
        self._external = None
        self._refs = 0

    @property
    def refs(self) -> int:
        return self._refs

    @property
    def session(self):
        """The session held now (None when no sink task holds one)."""
        return self._session

    def use(self, session) -> None:
        """Use `session` for every sink task of this process from now on; never stop it."""
        with self._lock:
            self._external = session

    def acquire(self, conf: Mapping[str, Any]):
        """Return the process's session, creating it from `conf` on first use. Pair with release()."""
        with self._lock:
            if self._session is None:
                if self._external is not None:
                    self._session, self._owned = self._external, False
                else:
                    found = self._existing()
                    if found is not None:
                        log.info("Spark sink: using the SparkSession this process already has")
                        self._session, self._owned = found, False
                    else:
                        settings = spark_settings(conf)
                        log.info("Spark sink: starting a SparkSession (master %s)", settings["spark.master"])
                        # Held under the lock on purpose: other sink tasks of this worker wait for
                        # the one session instead of racing to start JVMs of their own.
                        self._session, self._owned = self._build(settings), True
            self._refs += 1
            return self._session

    def release(self) -> None:
        """Drop one reference; stop the session when the last goes and this holder created it."""
        with self._lock:
            if self._refs == 0:
                return
            self._refs -= 1
            if self._refs:
                return
            session, owned = self._session, self._owned
            self._session, self._owned = None, False
            if session is not None and owned:
                log.info("Spark sink: last sink task released the SparkSession; stopping it")
                try:
                    session.stop()
                except Exception:  # py4j errors after the JVM died have no common base class
                    log.exception("Spark sink: stopping the SparkSession failed")


sessions = SparkSessionHolder()


def use_session(session) -> None:
    """Make the sink tasks of this process use an existing SparkSession (which they will not stop)."""
    sessions.use(session)
