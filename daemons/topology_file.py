"""Loading a topology file: a Python file defining `topology` (and optionally `config`)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from executor.errors import InvalidTopologyError
from executor.topology import StormTopology


@dataclass
class TopologyFile:
    path: Path
    topology: StormTopology
    config: dict


def load_topology_file(path: str | Path) -> TopologyFile:
    """Import the file with its directory importable, so it can import sibling modules."""
    path = Path(path).resolve()
    if not path.is_file():
        raise InvalidTopologyError(f"topology file {path} does not exist")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_name = f"_storm_topology_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InvalidTopologyError(f"topology file {path} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except InvalidTopologyError:
        raise
    except Exception as exc:
        raise InvalidTopologyError(f"topology file {path} raised while loading: {type(exc).__name__}: {exc}") from exc
    topology = getattr(module, "topology", None)
    if topology is None:
        raise InvalidTopologyError(
            f"topology file {path} defines no module attribute 'topology' "
            f"(set topology = builder.create_topology())")
    if not isinstance(topology, StormTopology):
        raise InvalidTopologyError(
            f"topology file {path}: 'topology' is a {type(topology).__name__}, not the result of "
            f"TopologyBuilder.create_topology()")
    config = getattr(module, "config", None) or {}
    if not isinstance(config, dict):
        raise InvalidTopologyError(f"topology file {path}: 'config' must be a dict, got {type(config).__name__}")
    return TopologyFile(path, topology, dict(config))
