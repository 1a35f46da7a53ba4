"""The worker's receive part (executor/worker_io.py) against a stand-in socket: the idle wait and
the steps around it look at the socket only when something may have come."""

from __future__ import annotations

import msgpack

from executor.scheduling import BUSY, IDLE
from executor.serialization import WIRE_VERSION
from executor.worker_io import ReceiveIO


class FakeReceiver:
    """A bound receiver: recv(timeout) hands out what arrived, else None; every call recorded."""

    def __init__(self):
        self.arrived: list[bytes] = []
        self.calls: list[float] = []

    def recv(self, timeout: float) -> bytes | None:
        self.calls.append(timeout)
        return self.arrived.pop(0) if self.arrived else None

    def close(self) -> None:
        pass


class FakeTransport:
    def __init__(self, receiver: FakeReceiver):
        self.receiver = receiver

    def bind(self, address):
        return self.receiver


def _batch_for_unknown_task() -> bytes:
    # One tuple for task 99, which this worker does not run: dispatch counts it as unknown.
    return msgpack.packb([WIRE_VERSION, [[99, 1, "default", [["x"]], None]], []])


def test_a_step_right_after_an_empty_wait_does_not_look_at_the_socket_again():
    r = FakeReceiver()
    io = ReceiveIO("recv", FakeTransport(r), ("127.0.0.1", 1), {}, lambda src, stream: ("c", ["f"]), 10)
    assert io.step() == IDLE and r.calls == [0]       # binds, looks once
    io.wait_input(0.001)                              # the runner's idle wait: nothing came
    assert r.calls == [0, 0.001]
    assert io.step() == IDLE and r.calls == [0, 0.001]  # the wait just looked: no second look
    assert io.step() == IDLE and r.calls[-1] == 0     # a step after another (a busy round) looks again

    r.arrived.append(_batch_for_unknown_task())
    io.wait_input(0.001)                              # a payload came: held for the next step
    assert io.step() == BUSY and io.unknown_tasks == 1

    r.arrived.append(_batch_for_unknown_task())
    assert io.step() == BUSY and io.unknown_tasks == 2  # no wait before: the step looks itself
