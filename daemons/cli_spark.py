"""`storm-py spark-connect`: one Spark for every worker of a host (a Spark Connect server).

Each worker's Spark sink starts a Spark JVM of its own unless `spark.remote` names a Spark
Connect server; this command runs one in the foreground, with the settings the sink's own
sessions use (no UI, no adaptive planning, Parquet page checksums) and every `spark.*` key of
the config. The process becomes Spark's JVM (SIGTERM or Ctrl-C stops it); its log goes to
`<storm.log.dir>/spark-connect.log`. docs/operations.md, "One Spark per host".
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any, Mapping

import click

from cluster_state import local_layout
from daemons.cli_options import command, common_options, fail

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


def server_settings(conf: Mapping[str, Any], host: str, port: int, master: str) -> dict[str, str]:
    """The server's Spark settings: the sink's quiet defaults, the config's spark.* keys (not
    spark.remote, nor the workers' spark.master), then the address and master given."""
    from executor.sinks._session import QUIET_DEFAULTS, REMOTE, spark_keys

    # WARN: at INFO the server logs every request's whole plan, megabytes an hour for a sink.
    out = {**QUIET_DEFAULTS, "spark.log.level": "WARN"}
    out.update((k, v) for k, v in spark_keys(conf).items() if k not in (REMOTE, "spark.master"))
    out.update({"spark.master": master, "spark.app.name": "storm-py-spark-connect",
                "spark.connect.grpc.binding.address": host, "spark.connect.grpc.binding.port": str(port)})
    return out


def server_command(spark_home: str, settings: Mapping[str, str]) -> list[str]:
    """spark-submit's command line running the Spark Connect server with `settings`."""
    cmd = [os.path.join(spark_home, "bin", "spark-submit"), "--class", SERVER_CLASS]
    for key, value in sorted(settings.items()):
        cmd += ["--conf", f"{key}={value}"]
    return cmd + ["spark-internal"]


def _port_problem(host: str, port: int) -> str | None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


@command("spark-connect")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(1, 65535))
@click.option("--master", default="local[*]", show_default=True,
              help="The server's Spark master (local[N], or spark://HOST:PORT).")
@common_options
def spark_connect(host, port, master, conf):
    """Run a Spark Connect server in the foreground for the Spark sinks of this host's workers
    (set spark.remote: sc://HOST:PORT in their storm.yaml); SIGTERM or Ctrl-C stops it."""
    from pyspark.find_spark_home import _find_spark_home

    from executor.sinks._session import java_problem

    problem = java_problem() or _port_problem(host, port)
    if problem:
        fail(f"spark-connect cannot start: {problem}")
    log_path = local_layout.daemon_log(conf, "spark-connect")
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        fail(f"spark-connect: cannot write its log {log_path}: {exc}")
    cmd = server_command(_find_spark_home(), server_settings(conf, host, port, master))
    click.echo(f"spark-connect starting on sc://{host}:{port} (master {master}); log: {log_path}")
    sys.stdout.flush()
    sys.stderr.flush()
    # The process becomes Spark's JVM (spark-submit and spark-class exec it): a signal to this
    # pid reaches the server itself, and there is no wrapper left to outlive it.
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.execv(cmd[0], cmd)
