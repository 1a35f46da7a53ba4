"""`storm-py nimbus` (and the other daemons): run a daemon in the foreground until SIGTERM/Ctrl-C.

A daemon logs to `<storm.log.dir>/<name>.log` (size-capped rotation) at INFO, or at the
level `--log-level` names; the terminal gets one line
saying where it runs, or one `error:` line when it cannot start (port taken, ZooKeeper
unreachable, ...). A clean stop by signal exits 0; a fatal error exits 1.
"""

from __future__ import annotations

import logging
import logging.handlers
from typing import Any, Callable, Mapping

import click

from cluster_state import local_layout
from daemons.cli_options import command, common_options, explicit_log_level, fail
from executor.lifecycle import Service, run_service

log = logging.getLogger(__name__)

LOG_BYTES = 50 * 1024 * 1024
LOG_BACKUPS = 5


def log_to_file(path, level: int = logging.INFO) -> None:
    """Send the process's logging to `path` (rotated); the console keeps only warnings of our
    own CLI (the daemon's story is in its log file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS,
                                                   encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    handler.setLevel(level)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)


def run_daemon(name: str, conf: Mapping[str, Any], make: Callable[[Mapping[str, Any]], Service],
               describe: Callable[[Service], str]) -> None:
    log_path = local_layout.daemon_log(conf, name)
    # A daemon's log file records INFO by default (its story); --log-level, when given, sets it.
    level = getattr(logging, explicit_log_level() or "INFO")
    try:
        log_to_file(log_path, level)
    except OSError as exc:
        fail(f"{name}: cannot write its log {log_path}: {exc}")
    service = make(conf)
    # run_service installs the signal handlers before it starts the service (a SIGTERM during a
    # slow start still stops it cleanly); the announcement comes once it really runs.
    service.when_running(lambda svc: click.echo(f"{describe(svc)}; log: {log_path}"))
    if run_service(service) != 0:
        reason = (service.failure or "stopped after an error").removeprefix("failed to start: ")
        fail(f"{name} {'stopped' if service.ran else 'cannot start'}: {reason} (log: {log_path})")

@command()
@common_options
def nimbus(conf):
    """Run the Nimbus daemon in the foreground (SIGTERM or Ctrl-C stops it)."""
    from daemons.nimbus.daemon import Nimbus

    run_daemon("nimbus", conf, Nimbus, lambda n: f"nimbus running on {n.rpc.host}:{n.port}")


@command()
@common_options
def supervisor(conf):
    """Run the Supervisor daemon in the foreground (SIGTERM or Ctrl-C stops it; its workers keep
    running and are re-adopted when it starts again)."""
    from daemons.supervisor.daemon import Supervisor

    run_daemon("supervisor", conf, Supervisor,
               lambda s: f"supervisor {s.supervisor_id} running on {s.hostname} with slots {list(s.ports)}")


@command()
@common_options
def logviewer(conf):
    """Run the logviewer in the foreground: the worker logs under storm.log.dir on
    logviewer.host:logviewer.port, paged, downloadable, nothing outside the log dir (SIGTERM or
    Ctrl-C stops it)."""
    from daemons.logviewer.daemon import Logviewer

    run_daemon("logviewer", conf, Logviewer, lambda lv: f"logviewer running on {lv.url} serving {lv.root}")


@command()
@common_options
def ui(conf):
    """Run the UI daemon in the foreground: Storm's REST API under /api/v1 and Prometheus /metrics
    on ui.host:ui.port, read from Nimbus (SIGTERM or Ctrl-C stops it)."""
    from daemons.ui.daemon import UiServer

    run_daemon("ui", conf, UiServer, lambda u: f"ui running on {u.url} (Nimbus {u.conf['nimbus.seeds'][0]}:"
                                               f"{u.conf['nimbus.thrift.port']})")
