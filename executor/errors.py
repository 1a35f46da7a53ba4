"""Exceptions a topology author or operator sees."""


class ClearError(Exception):
    """An error whose message says everything the user needs (what failed, naming the path, key
    or component): reported as one line, its traceback kept for the debug log only."""


class InvalidTopologyError(ValueError):
    """The topology (or its name) is malformed; the message names the culprit."""


class AlreadyAliveError(ValueError):
    """A topology with this name is already running."""


class NotAliveError(KeyError):
    """No running topology has this name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "topology not alive"


class FailedException(Exception):
    """Raised from BasicBolt.execute to fail the input tuple (the spout will see fail)."""


class EmitError(ValueError):
    """An emit named an undeclared stream, had the wrong arity, or carried unserializable values."""


class ComponentError(RuntimeError):
    """User code of a component raised; carries component id, task id and the traceback text."""

    def __init__(self, component_id: str, task_id: int, where: str, exc: BaseException, trace: str):
        self.component_id = component_id
        self.task_id = task_id
        self.where = where
        self.original = exc
        self.trace = trace
        super().__init__(
            f"component {component_id!r} task {task_id} raised in {where}: {type(exc).__name__}: {exc}"
        )
