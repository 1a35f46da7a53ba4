"""`storm-py jar ...`: build and submit topology packages.

Kept apart from daemons/cli.py, which adds this group. The submitter imports the topology file
on the client, as Storm runs the user's main class; Nimbus only ever reads the manifest.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, Mapping

import click

from cluster_state.config import ConfigError, merge_configs
from daemons.cli_options import common_options, group
from executor.errors import InvalidTopologyError
from executor.package import (
    MAX_BYTES_KEY,
    Manifest,
    build_package,
    daemon_keys_note,
    file_checksum,
    is_daemon_key,
    without_daemon_keys,
)
from executor.state.provider import CONFIG_KEY

log = logging.getLogger(__name__)


@group()
def jar() -> None:
    """Build and submit topology packages (a zip of the topology file's directory + manifest)."""


def package_max_bytes(conf: Mapping[str, Any]) -> int:
    # Always present (packaged defaults) and range-checked by the config schema.
    return int(conf[MAX_BYTES_KEY])


def _note_third_party(modules: Mapping[str, str | None]) -> None:
    if modules:
        named = ", ".join(f"{m} ({v})" if v else m for m, v in sorted(modules.items()))
        click.echo(f"note: the topology imports {named}, installed here but not packaged: every supervisor's "
                   f"Python must have {'it' if len(modules) == 1 else 'them'} (a worker's ImportError otherwise)",
                   err=True)


def _warn_daemon_keys(conf: Mapping[str, Any], where: str) -> None:
    note = daemon_keys_note((k for k in conf if is_daemon_key(k)), where)
    if note:
        click.echo(f"warning: {note}", err=True)


def build_from_topology_file(topology_path: Path, out: Path, conf: Mapping[str, Any]) -> Manifest:
    """Import the topology file, then package its directory with the structure and its config.
    Shared by `jar build` and `jar submit FILE.py`; failures are ClickExceptions naming the culprit."""
    from executor.multilang.streamparse import project_root
    from executor.topology import copy_for_task
    from executor.topology_file import load_topology_file, third_party_modules

    try:
        before = set(sys.modules)
        tf = load_topology_file(topology_path)
        for comp, obj in sorted(tf.topology.objs.items()):
            copy_for_task(obj, comp)  # what every worker does per task: refused here, not in a crash loop
        # a streamparse project's topology: the package holds the project (src/, config.json)
        root = project_root(tf.path)
        _note_third_party(third_party_modules(set(sys.modules) - before, root or tf.path.parent))
        topo_conf = merge_configs(tf.config, source=f"{tf.path} config")
        _warn_daemon_keys(topo_conf, f"{tf.path} config")
        topo_conf = without_daemon_keys(topo_conf)
        src, name = (root, f"{tf.path.parent.name}/{tf.path.name}") if root else (tf.path.parent, tf.path.name)
        return build_package(src, name, out, structure=tf.topology.structure.to_dict(),
                             conf=topo_conf, max_bytes=package_max_bytes(conf))
    except (InvalidTopologyError, ConfigError) as exc:  # PackageError is an InvalidTopologyError
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write package {out}: {exc}") from None


@jar.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--file", "file_name", default="topology.py", show_default=True,
              help="The topology file, by its name inside DIRECTORY.")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The package zip to write.")
@common_options
def build(directory, file_name, output, conf):
    """Package DIRECTORY (holding the topology file) into a zip, without submitting it."""
    if Path(file_name).name != file_name:
        raise click.ClickException(f"--file {file_name!r} must be a file name inside {directory} "
                                   f"(the topology file sits at the package root)")
    topology_path = Path(directory) / file_name
    if not topology_path.is_file():
        raise click.ClickException(f"topology file {topology_path} does not exist")
    out = Path(output)
    manifest = build_from_topology_file(topology_path, out, conf)
    click.echo(f"built package {output} ({len(manifest.files)} files, {out.stat().st_size} bytes, "
               f"checksum {file_checksum(out)})")


def upload(client, path: Path) -> str:
    """Upload a package in chunks with its checksum; returns the upload id."""
    size = path.stat().st_size
    reply = client.call("begin_upload", size=size, checksum=file_checksum(path))
    upload_id, chunk = reply["upload_id"], int(reply["chunk_bytes"])
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            data = f.read(chunk)
            client.call("upload_chunk", upload_id=upload_id, offset=offset, data=data)
            offset += len(data)
    return upload_id


def _default_name(path: Path) -> str:
    from executor.topology_file import default_name

    if path.suffix == ".py":
        return default_name(path)
    return path.stem.replace(".", "-") or "topology"


def _topology_file_or_zip(_ctx, _param, value: str) -> str:
    if Path(value).is_dir():
        files = sorted(p.name for p in Path(value).glob("*.py"))[:3]
        hint = f" (here: {', '.join(files)}{', ...' if len(files) == 3 else ''})" if files else ""
        raise click.BadParameter(f"{value} is a directory; submit takes the topology .py file in it{hint} "
                                 f"or a package .zip (storm-py jar build DIR makes one)")
    return value


def submit_package(client, package: Path, name: str, overrides: Mapping[str, Any], inactive: bool = False,
                   **start: Any) -> tuple[str, list[str]]:
    """Upload a package and submit it as `name` (`start`: from which savepoint); the new
    topology's id, and what Nimbus notes of its start (state it continues)."""
    from executor.package import without_secrets

    upload_id = upload(client, package)
    answer = client.call("submit", name=name, upload_id=upload_id,
                         initial_status="inactive" if inactive else "active",
                         client_timeout_secs=client.timeout_secs,
                         conf=without_daemon_keys(without_secrets(overrides)), **start)
    return answer["id"], list(answer.get("notes") or ())


def new_code(path: Path, conf: Mapping[str, Any], overrides: Mapping[str, Any], tmp: Path):
    """Package the topology at `path` (a .py file or a package .zip); (package, its shapes, its conf
    as `jar submit` builds it: the packaged defaults and storm.yaml < its own config < -c)."""
    from executor.package import read_manifest
    from executor.savepoints.shaping import shapes_of

    if path.suffix == ".zip":
        package = path
        try:
            manifest = read_manifest(package, max_bytes=package_max_bytes(conf))
        except InvalidTopologyError as exc:
            raise click.ClickException(str(exc)) from None
    else:
        package = tmp / "topology.zip"
        manifest = build_from_topology_file(path, package, conf)
    topo_conf = {**without_daemon_keys(conf), **manifest.conf, **overrides}
    return package, shapes_of(manifest.structure(), topo_conf), topo_conf


@jar.command()
@click.argument("path", type=click.Path(exists=True), callback=_topology_file_or_zip)
@click.option("--name", default=None, help="Topology name (default: the .py file's directory or the zip's name).")
@click.option("--inactive", is_flag=True, help="Submit without activating its spouts.")
@click.option("--from-savepoint", "savepoint_id", default=None, metavar="ID",
              help="Start from savepoint ID of the topology's name (storm-py savepoints NAME lists them).")
@click.option("--allow-dropped-state", is_flag=True,
              help="With --from-savepoint: start even if a component with state in it is not in this topology.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="With --from-savepoint: the savepoint directory (a topology whose state is in the memory provider).")
@click.option("--allow-repeated-output", is_flag=True,
              help="With --from-savepoint: start even if the topology committed checkpoints after the savepoint "
                   "(their output, e.g. its table's rows, is then written again).")
@common_options
def submit(path, name, inactive, savepoint_id, allow_dropped_state, directory, allow_repeated_output, conf,
           overrides):
    """Submit a topology: PATH is a topology .py file (its directory is packaged) or a package .zip."""
    import tempfile

    from daemons.cli_admin import NimbusSession

    path = Path(path)
    name = name or _default_name(path)
    # -c values also reach this client (nimbus.seeds finds Nimbus); daemon keys go no further.
    _warn_daemon_keys(overrides, "-c")
    given = [o for o, v in (("--dir", directory), ("--allow-dropped-state", allow_dropped_state),
                            ("--allow-repeated-output", allow_repeated_output)) if v]
    if given and not savepoint_id:
        raise click.UsageError(f"{given[0]} goes with --from-savepoint")
    with tempfile.TemporaryDirectory(prefix="storm-py-submit-") as tmp:
        package, _shapes, _topo_conf = new_code(path, conf, overrides, Path(tmp))
        with NimbusSession(conf) as client:
            if savepoint_id and name in {t["name"] for t in client.call("cluster_info")["topologies"]}:
                raise click.ClickException(f"topology {name!r} is running: kill it first, or replace it with "
                                           f"`storm-py swap {name} FILE`")
            # the provider config goes along (its password: a secret the stored conf leaves out), for
            # the state the topology starts from: a savepoint, or what its earlier run left
            start = {"provider_config": conf.get(CONFIG_KEY)}
            if savepoint_id:
                start.update(from_savepoint=savepoint_id, allow_dropped_state=allow_dropped_state, dir=directory,
                             allow_repeated_output=allow_repeated_output)
            storm_id, notes = submit_package(client, package, name, overrides, inactive, **start)
    click.echo(f"submitted topology {name} as {storm_id}" + (f" from savepoint {savepoint_id}" if savepoint_id else ""))
    for note in notes:
        click.echo(f"note: {name} {note}", err=True)
