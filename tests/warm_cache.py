"""Compiled code for the run's test processes, made once before xdist's workers start (a pytest
plugin, loaded by tests/conftest.py).

Each xdist worker collects the whole suite: it rewrites the asserts of the test modules and
compiles pytest, its plugins, storm-py and the libraries the tests import. Four workers starting
at once each did all of it, as every cache was empty (with PYTHONDONTWRITEBYTECODE in the
environment, conftest.py gives the run a fresh bytecode directory): 21.2 s and 36 CPU-s to start
four workers on 2 cores. The run's first process fills the caches first, half of it in a forked
copy on the other core, with pytest's own functions for its assertion-rewriting cache (the files
its workers read) and Python's for bytecode (where the run's processes look for it): 12.6 s and
18 CPU-s. Should pytest's internals change, the workers do the work themselves, as before.
"""

from __future__ import annotations

import compileall
import importlib
import importlib.util
import os
import py_compile
import sys
from pathlib import Path
from typing import Callable

import pytest

TESTS = Path(__file__).resolve().parent
PRODUCT = ("cluster_state", "daemons", "executor")
# The libraries the test modules import as they are collected, the largest first: their
# bytecode too goes where the run's processes look (a fresh directory when conftest.py moved it).
LIBRARIES = ("pyspark.sql", "hypothesis", "selenium.webdriver", "redis", "flask", "kazoo.client", "zmq",
             "prometheus_client", "waitress", "yaml", "click")


def _workers(config: pytest.Config) -> int:
    try:
        return int(config.getoption("numprocesses") or 0)
    except (ValueError, TypeError):  # no xdist, or "auto" (resolved later): nothing to warm for
        return 0


def _assert_rewriter(config: pytest.Config) -> Callable[[list[Path]], None] | None:
    """A function that writes pytest's rewritten-assert cache of the files given (those not
    cached yet), or None when pytest's internals are not as this expects."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )

        state = config.stash[assertstate_key]
    except (ImportError, KeyError, AttributeError):
        return None

    def rewrite(files: list[Path]) -> None:
        for fn in files:
            pyc = get_cache_dir(fn) / (fn.name[:-3] + PYC_TAIL)
            try:
                if _read_pyc(fn, pyc) is None:
                    pyc.parent.mkdir(parents=True, exist_ok=True)
                    stat, co = _rewrite_test(fn, config)
                    _write_pyc(state, co, stat, pyc)
            except (OSError, SyntaxError, ValueError):
                continue  # the worker that imports it says what is wrong

    return rewrite


def _rewritten_files(config: pytest.Config) -> list[Path]:
    """The test modules and conftests, and the plugins' modules pytest rewrote as this process
    started (each worker rewrites them again otherwise)."""
    from _pytest.assertion.rewrite import assertstate_key

    hook = getattr(config.stash.get(assertstate_key, None), "hook", None)
    plugins = getattr(hook, "_rewritten_names", None) or {}
    return sorted({*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py"), *map(Path, plugins.values())})


def _compile_imported() -> None:
    """Bytecode of every module this process imported before conftest.py moved the cache (pytest
    itself, its plugins): each worker imports them again as it starts."""
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if not source or not source.endswith(".py"):
            continue
        try:
            if not os.path.exists(importlib.util.cache_from_source(source)):
                py_compile.compile(source, doraise=False, quiet=2)
        except (OSError, ValueError):
            continue


def _import_libraries() -> None:
    """Import LIBRARIES (in the forked copy, which then exits: this process stays as it was)."""
    for name in LIBRARIES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (a missing test extra: its tests say so)
            continue


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if (os.environ.get("PYTEST_XDIST_WORKER") or _workers(config) < 2 or sys.dont_write_bytecode
            or config.getoption("collectonly")):
        return
    rewrite = _assert_rewriter(config)
    files = _rewritten_files(config) if rewrite else []
    # Half of it in a forked copy of this process (the same config) on the other core; the copy
    # only writes files and leaves with os._exit, so this process stays as it was.
    pid = os.fork()
    if pid == 0:
        try:
            if rewrite:
                rewrite(files[1::2])
            _compile_imported()
            _import_libraries()
        finally:
            os._exit(0)
    if rewrite:
        rewrite(files[0::2])
    for package in PRODUCT:
        compileall.compile_dir(str(TESTS.parent / package), quiet=2)
    os.waitpid(pid, 0)
