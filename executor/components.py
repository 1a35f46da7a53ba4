"""Base classes topology authors subclass: Spout, Bolt, BasicBolt, and the output declarer."""

from __future__ import annotations

from typing import Any

from executor.tuple import DEFAULT_STREAM, Fields, as_fields


class OutputFieldsDeclarer:
    """Collects the streams a component declares in declare_output_fields."""

    def __init__(self, component_id: str):
        self.component_id = component_id
        self.streams: dict[str, tuple[Fields, bool]] = {}

    def declare(self, fields, stream: str = DEFAULT_STREAM, direct: bool = False) -> None:
        from executor.errors import InvalidTopologyError

        if not isinstance(stream, str) or not stream:
            raise InvalidTopologyError(
                f"component {self.component_id!r}: stream id must be a non-empty string, got {stream!r}")
        if stream in self.streams:
            raise InvalidTopologyError(
                f"component {self.component_id!r} declares stream {stream!r} twice")
        try:
            declared = as_fields(fields)
        except (TypeError, ValueError) as exc:
            raise InvalidTopologyError(
                f"component {self.component_id!r} stream {stream!r}: bad fields: {exc}") from None
        self.streams[stream] = (declared, bool(direct))

    def declare_stream(self, stream: str, fields, direct: bool = False) -> None:
        self.declare(fields, stream=stream, direct=direct)


class Component:
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams; the default declares none."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Per-component config overriding the topology config (e.g. tick frequency)."""
        return None


class Spout(Component):
    """A source of tuples. next_tuple must not block: emit what is ready and return."""

    def open(self, conf: dict, context, collector) -> None:
        pass

    def next_tuple(self) -> None:
        pass

    def ack(self, msg_id: Any) -> None:
        pass

    def fail(self, msg_id: Any) -> None:
        pass

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def close(self) -> None:
        pass


class Bolt(Component):
    """Processes tuples; must ack or fail every input tuple when acking is on."""

    def prepare(self, conf: dict, context, collector) -> None:
        pass

    def execute(self, tup) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def cleanup(self) -> None:
        pass


class BasicBolt(Component):
    """A bolt whose emits are anchored to the input, which is acked when execute returns
    and failed when execute raises FailedException."""

    def prepare(self, conf: dict, context) -> None:
        pass

    def execute(self, tup, collector) -> None:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    def cleanup(self) -> None:
        pass


__all__ = ["OutputFieldsDeclarer", "Component", "Spout", "Bolt", "BasicBolt", "Fields"]
