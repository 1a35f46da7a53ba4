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
import os
import sys
from pathlib import Path

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


def warm_assert_rewrites(config: pytest.Config) -> int:
    """Write pytest's rewritten-assert cache of every test module not cached yet; how many."""
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
        return 0
    def rewrite(files: list[Path]) -> int:
        done = 0
        for fn in files:
            pyc = get_cache_dir(fn) / (fn.name[:-3] + PYC_TAIL)
            try:
                if _read_pyc(fn, pyc) is not None:
                    continue
                pyc.parent.mkdir(parents=True, exist_ok=True)
                stat, co = _rewrite_test(fn, config)
                done += _write_pyc(state, co, stat, pyc)
            except (OSError, SyntaxError, ValueError):
                continue  # the worker that imports it says what is wrong
        return done

    # and the plugins' modules pytest rewrote as this process started (rewritten again by each
    # worker otherwise)
    plugins = getattr(getattr(state, "hook", None), "_rewritten_names", {}) or {}
    files = sorted({*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py"), *map(Path, plugins.values())})
    # Half of them in a forked copy of this process (it has the same config), on the other core;
    # it only writes files and leaves with os._exit.
    pid = os.fork() if (os.cpu_count() or 1) > 1 else -1
    if pid == 0:
        try:
            rewrite(files[1::2])
            _compile_imported()
            _import_libraries()
        finally:
            os._exit(0)
    done = rewrite(files[0::2] if pid > 0 else files)
    if pid > 0:
        os.waitpid(pid, 0)
    return done


def _compile_imported() -> None:
    """Bytecode of every module this process imported before conftest.py moved the cache (pytest
    itself, its plugins): each worker imports them again as it starts."""
    import importlib.util
    import py_compile

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
    import importlib

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
    warm_assert_rewrites(config)
    for package in PRODUCT:
        compileall.compile_dir(str(TESTS.parent / package), quiet=2, workers=os.cpu_count() or 1)
