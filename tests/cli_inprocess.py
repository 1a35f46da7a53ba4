"""The `storm-py` CLI run in the test's own process (click's CliRunner), for the claims about
parsing, usage and config errors: the same root group, the same one `error:` line and exit code
as `python -m daemons.cli`, without a Python start-up per call. Commands that run user code,
topologies or daemons, and the claims about signals, exit codes of a real process and `bin/`,
keep testutil.storm_py (a real process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from cluster_state.config import set_warning_printer
from daemons.cli import main


def storm_py(*args: str, conf_dir: Path | None = None, env_extra: dict | None = None,
             check: int | None = None) -> subprocess.CompletedProcess:
    """`storm-py ARGS [--conf-dir DIR]` in this process, as testutil.storm_py answers it: a
    CompletedProcess with the exit code and what went to stdout and stderr. $STORM_CONF_DIR is
    unset unless `env_extra` sets it (a user's own never leaks in)."""
    argv = [*args, *(["--conf-dir", str(conf_dir)] if conf_dir is not None else [])]
    env = {"STORM_CONF_DIR": None, **(env_extra or {})}
    try:
        result = CliRunner().invoke(main, argv, prog_name="storm-py", env=env, catch_exceptions=False)
    finally:
        set_warning_printer(None)  # the CLI points config warnings at its stderr: not past this call
    out = subprocess.CompletedProcess(["storm-py", *argv], result.exit_code, result.stdout, result.stderr)
    if check is not None:
        assert out.returncode == check, (argv, out.returncode, out.stdout, out.stderr)
    return out
