"""The multilang protocol as data: framing and messages (Storm's JsonSerializer.java and
ShellMsg.java; pystorm's msgpack framing). No I/O here.

JSON (Storm's): each message is its JSON text followed by a line `end`; the text itself may span
lines. msgpack (pystorm's): messages follow each other, delimited by msgpack itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import msgpack

HEARTBEAT_STREAM = "__heartbeat"
SYSTEM_TASK = -1
# Storm's ShellLogHandler levels (DefaultShellLogHandler.java): 0 trace .. 4 error.
LOG_LEVELS = {0: 5, 1: 10, 2: 20, 3: 30, 4: 40}


class ProtocolError(ValueError):
    """A message the subprocess sent that breaks the protocol; the text says what and shows it."""


class Framing(Protocol):
    name: str

    def encode(self, message: Any) -> bytes: ...

    def feed(self, data: bytes) -> list[Any]:
        """The whole messages `data` completes (the rest is kept for the next call)."""
        ...


class JsonFraming:
    name = "json"

    def __init__(self) -> None:
        self._buf = b""
        self._lines: list[bytes] = []
        # one encoder: json.dumps with arguments builds a new one per call
        self._dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

    def encode(self, message: Any) -> bytes:
        return self._dumps(message).encode("utf-8") + b"\nend\n"

    def feed(self, data: bytes) -> list[Any]:
        self._buf += data
        out = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return out
            line, self._buf = self._buf[:nl], self._buf[nl + 1:]
            if line.rstrip(b"\r") == b"end":
                text = b"\n".join(self._lines).decode("utf-8", errors="replace")
                self._lines = []
                if not text.strip():
                    continue  # an empty message: pystorm never sends one, Storm skips them too
                try:
                    out.append(json.loads(text))
                except ValueError as exc:
                    raise ProtocolError(f"not JSON ({exc}): {clip(text)}") from None
            else:
                self._lines.append(line)
                if sum(len(x) for x in self._lines) > MAX_MESSAGE_BYTES:
                    raise ProtocolError(f"a message of more than {MAX_MESSAGE_BYTES} bytes without its "
                                        f"'end' line: {clip(b''.join(self._lines[:1]).decode('utf-8', 'replace'))}")


class MsgpackFraming:
    """One per process, used by the one thread that writes to it and the one that reads from it
    (its Packer and Unpacker are reused: a packb per message cost twice as much)."""

    name = "msgpack"

    def __init__(self) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=MAX_MESSAGE_BYTES)
        self._packer = msgpack.Packer(use_bin_type=True)

    def encode(self, message: Any) -> bytes:
        return self._packer.pack(message)

    def feed(self, data: bytes) -> list[Any]:
        try:
            self._unpacker.feed(data)
            return list(self._unpacker)
        except (ValueError, msgpack.UnpackException, msgpack.ExtraData) as exc:
            raise ProtocolError(f"not msgpack: {exc}") from None


MAX_MESSAGE_BYTES = 64 << 20
SERIALIZERS = {"json": JsonFraming, "msgpack": MsgpackFraming}


def framing(name: Any) -> Framing:
    """The framing `topology.multilang.serializer` names (Storm's class names are accepted)."""
    key = str(name).strip().lower()
    if key.endswith("jsonserializer"):
        key = "json"
    if key not in SERIALIZERS:
        raise ValueError(f"topology.multilang.serializer: {name!r} is not one of {', '.join(SERIALIZERS)}")
    return SERIALIZERS[key]()


def clip(text: Any, n: int = 300) -> str:
    text = text if isinstance(text, str) else repr(text)
    return text if len(text) <= n else text[:n] + f"... ({len(text)} chars)"


# ---- messages to the subprocess ----

def handshake(conf: Mapping[str, Any], context: Mapping[str, Any], pid_dir: str) -> dict[str, Any]:
    return {"conf": dict(conf), "context": dict(context), "pidDir": pid_dir}


def bolt_tuple(msg_id: str, comp: str | None, stream: str, task: int, values: Sequence[Any]) -> dict[str, Any]:
    """A tuple for a bolt: all five keys, always (pystorm reads them without defaults)."""
    return {"id": msg_id, "comp": comp, "stream": stream, "task": task, "tuple": list(values)}


def heartbeat(msg_id: str) -> dict[str, Any]:
    return bolt_tuple(msg_id, None, HEARTBEAT_STREAM, SYSTEM_TASK, [])


def spout_command(command: str, msg_id: Any = "") -> dict[str, Any]:
    return {"command": command, "id": msg_id}


# ---- messages from the subprocess ----

@dataclass(slots=True)  # not frozen: one is made per emit, and a frozen one costs 4x to make
class Emit:
    values: list
    stream: str
    task: int                    # 0: not direct
    anchors: tuple[str, ...]
    msg_id: Any                  # spouts: the message id (None: unreliable)
    need_task_ids: bool


@dataclass(slots=True)
class Command:
    """ack, fail, sync, log, error, metrics; `raw` is the message."""

    name: str
    raw: Mapping[str, Any]


COMMANDS = ("emit", "ack", "fail", "sync", "log", "error", "metrics")


def parse(msg: Any, kind: str) -> Emit | Command:
    """A message from a component of `kind` ("bolt" or "spout") as a typed command; ProtocolError
    says what is wrong with it (Storm's JsonSerializer.readShellMsg, with its defaults)."""
    if not isinstance(msg, dict):
        raise ProtocolError(f"expected a message object, got {clip(msg)}")
    command = msg.get("command")
    if command not in COMMANDS:
        what = "no 'command'" if command is None else f"unknown command {command!r}"
        raise ProtocolError(f"{what} in {clip(msg)}")
    if command == "emit":
        values = msg.get("tuple")
        if not isinstance(values, list):
            raise ProtocolError(f"emit without a 'tuple' list: {clip(msg)}")
        stream = msg.get("stream") or "default"
        if not isinstance(stream, str):
            raise ProtocolError(f"emit with a stream that is not a string: {clip(msg)}")
        task = msg.get("task") or 0
        if not isinstance(task, int) or isinstance(task, bool):
            raise ProtocolError(f"emit with a task that is not an integer: {clip(msg)}")
        anchors = msg.get("anchors") or ()
        if isinstance(anchors, (str, int)):
            anchors = [anchors]
        if not isinstance(anchors, (list, tuple)):
            raise ProtocolError(f"emit with anchors that are not a list: {clip(msg)}")
        need = msg.get("need_task_ids")
        return Emit(values, stream, task, tuple([a if type(a) is str else str(a) for a in anchors]), msg.get("id"),
                    True if need is None else bool(need))
    if command in ("ack", "fail") and kind == "bolt" and "id" not in msg:
        raise ProtocolError(f"{command} without an 'id': {clip(msg)}")
    if command == "metrics" and not msg.get("name"):
        raise ProtocolError(f"metrics without a 'name': {clip(msg)}")
    return Command(command, msg)


def log_level(msg: Mapping[str, Any]) -> int:
    """Python's level for a `log` message's integer level (Storm's 0-4; info when absent)."""
    level = msg.get("level")
    return LOG_LEVELS.get(level, 20) if isinstance(level, int) else 20


# ---- the context (Storm's TopologyContext.toJSONString) ----

_GROUPING_TYPES = {"shuffle": "SHUFFLE", "fields": "FIELDS", "all": "ALL", "global": "FIELDS", "none": "NONE",
                   "direct": "DIRECT", "local_or_shuffle": "LOCAL_OR_SHUFFLE", "partial_key": "FIELDS",
                   "custom": "CUSTOM_OBJECT"}


def _grouping(grouping) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _GROUPING_TYPES.get(grouping.kind, grouping.kind.upper())}
    if grouping.kind in ("fields", "partial_key", "global"):
        out["fields"] = [] if grouping.fields is None else grouping.fields.to_list()
    return out


def context_json(context) -> dict[str, Any]:
    """What a multilang component is told about itself: Storm's keys, for `context`'s task."""
    topology, me = context.topology, context.this_component_id
    spec = topology.components[me]
    task_to_component = {str(t): context.component_id(t)
                         for c in topology.components for t in context.component_tasks(c)}
    targets: dict[str, dict[str, Any]] = {}
    for stream in spec.streams:
        for target, grouping in topology.consumers(me, stream):
            targets.setdefault(stream, {})[target] = _grouping(grouping)
    sources: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, list[str]]] = {}
    for sub in spec.inputs:
        sources.setdefault(sub.source, {})[sub.stream] = _grouping(sub.grouping)
        try:
            fields = topology.stream_fields(sub.source, sub.stream).to_list()
        except Exception:  # a system stream without declared fields
            fields = []
        source_fields.setdefault(sub.source, {})[sub.stream] = fields
    return {"task->component": task_to_component, "taskid": context.this_task_id, "componentid": me,
            "streams": sorted(spec.streams),
            "stream->outputfields": {s: st.fields.to_list() for s, st in spec.streams.items()},
            "stream->target->grouping": targets, "source->stream->grouping": sources,
            "source->stream->fields": source_fields}
