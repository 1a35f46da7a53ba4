import os
import sys
import tempfile
from pathlib import Path

# tests/ holds shared fixture modules; make them importable regardless of the import mode.
sys.path.append(str(Path(__file__).parent))  # appended: tests/ must not shadow real packages

# The suite must never write into the user's word-count table (README's first command writes
# it): every test and every process a test starts writes a table of this run instead.
_RUN_DIR = tempfile.mkdtemp(prefix="storm-py-tests-")
os.environ["STORM_PY_WORD_COUNT_TABLE"] = os.path.join(_RUN_DIR, "word-count")

from zk_fixture import *  # noqa: E402,F401,F403


def pytest_sessionfinish(session, exitstatus):
    import shutil

    shutil.rmtree(_RUN_DIR, ignore_errors=True)
