"""What `storm-py local` prints about a run's errors (pure functions over plain records).

Each distinct error is one line: a component that died is reported once (not again for the
error records its death and its own report_error left behind), and an error a component
reported many times is one line with a count. The traceback is not repeated: the executor
logged it once already.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Protocol

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.M)


class _Died(Protocol):
    component_id: str
    task_id: int
    where: str
    original: BaseException
    trace: str


class _Reported(Protocol):
    component_id: str
    task_id: int
    error: str


def user_frame(trace: str, user_dir: Path | None) -> str | None:
    """`file:line` of the innermost frame of a formatted traceback inside `user_dir`."""
    if not trace or user_dir is None:
        return None
    found = None
    for m in _FRAME.finditer(trace):
        try:
            inside = Path(m.group("file")).resolve().is_relative_to(user_dir.resolve())
        except (OSError, ValueError):
            inside = False
        if inside:
            found = f"{m.group('file')}:{m.group('line')}"
    return found


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _tasks(tasks: Iterable[int]) -> str:
    ts = sorted(set(tasks))
    return f"task {ts[0]}" if len(ts) == 1 else "tasks " + ",".join(map(str, ts))


def error_lines(died: list[_Died], reported: list[_Reported], user_dir: Path | None = None) -> list[str]:
    """One line per distinct error of a run (deaths first), without the `error:` prefix."""
    lines = []
    echoes: set[tuple[str, str]] = set()  # (component, error text) records a death explains
    for d in died:
        where = user_frame(d.trace, user_dir)
        lines.append(f"component {d.component_id!r} task {d.task_id} died in {d.where}: "
                     f"{_exc_text(d.original)}" + (f" (at {where})" if where else ""))
        echoes.add((d.component_id, _exc_text(d.original)))
        echoes.add((d.component_id, f"{type(d).__name__}: {d}"))
    groups: dict[tuple[str, str], list[int]] = {}
    for r in reported:
        if (r.component_id, r.error) not in echoes:
            groups.setdefault((r.component_id, r.error), []).append(r.task_id)
    for (component, text), tasks in groups.items():
        times = f" ({len(tasks)} times)" if len(tasks) > 1 else ""
        lines.append(f"component {component!r} {_tasks(tasks)} reported an error{times}: {text}")
    return lines
