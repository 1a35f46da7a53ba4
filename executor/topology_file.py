"""Loading a topology file: a Python file defining `topology` (and optionally `config`)."""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from executor.errors import InvalidTopologyError
from executor.topology import StormTopology

log = logging.getLogger(__name__)


@dataclass
class TopologyFile:
    path: Path
    topology: StormTopology
    config: dict


def default_name(path: Path) -> str:
    """A topology's name when none is given: its file's directory (a streamparse project's
    topology: the file's name, as `sparse run` names it)."""
    from executor.multilang.streamparse import project_root

    base = path.stem if project_root(path) is not None else path.resolve().parent.name
    return base.replace(".", "-") or "topology"


def user_location(exc: BaseException, directory: Path) -> str | None:
    """`file:line` of the innermost frame of `exc` in the user's directory (None if none)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _within(f.filename, directory)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _within(filename: str, directory: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(directory)
    except (OSError, ValueError):
        return False


def load_topology_file(path: str | Path) -> TopologyFile:
    """Import the file with its directory importable, so it can import sibling modules.

    Whatever goes wrong (no file, the file raising or calling sys.exit, no `topology`) is an
    InvalidTopologyError naming the file; only KeyboardInterrupt passes through.
    """
    path = Path(path).resolve()
    if not path.exists():
        raise InvalidTopologyError(f"topology file {path} does not exist")
    if not path.is_file():
        raise InvalidTopologyError(f"topology file {path} is not a file")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    from executor.multilang import streamparse

    project = streamparse.project_root(path)
    if project is not None and (project / streamparse.SRC_DIR).is_dir():
        # a streamparse project's topology imports its components from src/
        src = str(project / streamparse.SRC_DIR)
        if src not in sys.path:
            sys.path.insert(0, src)
    module_name = f"_storm_topology_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InvalidTopologyError(f"topology file {path} cannot be imported as Python (name it *.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # Shell components made while the file loads run their subprocesses in its directory.
    from executor.multilang.component import PACKAGE_ROOT

    root_token = PACKAGE_ROOT.set(directory)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        sys.modules.pop(module_name, None)
        raise
    except InvalidTopologyError as exc:
        sys.modules.pop(module_name, None)
        raise InvalidTopologyError(f"topology file {path}: {exc}") from exc
    except SystemExit as exc:
        sys.modules.pop(module_name, None)
        raise InvalidTopologyError(
            f"topology file {path} called sys.exit({exc.code!r}) while loading; it must define "
            f"'topology' instead of running or exiting") from None
    except BaseException as exc:  # noqa: B036 - any failure of user code is reported, never propagated
        sys.modules.pop(module_name, None)
        where = user_location(exc, path.parent)
        log.debug("topology file %s raised while loading", path, exc_info=True)
        raise InvalidTopologyError(
            f"topology file {path} raised while loading: {type(exc).__name__}: {exc}"
            + (f" (at {where})" if where else "")) from None
    finally:
        PACKAGE_ROOT.reset(root_token)
    topology = getattr(module, "topology", None)
    declared: dict = {}
    if topology is None:
        classes = streamparse.topology_classes(module)
        if len(classes) > 1:
            raise InvalidTopologyError(f"topology file {path} defines {len(classes)} streamparse topologies "
                                       f"({', '.join(c.__name__ for c in classes)}); keep one per file")
        if classes:
            topology, declared = streamparse.to_storm(classes[0], project, {})
    if topology is None:
        raise InvalidTopologyError(
            f"topology file {path} defines no module attribute 'topology' "
            f"(set topology = builder.create_topology())")
    if not isinstance(topology, StormTopology):
        raise InvalidTopologyError(
            f"topology file {path}: 'topology' is a {type(topology).__name__}, not the result of "
            f"TopologyBuilder.create_topology()")
    config = getattr(module, "config", None)
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise InvalidTopologyError(f"topology file {path}: 'config' must be a dict, got {type(config).__name__}")
    return TopologyFile(path, topology, {**declared, **config})


# What storm-py itself brings: never "third-party" for a topology.
_OWN_PACKAGES = frozenset({"executor", "daemons", "cluster_state"})


def third_party_modules(new_modules: Iterable[str], topology_dir: Path) -> dict[str, str | None]:
    """Top-level modules a topology file's import brought in that neither the standard library,
    storm-py nor the packaged directory provides (they must be installed where workers run),
    with their distribution's version when known."""
    from importlib import metadata

    dists = metadata.packages_distributions()
    ours = _storm_py_requirements()
    found: dict[str, str | None] = {}
    for name in new_modules:
        top = name.partition(".")[0]
        if top in found or top.startswith("_") or top in sys.stdlib_module_names or top in _OWN_PACKAGES:
            continue
        if any(_normal(d) in ours for d in dists.get(top, ())):
            continue  # installed with storm-py wherever it runs
        module = sys.modules.get(top)
        origin = getattr(module, "__file__", None)
        if module is None or origin is None:
            continue  # namespace or built-in
        try:
            Path(origin).resolve().relative_to(topology_dir.resolve())
            continue  # a sibling module: packaged with the topology
        except ValueError:
            pass
        version = None
        for dist in dists.get(top, ()):
            try:
                version = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        found[top] = version
    return found


def _normal(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _storm_py_requirements() -> frozenset[str]:
    from importlib import metadata

    try:
        requires = metadata.requires("storm-py") or []
    except metadata.PackageNotFoundError:
        return frozenset()
    return frozenset(_normal(re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r)
