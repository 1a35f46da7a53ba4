"""The worker process entry the supervisor launches:

    python -m executor.worker_main --storm-id ID --supervisor-id SID --port PORT --worker-id WID
                                   --conf-file <storm.local.dir>/workers/WID/supervisor-conf.json

The conf file is the supervisor's effective conf; the topology's own conf (from Nimbus) is read
from the code the supervisor downloaded. Logging goes to
<storm.log.dir>/workers-artifacts/ID/PORT/worker.log (size-capped rotation). Exit code: 0 after
SIGTERM, 1 when the worker cannot start or an executor died.
"""

from __future__ import annotations

import argparse
import json
import logging
import logging.handlers
import sys

from cluster_state import local_layout
from executor.lifecycle import run_service

LOG_BYTES = 50 * 1024 * 1024
LOG_BACKUPS = 3
# The executors' thread holds the GIL whenever it has tuples; every other thread (the local
# heartbeat, ZooKeeper, the log levels) waits up to one switch interval for it at each system
# call. At CPython's 5 ms a heartbeat write (about ten such waits) took 50 ms beside one busy
# thread and 2-3 s with ZooKeeper's retries contending too, long enough for the supervisor to
# kill a healthy worker. 1 ms costs the executors nothing while no other thread waits.
SWITCH_INTERVAL_SECS = 0.001


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executor.worker_main", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storm-id", required=True)
    parser.add_argument("--supervisor-id", required=True)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--conf-file", required=True)
    args = parser.parse_args(argv)
    try:
        with open(args.conf_file, encoding="utf-8") as f:
            conf = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"error: worker cannot read its conf file {args.conf_file}: {exc}", file=sys.stderr)
        return 1
    log_path = local_layout.worker_log(conf, args.storm_id, args.port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(log_path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS,
                                                   encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    from executor.core import log_core
    from executor.worker_process import WorkerProcess

    log_core()
    sys.setswitchinterval(SWITCH_INTERVAL_SECS)

    service = WorkerProcess(conf, args.storm_id, args.supervisor_id, args.port, args.worker_id)
    code = run_service(service)
    if code:
        print(f"error: worker {args.worker_id} of {args.storm_id} on port {args.port}: "
              f"{service.failure} (log: {log_path})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
