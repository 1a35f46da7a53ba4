"""Executors: the topology-author API, groupings, transport, spout/bolt loops, acker, sinks."""

from executor.core import install_pure as _install_pure

_install_pure()  # STORM_PY_PURE=1: the per-tuple core from its .py files (executor/core/__init__.py)
