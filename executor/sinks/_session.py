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
import tempfile
import threading
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[1]"

# Applied unless the config sets them: a worker has no use for the web UI (it would also
# grab port 4040+), Spark's console progress bar would scribble over the worker's stderr, and
# adaptive query execution only adds planning work to the sink's one-stage writes (~20% of the
# JVM CPU a small write costs).
_QUIET_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
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


def _build_session(settings: Mapping[str, str]):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


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
