import sys
from pathlib import Path

# tests/ holds shared fixture modules; make them importable regardless of the import mode.
sys.path.insert(0, str(Path(__file__).parent))

from zk_fixture import *  # noqa: E402,F401,F403
