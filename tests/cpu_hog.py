"""Run a command on a loaded machine: one busy process per core (or `--per-core N`) spins for as
long as the command runs, as other work on a CI machine or a laptop would. The command's exit
code is this one's; the hogs are stopped by their pids whatever happens.

    python3 tests/cpu_hog.py -- bash .ci/run          # the whole suite, a hog on each core
    python3 tests/cpu_hog.py --per-core 2 -- python3 -m pytest tests/devcluster/test_swap.py

The hogs run at the command's own priority (nice 0), so the suite gets about half of each core;
tests/DURATIONS.md has the figures of such runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def _spin() -> None:
    while True:
        pass


def start_hogs(count: int) -> list[int]:
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:  # the child: spin until killed
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _spin()
            finally:
                os._exit(0)
        pids.append(pid)
    return pids


def stop_hogs(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-core", type=int, default=1, help="busy processes per core (default 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.per_core < 1:
        parser.error("--per-core must be at least 1")
    hogs = start_hogs(args.per_core * (os.cpu_count() or 1))
    started = time.monotonic()
    try:
        code = subprocess.call(command)
    finally:
        stop_hogs(hogs)
    print(f"cpu_hog: {len(hogs)} hog(s), {command[0]} exited {code} after {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
