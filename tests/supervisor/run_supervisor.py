"""A supervisor process for tests: `run_supervisor.py CONF.json` runs the daemon in the
foreground until SIGTERM (like `storm-py supervisor`) with a conf the test wrote as JSON."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from daemons.supervisor.daemon import Supervisor
from executor.lifecycle import run_service


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    conf = json.loads(Path(sys.argv[1]).read_text())
    return run_service(Supervisor(conf))


if __name__ == "__main__":
    sys.exit(main())
