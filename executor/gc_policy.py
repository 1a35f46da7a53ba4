"""The cyclic garbage collector of a process that runs workers (`topology.worker.gc.thresholds`).

Python's default generation-0 threshold (700 allocations) makes a busy worker collect every few
hundred tuples, and each collection walks the young tuples still queued in the worker: with
tens of thousands of tuples in flight, collection took most of a worker's time. Tuples form no
reference cycles, so a higher threshold costs little memory. The key plays the part of the JVM's
collector flags in Storm's topology.worker.childopts.
"""

from __future__ import annotations

import gc
import logging
from typing import Any, Mapping

log = logging.getLogger(__name__)

KEY = "topology.worker.gc.thresholds"


def gc_thresholds(conf: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The thresholds the conf asks for (validated by the config schema), or None for Python's."""
    value = conf.get(KEY)
    return None if value is None else tuple(int(v) for v in value)


def apply_gc_thresholds(conf: Mapping[str, Any]) -> None:
    """Set this process's collector thresholds from the conf (only for a process of its own:
    it changes the whole interpreter)."""
    thresholds = gc_thresholds(conf)
    if thresholds is None:
        return
    gc.set_threshold(*thresholds)
    log.info("garbage collector thresholds %s (%s)", list(gc.get_threshold()), KEY)
