"""The per-tuple core: the modules every tuple passes through, compiled by Cython when storm-py
is installed, with their Python sources as the pure twin.

One source serves both: each module below is plain Python, and `pip install .` also builds it
as an extension module of the same name (types for the compiled build come from the .pxd file
beside it), which Python imports in preference to the .py. `STORM_PY_PURE=1` makes the
processes it is set for import the .py files instead (install_pure() below, called when the
`executor` package is imported); a build that failed leaves only the .py files, and the core
says so once in the log (log_core()).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

# What is compiled (setup.py builds these; tests/unit/test_unit_core.py checks both builds).
CORE_MODULES = (
    "executor.tuple",
    "executor.grouping",
    "executor.rotating_map",
    "executor.acker",
    "executor.serialization",
    "executor.routing",
    "executor.core.outbox",
    "executor.core.collectors",
    "executor.receive_queue",
    "executor.worker_io",
    "executor.spouts.stream_ledger",
    "executor.spouts.stream_cursor",
    "executor.state.kv",
)

PURE_ENV = "STORM_PY_PURE"
_ROOT = Path(__file__).resolve().parents[2]
_logged = False
_stale: list[str] = []


def pure_forced() -> bool:
    return os.environ.get(PURE_ENV, "").strip().lower() in ("1", "true", "yes")


class _PureFinder:
    """Finds the core modules' .py files before the path finder finds their extension modules."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname not in CORE_MODULES:
            return None
        source = _ROOT.joinpath(*fullname.split(".")).with_suffix(".py")
        return importlib.util.spec_from_file_location(fullname, source)


def stale_modules() -> list[str]:
    """In a source checkout (an editable install), the core modules whose extension is older than
    their .py or .pxd: a source edited after the build, which the extension does not have."""
    if not (_ROOT / "setup.py").exists():
        return []  # an installed package: its sources are not edited in place
    stale = []
    for name in CORE_MODULES:
        base = _ROOT.joinpath(*name.split("."))
        built = [p.stat().st_mtime for suffix in importlib.machinery.EXTENSION_SUFFIXES
                 if (p := base.with_name(base.name + suffix)).exists()]
        if not built:
            continue
        sources = [p.stat().st_mtime for p in (base.with_suffix(".py"), base.with_suffix(".pxd")) if p.exists()]
        if sources and max(sources) > max(built):
            stale.append(name)
    return stale


def install_pure() -> None:
    """Under STORM_PY_PURE=1, or when the compiled core is older than its sources, make the core
    modules import from their .py files (all of them: compiled modules expect compiled types)."""
    global _stale
    _stale = stale_modules()
    if (pure_forced() or _stale) and not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())


def module_kind(name: str) -> str:
    """'compiled' or 'pure': how the core module `name` is (or would be) loaded."""
    mod = sys.modules.get(name)
    if mod is not None:
        origin = getattr(mod, "__file__", "") or ""
    else:
        spec = importlib.util.find_spec(name)
        origin = (spec.origin or "") if spec is not None else ""
    return "compiled" if origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) else "pure"


def core_status() -> dict:
    """Which core this process runs: {"core": "compiled" | "pure" | "mixed", "reason": ...,
    "modules": {name: kind}}."""
    kinds = {name: module_kind(name) for name in CORE_MODULES}
    distinct = set(kinds.values())
    core = distinct.pop() if len(distinct) == 1 else "mixed"
    if core == "compiled":
        reason = "built by Cython at install"
    elif pure_forced():
        reason = f"{PURE_ENV}=1"
    elif _stale:
        reason = ("the compiled core is older than its sources (" + ", ".join(_stale) +
                  "); rebuild it: pip install -e .")
    elif core == "pure":
        reason = "the compiled core is not built (pip install . builds it; see the install log)"
    else:
        reason = "only part of the compiled core is built: " + ", ".join(
            n for n, k in kinds.items() if k == "pure")
    return {"core": core, "reason": reason, "modules": kinds}


def describe() -> str:
    st = core_status()
    return f"{st['core']} ({st['reason']})"


def log_core() -> None:
    """Say once per process which core runs: a warning when the compiled one was wanted but is
    missing (the topology runs, slower)."""
    global _logged
    if _logged:
        return
    _logged = True
    st = core_status()
    if st["core"] == "compiled" or pure_forced():
        log.info("storm-py core: %s", describe())
    else:
        log.warning("storm-py core: %s; tuples take the pure-Python path", describe())
