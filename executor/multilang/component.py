"""What ShellBolt and ShellSpout share: the command, the declared outputs, where the
subprocess runs and the settings it is started with."""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from executor.components import OutputFieldsDeclarer
from executor.errors import InvalidTopologyError
from executor.multilang import protocol as P
from executor.multilang.process import ShellError, ShellProcess, child_env, code_dir

# The directory of the topology file being loaded (executor/topology_file.py sets it): a shell
# component made while it loads runs its subprocess there (in its resources/ dir if it has one).
SERIALIZER_ENV = "STORM_PY_MULTILANG_SERIALIZER"
PACKAGE_ROOT: contextvars.ContextVar[str | None] = contextvars.ContextVar("storm_py_package_root", default=None)


def _outputs(component: str, outputs: Any) -> dict[str, tuple[list[str], bool]]:
    """stream -> (fields, direct) from `outputs`: a list of field names (the default stream) or
    a dict of stream -> field names or {"fields": [...], "direct": bool}."""
    if outputs is None:
        return {}
    if isinstance(outputs, (list, tuple)):
        outputs = {"default": list(outputs)}
    if not isinstance(outputs, Mapping):
        raise InvalidTopologyError(f"{component}: outputs must be a list of fields or a dict of stream -> fields, "
                                   f"got {type(outputs).__name__}")
    out = {}
    for stream, spec in outputs.items():
        direct = False
        if isinstance(spec, Mapping):
            direct, spec = bool(spec.get("direct", False)), spec.get("fields", [])
        if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
            raise InvalidTopologyError(f"{component}: outputs of stream {stream!r} must be a list of field names, "
                                       f"got {spec!r}")
        out[str(stream)] = ([str(f) for f in spec], direct)
    return out


class ShellComponent:
    """The shell part of ShellBolt/ShellSpout (mixed in before their adapter base and Bolt/Spout,
    executor/adapters.py): their release after a death."""

    def __init__(self, command: str | Sequence[str], script: str | None = None, outputs: Any = None,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
                 python_path: Sequence[str] = (), serializer_arg: bool = False):
        if isinstance(command, str):
            command = [command]
        if not command or not all(isinstance(c, str) and c for c in command):
            raise InvalidTopologyError(f"{type(self).__name__}: command must be a program (and its arguments), "
                                       f"got {command!r}")
        self.command = [*command, *([script] if script else [])]
        # streamparse_run takes the serializer as `-s NAME` before the class (sparse run's way)
        self.serializer_arg = serializer_arg
        self.outputs = _outputs(f"{type(self).__name__}({' '.join(self.command)})", outputs)
        self.env = dict(env or {})
        self.cwd = None if cwd is None else os.fspath(cwd)
        self.package_root = PACKAGE_ROOT.get()
        self.python_path = list(python_path)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        for stream, (fields, direct) in self.outputs.items():
            declarer.declare(fields, stream=stream, direct=direct)

    def _launch(self, conf: Mapping[str, Any], context) -> ShellProcess:
        """Start the subprocess and shake hands (Storm's ShellProcess.launch)."""
        timeout = float(conf.get("topology.subprocess.timeout.secs") or conf.get("supervisor.worker.timeout.secs")
                        or 30)
        self._timeout = timeout
        root = self.package_root
        cwd = self.cwd or code_dir(root)
        python_path = [os.path.join(root, p) if root and not os.path.isabs(p) else p for p in self.python_path]
        framing = P.framing(conf.get("topology.multilang.serializer") or "json")
        command = self.command
        if self.serializer_arg:
            command = [*command[:-1], f"-s {framing.name} {command[-1]}"]
        # The serializer is also in the environment, for scripts that pick theirs at start.
        env = {SERIALIZER_ENV: framing.name, **self.env}
        proc = ShellProcess(command, context.this_component_id, context.this_task_id, framing, cwd,
                            child_env(env, python_path))
        self._pid_dir = tempfile.mkdtemp(prefix=f"storm-py-pids-{context.this_task_id}-")
        try:
            proc.launch(P.handshake(_jsonable(conf), P.context_json(context), self._pid_dir), timeout)
        except BaseException:
            proc.destroy(grace=0.2)
            self._remove_pid_dir()
            raise
        proc.log.info("launched subprocess `%s` with pid %s in %s", proc.describe_command(), proc.pid, cwd)
        return proc

    def _report(self, proc: ShellProcess, name: str, body: Mapping[str, Any]) -> bool:
        """Handle a `log`, `error` or `metrics` message (what bolts and spouts share); False
        for any other command."""
        if name == "log":
            proc.log.log(P.log_level(body), "%s", body.get("msg"))
        elif name == "error":
            proc.last_error = str(body.get("msg"))
            self._collector.report_error(ShellError(f"{proc.where}: Shell Process Exception: {body.get('msg')}"))
        elif name == "metrics":
            self.metrics[str(body["name"])] = body.get("params")
        else:
            return False
        return True

    def release_on_death(self) -> None:
        """The executor died (this component or another of it): kill the subprocess at once
        (executor/base.py calls this instead of cleanup/close)."""
        self._running = False
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        proc = getattr(self, "_proc", None)
        if proc is not None:
            proc.destroy(grace=0.0)
        self._remove_pid_dir()

    def _remove_pid_dir(self) -> None:
        pid_dir = getattr(self, "_pid_dir", None)
        if pid_dir:
            shutil.rmtree(pid_dir, ignore_errors=True)


def _jsonable(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The topology conf a subprocess is given: what JSON and msgpack can carry (secrets out)."""
    out = {}
    for key, value in conf.items():
        if "secret" in key or "password" in key:
            continue
        if isinstance(value, (str, int, float, bool, type(None), list, dict)):
            out[key] = value
    return out
