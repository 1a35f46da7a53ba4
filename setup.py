"""Builds the compiled per-tuple core (executor/core/__init__.py lists its modules): each module's
own .py source compiled by Cython, typed by the .pxd file beside it. Everything else is in
pyproject.toml. A failed build leaves a working install on the pure-Python twin: the failure is
printed here, and storm-py says which core it runs (`storm-py version`, the workers' log)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from executor.core import CORE_MODULES  # noqa: E402  (stdlib only)

DIRECTIVES = {
    "language_level": 3,
    # Types come from the .pxd files only: the sources' annotations are for readers and type
    # checkers (Cython would enforce `x: int` as an exact type check).
    "annotation_typing": False,
    "binding": True,
    "embedsignature": True,
}
_NOTE = "storm-py: the compiled core was not built ({}); storm-py runs on its pure-Python twin"


class OptionalBuildExt(build_ext):
    """Build what compiles; never fail the install for it. The C files compile on every core
    (gcc is most of an install's time: about 2 minutes on one core of a 2-core machine)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler, no headers: the pure twin still works
            print(_NOTE.format(exc), file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(_NOTE.format(f"{ext.name}: {exc}"), file=sys.stderr)


def extensions() -> list:
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError as exc:
        print(_NOTE.format(f"Cython is not available: {exc}"), file=sys.stderr)
        return []
    exts = [Extension(name, [name.replace(".", "/") + ".py"]) for name in CORE_MODULES]
    try:
        return cythonize(exts, compiler_directives=DIRECTIVES, quiet=True, nthreads=os.cpu_count() or 1)
    except Exception as exc:
        print(_NOTE.format(f"cythonize failed: {exc}"), file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
