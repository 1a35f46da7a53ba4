import sys
from pathlib import Path

# tests/ holds shared fixture modules; make them importable regardless of the import mode.
sys.path.append(str(Path(__file__).parent))  # appended: tests/ must not shadow real packages

from zk_fixture import *  # noqa: E402,F401,F403
