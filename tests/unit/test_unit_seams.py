"""The seams a daemon is given: each Protocol against both implementations, the real one and
LocalCluster's in-process one. isinstance on a runtime-checkable Protocol checks names only, so
every Protocol method's parameters (names and kinds, in order, and defaults) are compared with
each implementation's too: an implementation that drifts from what its daemon calls fails here.
"""

from __future__ import annotations

import inspect

import pytest

from cluster_state.memory import InMemoryStore
from daemons.inprocess.code import LiveCodeStore, LiveSupervisorCode
from daemons.inprocess.workers import InProcessLauncher, InProcessRuntime
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.seams import TopologyCodeStore
from daemons.supervisor.download import CodeSource, NimbusCode
from daemons.supervisor.launcher import ProcessLauncher, WorkerLauncher
from executor.transport import InProcessHub, InProcessReceiver, InProcessSender, InProcessTransport
from executor.transport.base import Receiver, Sender, Transport
from executor.transport.zmq import ZmqReceiver, ZmqSender, ZmqTransport
from executor.worker_process import ProcessRuntime
from executor.worker_runtime import WorkerRuntime

SEAMS = {
    WorkerLauncher: (ProcessLauncher, InProcessLauncher),
    CodeSource: (NimbusCode, LiveSupervisorCode),
    TopologyCodeStore: (CodeStore, LiveCodeStore),
    WorkerRuntime: (ProcessRuntime, InProcessRuntime),
    Transport: (ZmqTransport, InProcessTransport),
    Receiver: (ZmqReceiver, InProcessReceiver),
    Sender: (ZmqSender, InProcessSender),
}
CASES = [(proto, impl) for proto, impls in SEAMS.items() for impl in impls]


def _ids(case) -> str:
    proto, impl = case
    return f"{impl.__name__}-is-{proto.__name__}"


def protocol_methods(proto: type) -> dict[str, object]:
    return {name: value for name, value in vars(proto).items()
            if not name.startswith("_") and inspect.isfunction(value)}


def protocol_attributes(proto: type) -> dict[str, str]:
    return {name: kind for name, kind in vars(proto).get("__annotations__", {}).items() if not name.startswith("_")}


def shape(fn) -> list[tuple[str, inspect._ParameterKind, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("proto", list(SEAMS), ids=lambda p: p.__name__)
def test_each_protocol_declares_what_it_is_checked_on(proto):
    assert protocol_methods(proto), proto  # a Protocol emptied by mistake would pass every check below


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_implementation_methods_match_the_protocol(case):
    proto, impl = case
    for name, declared in protocol_methods(proto).items():
        found = inspect.getattr_static(impl, name, None)
        assert inspect.isfunction(found), f"{impl.__name__}.{name} is missing or not a plain method"
        assert shape(found) == shape(declared), f"{impl.__name__}.{name} differs from {proto.__name__}.{name}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_implementation_has_the_protocol_attributes(case):
    proto, impl = case
    for name, kind in protocol_attributes(proto).items():
        assert kind == "bool", f"{proto.__name__}.{name}: extend this check for {kind}"
        assert isinstance(getattr(impl, name, None), bool), f"{impl.__name__}.{name} is not a bool"


def test_instances_satisfy_the_runtime_checkable_protocols(tmp_path):
    conf = {"storm.local.dir": str(tmp_path)}
    code = LiveCodeStore()
    runtime = InProcessRuntime(InMemoryStore(), code, InProcessHub())
    zmq_transport = ZmqTransport()
    try:
        instances = {
            WorkerLauncher: (ProcessLauncher(conf), InProcessLauncher(conf, runtime)),
            CodeSource: (NimbusCode(conf), LiveSupervisorCode(conf, code)),
            TopologyCodeStore: (CodeStore(tmp_path / "nimbus"), code),
            WorkerRuntime: (ProcessRuntime(), runtime),
            Transport: (zmq_transport, runtime.transport("localhost", {})),
        }
        for proto, objs in instances.items():
            assert {type(o) for o in objs} == set(SEAMS[proto])
            for obj in objs:
                assert isinstance(obj, proto), f"{type(obj).__name__} is not a {proto.__name__}"
    finally:
        zmq_transport.close()


def test_a_drifted_implementation_fails_the_signature_check():
    class Drifted:
        def fetch(self, topology_id: str):  # renamed parameter: a keyword call would break
            pass

    assert shape(Drifted.fetch) != shape(protocol_methods(CodeSource)["fetch"])
