"""A supervisor process for tests: `run_supervisor.py CONF.json [--standin]` runs the daemon
in the foreground until SIGTERM (like `storm-py supervisor`), optionally with the stand-in worker."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemons.supervisor.daemon import Supervisor  # noqa: E402
from executor.lifecycle import run_service  # noqa: E402


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    conf = json.loads(Path(sys.argv[1]).read_text())
    kwargs = {}
    if "--standin" in sys.argv[2:]:
        from supervisor_env import standin_command

        kwargs["worker_command"] = standin_command
    return run_service(Supervisor(conf, **kwargs))


if __name__ == "__main__":
    sys.exit(main())
