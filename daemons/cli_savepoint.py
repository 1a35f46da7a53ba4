"""`storm-py savepoint`, `storm-py savepoints` and `storm-py swap` (daemons/swap.py runs them);
`jar submit --from-savepoint` is in daemons/cli_jar.py and starts through daemons/swap.py too."""

from __future__ import annotations

import time
from pathlib import Path

import click

from daemons.cli_admin import NimbusSession
from daemons.cli_jar import new_code
from daemons.cli_options import command, common_options
from daemons.swap import store_for
from executor.savepoints.plan import SavepointRefused
from executor.state.errors import StateUnavailableError

DEFAULT_WAIT_SECS = 120.0
DIR_HELP = ("A directory for the savepoints of a topology whose state is in the memory provider (its workers "
            "write them: every worker's host must reach it). Redis topologies keep theirs in Redis.")


def _fail(exc: BaseException) -> click.ClickException:
    return click.ClickException(str(exc))


@command()
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, help=DIR_HELP)
@common_options
def savepoint(name, directory, conf):
    """Keep the last complete checkpoint of running exactly-once topology NAME as a savepoint."""
    from daemons.swap import check_mode, running, take, take_to_dir

    try:
        with NimbusSession(conf) as nimbus:
            run = running(nimbus, name)
            with store_for(conf, run.details.conf, directory) as store:
                if directory:
                    check_mode(name, run.details.conf, "the", str(store.root))
                    manifest, _snap = take_to_dir(nimbus, store, name, run, time.monotonic() + DEFAULT_WAIT_SECS)
                else:
                    manifest, _snap = take(store, name, run)
    except (SavepointRefused, StateUnavailableError) as exc:
        raise _fail(exc) from None
    click.echo(f"savepoint {manifest.id} of topology {name} at checkpoint {manifest.txid} "
               f"({_shape_line(manifest)})")


def _shape_line(manifest) -> str:
    return ", ".join(f"{c} x{s.tasks}" + ("" if c in manifest.stateful else " (no state)")
                     for c, s in sorted(manifest.components.items()) if not c.startswith(("$", "__")))


@command()
@click.argument("name")
@click.option("--delete", "delete_id", default=None, metavar="ID", help="Delete savepoint ID instead.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, help=DIR_HELP)
@common_options
def savepoints(name, delete_id, directory, conf):
    """List the savepoints kept of topology NAME (in its Redis, from storm.yaml and -c, or in --dir)."""
    try:
        with store_for(conf, {}, directory) as store:
            if delete_id:
                store.delete(name, delete_id)
                click.echo(f"deleted savepoint {delete_id} of topology {name}")
                return
            kept = store.manifests(name)
    except (SavepointRefused, StateUnavailableError) as exc:
        raise _fail(exc) from None
    if not kept:
        click.echo(f"No savepoints of topology {name}.")
        return
    rows = [("ID", "TAKEN", "TXID", "COMPONENTS")]
    rows += [(m.id, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.time_secs)), str(m.txid), _shape_line(m))
             for m in kept]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


@command()
@click.argument("name")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--wait", "wait_secs", type=click.FloatRange(min=1.0), default=DEFAULT_WAIT_SECS, show_default=True,
              help="Seconds to wait for the spouts to stop at a committed checkpoint and the old topology to go.")
@click.option("--allow-dropped-state", is_flag=True,
              help="Start even if a component with state in the old topology is not in the new one.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, help=DIR_HELP)
@common_options
def swap(name, path, wait_secs, allow_dropped_state, directory, conf, overrides):
    """Replace running exactly-once topology NAME by the code at PATH, from its state: the spouts
    stop at a checkpoint, it commits, and PATH starts from it under the same name."""
    import tempfile

    from daemons import swap as steps
    from daemons.cli_jar import submit_package

    with tempfile.TemporaryDirectory(prefix="storm-py-swap-") as tmp:
        package, shapes, new_conf = new_code(Path(path), conf, overrides, Path(tmp))
        try:
            with NimbusSession(conf) as nimbus, store_for(conf, new_conf, directory) as store:
                def submit(start_conf) -> str:
                    return submit_package(nimbus, package, name, {**overrides, **start_conf})

                manifest, storm_id = steps.swap(nimbus, store, name, shapes, new_conf, submit, wait_secs,
                                                allow_dropped_state, say=click.echo)
        except (SavepointRefused, StateUnavailableError) as exc:
            raise _fail(exc) from None
    click.echo(f"swapped topology {name}: {storm_id} started from savepoint {manifest.id} "
               f"(checkpoint {manifest.txid})")
