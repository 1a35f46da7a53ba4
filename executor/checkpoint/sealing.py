"""Checkpoint tuples leave an executor in batches of their own (receive_queue.BarrierBatch), so
that the executors they reach find them by a batch's type instead of by every tuple's stream
(executor/bolt.py, executor/checkpoint/forwarder.py): every emit on the `$checkpoint` stream
goes through `sealed`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def sealed(out) -> Iterator[None]:
    """What `out` (an outbox or a collector) emits inside goes in BarrierBatch batches; what it
    emitted before, first."""
    out.begin_barriers()
    try:
        yield
    finally:
        out.end_barriers()
