"""One SparkSession per worker process, shared by every sink task in it.

The session is created on first use from the topology config (`spark.master`, default
`local[1]`, plus every other `spark.*` key), reference-counted by the sink tasks using it, and
stopped when the last one releases it. With `spark.remote` (a Spark Connect URL, typically in
each host's storm.yaml) the session is a client of that server instead: no JVM in the worker,
one Spark for every worker of the host (docs/operations.md, "One Spark per host"). A session that existed before (one the user or a test
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
QUIET_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
    # Parquet page checksums: a changed byte in a data page is an error when read, not a changed value.
    **{f"spark.hadoop.{k}": v for k, v in PARQUET_CHECKSUMS.items()},
}


REMOTE = "spark.remote"

# How long a Spark Connect client keeps retrying a server that does not answer (a restart takes
# ~20-30 s) before the call fails: backoffs 0.05, 0.2, 0.8, 3.2, 12.8 s, then 20 s each, ~77 s
# in all. PySpark's default waits at least 10 minutes, which would hold a worker's sink (and
# its `prepare`) that long on a wrong URL.
_CONNECT_RETRY = {"max_retries": 8, "max_backoff": 20_000}


def connect_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings a Spark Connect client can apply to its own session: the URL and the SQL
    runtime keys. The rest (master, UI, memory, Hadoop keys, JVM options) are the server's: it
    was started with them, and a client setting them would only get warnings."""
    out = {REMOTE: settings[REMOTE]}
    out.update((k, v) for k, v in settings.items()
               if k.startswith("spark.sql.") and k != "spark.sql.warehouse.dir")
    return out


def describe_spark(settings: Mapping[str, str]) -> str:
    """Where the Spark of these settings runs, for messages: 'master local[1]' or the server."""
    if settings.get(REMOTE):
        return f"Spark Connect server {settings[REMOTE]}"
    return f"master {settings.get('spark.master', DEFAULT_MASTER)}"


def spark_keys(conf: Mapping[str, Any]) -> dict[str, str]:
    """The config's spark.* keys that are set, as the strings Spark reads (YAML booleans as
    "true"/"false")."""
    return {key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in conf.items()
            if isinstance(key, str) and key.startswith("spark.") and value is not None}


def spark_settings(conf: Mapping[str, Any]) -> dict[str, str]:
    """The Spark settings a worker with topology config `conf` uses, as strings; with
    `spark.remote` set, only those a Spark Connect client applies (connect_settings)."""
    out = dict(QUIET_DEFAULTS)
    out["spark.master"] = DEFAULT_MASTER
    name = conf.get("topology.name")
    out["spark.app.name"] = f"storm-py-{name}" if name else "storm-py"
    # Spark creates its warehouse directory (which the sink never uses) in the working directory
    # otherwise, wherever the worker or the CLI happens to run.
    out["spark.sql.warehouse.dir"] = os.path.join(tempfile.gettempdir(), "storm-py-spark-warehouse")
    out.update(spark_keys(conf))
    return connect_settings(out) if out.get(REMOTE) else out


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
    out = spark_settings(conf)
    remote = bool(out.get(REMOTE))
    if not remote:
        out["spark.log.level"] = "FATAL"  # (a server's log is its own)
    # A Spark Connect server serves the host it runs on (docs/operations.md): sized as local[*].
    partitions = reader_shuffle_partitions("local[*]" if remote else out["spark.master"])
    if partitions is not None:
        out.setdefault("spark.sql.shuffle.partitions", str(partitions))
    if "spark.driver.extraJavaOptions" not in out and not remote:
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


def connect_client_problem() -> str | None:
    """Why PySpark's Spark Connect client cannot load here (a phrase), or None."""
    import warnings

    try:
        with warnings.catch_warnings():
            # PySpark warns of its pandas support on import; the sink never uses pandas.
            warnings.simplefilter("ignore", FutureWarning)
            from pyspark.sql.connect.utils import check_dependencies

            check_dependencies()
    except ImportError as exc:  # PySparkImportError is one
        return (f"spark.remote is set, but PySpark's Spark Connect client cannot load ({summarize_error(exc)}); "
                f"install it with: pip install 'storm-py[spark-connect]'")
    return None


def _connect_session(settings: Mapping[str, str]):
    """A Spark Connect session on the server `settings` names, checked with one call."""
    url = settings[REMOTE]
    problem = connect_client_problem()
    if problem:
        raise SparkStartError(problem)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url)
    for key, value in settings.items():
        if key != REMOTE:
            builder = builder.config(key, value)
    try:
        session = builder.create()
        _bound_retries(session)
        session.version  # noqa: B018 (the first call to the server: fails now if there is none)
    except Exception as exc:  # gRPC and PySpark errors share no base class
        log.debug("Spark Connect session on %s failed", url, exc_info=True)
        raise SparkStartError(f"cannot use the Spark Connect server {url}: {summarize_error(exc)}") from None
    return session


def _bound_retries(session) -> None:
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session.client.set_retry_policies([DefaultPolicy(**_CONNECT_RETRY)])
    except (ImportError, AttributeError, TypeError):  # a PySpark without this seam: its default
        log.debug("cannot bound Spark Connect retries; PySpark's default applies", exc_info=True)


def is_remote(session) -> bool:
    """Whether `session` is a Spark Connect client (not a JVM of this process)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _build_session(settings: Mapping[str, str]):
    """Start a SparkSession; SparkStartError (one line) when Java is missing or the start fails."""
    if settings.get(REMOTE):
        return _connect_session(settings)
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
        raise SparkStartError(f"starting Spark ({describe_spark(settings)}) failed: "
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
        self._conf: dict[str, Any] = {}
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
                self._conf = dict(conf)
            self._refs += 1
            try:
                return self._current()
            except BaseException:
                self._refs -= 1
                raise

    def current(self):
        """The session of the tasks holding a reference: connected again after renew()."""
        with self._lock:
            return self._current()

    def _current(self):
        if self._session is None:
            if self._external is not None:
                self._session, self._owned = self._external, False
            else:
                found = self._existing()
                if found is not None:
                    log.info("Spark sink: using the SparkSession this process already has")
                    self._session, self._owned = found, False
                else:
                    settings = spark_settings(self._conf)
                    log.info("Spark sink: starting a SparkSession (%s)", describe_spark(settings))
                    # Held under the lock on purpose: other sink tasks of this worker wait for
                    # the one session instead of racing to start JVMs of their own.
                    self._session, self._owned = self._build(settings), True
        return self._session

    def renew(self, failed) -> bool:
        """After a call on `failed` raised: when it is a Spark Connect session this holder made,
        drop it so the next current() connects again (a restarted server knows no old
        session, and the client never recovers one). True when dropped."""
        with self._lock:
            if failed is not self._session or not self._owned or not is_remote(failed):
                return False
            self._session, self._owned = None, False
        log.warning("Spark sink: a call to the Spark Connect server failed; the next one connects again")
        try:
            failed.stop()
        except Exception:  # the server may be gone; nothing to release then
            log.debug("stopping the failed Spark Connect session", exc_info=True)
        return True

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
