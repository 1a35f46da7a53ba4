"""Bad input to the savepoint commands (`swap`, `savepoint`, `savepoints`, `jar submit
--from-savepoint`): one `error:` line naming the culprit, no traceback, without a cluster (the
refusals a running topology gives are in tests/devcluster/test_swap.py and
tests/unit/test_unit_savepoints.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from cli_inprocess import storm_py
from testutil import one_error_line

pytestmark = pytest.mark.timeout(60)

WORDS = Path(__file__).resolve().parents[1] / "devcluster" / "swap" / "words.py"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_savepoints_of_an_unreachable_redis_name_it():
    port = _closed_port()
    out = storm_py("savepoints", "wc", "-c", f"topology.state.provider.config={{host: 127.0.0.1, port: {port}}}")
    one_error_line(out, f"127.0.0.1:{port}", "unreachable")


def test_a_swap_wait_below_a_second_is_refused():
    one_error_line(storm_py("swap", "wc", str(WORDS), "--wait", "0"), "--wait", code=2)


def test_a_swap_of_a_directory_is_refused():
    one_error_line(storm_py("swap", "wc", str(WORDS.parent)), "is a directory", code=2)


def test_allow_dropped_state_without_a_savepoint_is_refused():
    one_error_line(storm_py("jar", "submit", str(WORDS), "--allow-dropped-state"), "--from-savepoint", code=2)


@pytest.mark.redis
def test_savepoints_delete_of_an_unknown_id_names_it(redis_server):
    pc = redis_server.provider_config()
    out = storm_py("savepoints", "wc", "--delete", "nope", "-c",
                   f"topology.state.provider.config={{host: 127.0.0.1, port: {pc['port']}, key_prefix: {pc['key_prefix']}}}")
    one_error_line(out, "topology 'wc' has no savepoint 'nope' (it has none)")
