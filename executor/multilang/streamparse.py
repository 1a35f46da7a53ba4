"""streamparse topologies: a topology file defining a streamparse `Topology` subclass runs
unmodified, its components through `streamparse_run` as `sparse run` starts them
(docs/multilang.md, "streamparse projects").

A streamparse project is a directory with `topologies/` (the topology files), `src/` (the
components' code) and `config.json`. A topology file inside a project's `topologies/` is
loaded with `src/` importable (its `from bolts.wordcount import ...` needs it), and its
components run in `src/` with it on their import path. config.json's `serializer` is the
multilang serializer, as `sparse run` passes it (`streamparse_run -s ...`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from executor.errors import InvalidTopologyError
from executor.multilang.bolt import ShellBolt
from executor.multilang.spout import ShellSpout
from executor.topology import StormTopology, TopologyBuilder

log = logging.getLogger(__name__)

TOPOLOGIES_DIR = "topologies"
SRC_DIR = "src"
CONFIG = "config.json"


def project_root(topology_file: Path) -> Path | None:
    """The streamparse project holding `topology_file` (in its `topologies/`), None if none."""
    parent = topology_file.resolve().parent
    if parent.name != TOPOLOGIES_DIR:
        return None
    root = parent.parent
    return root if (root / CONFIG).is_file() or (root / SRC_DIR).is_dir() else None


def project_config(root: Path) -> dict[str, Any]:
    path = root / CONFIG
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidTopologyError(f"streamparse project config {path} cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidTopologyError(f"streamparse project config {path} is not a JSON object")
    return doc


def topology_classes(module) -> list[type]:
    """The streamparse Topology subclasses a topology file's module defines (none when
    streamparse is not installed: then the file is not a streamparse one)."""
    try:
        from streamparse import Topology
    except ImportError:
        return []
    found = [v for v in vars(module).values()
             if isinstance(v, type) and issubclass(v, Topology) and v is not Topology]
    own = [c for c in found if c.__module__ == module.__name__]
    return own or found


def _grouping(declarer, source: str, stream: str, grouping, where: str) -> None:
    kind = grouping.getType() if hasattr(grouping, "getType") else None
    fields = getattr(grouping, "fields", None)
    if fields is not None:
        if fields:
            declarer.fields_grouping(source, list(fields), stream)
        else:
            declarer.global_grouping(source, stream)
        return
    for name, method in (("shuffle", declarer.shuffle_grouping), ("all", declarer.all_grouping),
                         ("none", declarer.none_grouping), ("direct", declarer.direct_grouping),
                         ("local_or_shuffle", declarer.local_or_shuffle_grouping)):
        if getattr(grouping, name, None) is not None:
            method(source, stream)
            return
    raise InvalidTopologyError(f"{where}: grouping {kind or grouping!r} of {source}:{stream} is a Java "
                               f"custom grouping, which storm-py cannot run")


def to_storm(cls: type, root: Path | None, conf: dict[str, Any]) -> tuple[StormTopology, dict[str, Any]]:
    """The StormTopology of a streamparse Topology class and the conf it declares (its `config`,
    and config.json's serializer as topology.multilang.serializer, which a run's conf may
    override: streamparse_run is told the serializer when it starts)."""
    name = cls.__name__
    project = project_config(root) if root is not None else {}
    serializer = str(conf.get("topology.multilang.serializer") or project.get("serializer") or "json")
    src = root / SRC_DIR if root is not None and (root / SRC_DIR).is_dir() else root
    b = TopologyBuilder()
    for spec in cls.specs:
        where = f"streamparse topology {name}, component {spec.name!r}"
        shell = getattr(spec.component_object, "shell", None)
        if shell is None:
            raise InvalidTopologyError(f"{where} is a Java component, which storm-py cannot run "
                                       f"(only shell components: Python spouts and bolts)")
        par = spec.par
        if not isinstance(par, int):
            raise InvalidTopologyError(f"{where}: par is per environment ({par!r}); storm-py needs a number")
        script = shell.script
        by_conf = shell.execution_command == "streamparse_run" and "-s " not in f" {script} "
        outputs = {s: {"fields": list(info.output_fields), "direct": bool(info.direct)}
                   for s, info in (spec.common.streams or {}).items()}
        kind = ShellSpout if spec.name in cls.thrift_spouts else ShellBolt
        component = kind(shell.execution_command, script or None, outputs=outputs,
                         cwd=None if src is None else str(src),
                         python_path=[] if src is None else [str(src)], serializer_arg=by_conf)
        if kind is ShellSpout:
            declarer = b.set_spout(spec.name, component, par)
        else:
            declarer = b.set_bolt(spec.name, component, par)
            for stream_id, grouping in (spec.common.inputs or {}).items():
                _grouping(declarer, stream_id.componentId, stream_id.streamId, grouping, where)
        try:
            component_conf = json.loads(spec.common.json_conf or "{}")
        except ValueError as exc:
            raise InvalidTopologyError(f"{where}: its config is not JSON: {exc}") from None
        if component_conf:
            declarer.add_configurations(component_conf)
    topology_conf = dict(getattr(cls, "config", None) or {})
    topology_conf.setdefault("topology.multilang.serializer", serializer)
    return b.create_topology(), topology_conf
