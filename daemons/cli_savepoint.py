"""`storm-py savepoint`, `storm-py savepoints` and `storm-py swap` (daemons/swap.py has the
client's part; Nimbus runs a swap: daemons/nimbus/swaps/); `jar submit --from-savepoint` is in
daemons/cli_jar.py, a start Nimbus does (daemons/nimbus/swaps/starts.py)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from daemons.cli_admin import NimbusSession
from daemons.cli_options import command, common_options
from executor.savepoints.plan import SavepointRefused
from executor.savepoints.stores import store_for
from executor.state.errors import StateUnavailableError
from executor.state.provider import CONFIG_KEY

DEFAULT_WAIT_SECS = 120.0
# After the stop, what the rest of a swap may take (keep the savepoint, remove the old topology,
# write the new code's start and submit it) before the client stops following it.
AFTER_STOP_SECS = 120.0
DIR_HELP = ("A directory for the savepoints of a topology whose state is in the memory provider (its workers "
            "write them: every worker's host must reach it). Redis topologies keep theirs in Redis.")


def _fail(exc: BaseException) -> click.ClickException:
    return click.ClickException(str(exc))


def topology_conf(nimbus, name: str, conf) -> dict:
    """The conf of topology `name` as it runs (Nimbus's answer), else this command's: where its
    savepoints are (its state provider, as storm.yaml and -c name it for a topology that is gone)."""
    from daemons.rpc.protocol import REMOTE_ERRORS

    try:
        return dict(nimbus.call("topology_details", name=name)["conf"])
    except (click.ClickException, *REMOTE_ERRORS):
        return dict(conf)


@command()
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, help=DIR_HELP)
@common_options
def savepoint(name, directory, conf):
    """Keep the last complete checkpoint of running exactly-once topology NAME as a savepoint."""
    from daemons.swap import running, take, take_to_dir
    from executor.savepoints.stores import check_mode

    try:
        with NimbusSession(conf) as nimbus:
            run = running(nimbus, name)
            check_mode(name, run.details.conf, "the", directory)
            store = store_for(run.details.conf, directory, conf)
            try:
                if store.workers_write:
                    manifest, _snap = take_to_dir(nimbus, store, name, run, time.monotonic() + DEFAULT_WAIT_SECS)
                else:
                    manifest, _snap = take(store, name, run, conf)
            finally:
                store.close()
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
    """List the savepoints kept of topology NAME (in its Redis, as it runs or as storm.yaml and -c
    name it, or in --dir)."""
    try:
        topo_conf = conf
        if not directory:
            with NimbusSession(conf) as nimbus:
                topo_conf = topology_conf(nimbus, name, conf)
        store = store_for(topo_conf, directory, conf)
        try:
            if delete_id:
                store.delete(name, delete_id)
                click.echo(f"deleted savepoint {delete_id} of topology {name}")
                return
            kept = store.manifests(name)
        finally:
            store.close()
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
@click.argument("path", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option("--wait", "wait_secs", type=click.FloatRange(min=1.0), default=DEFAULT_WAIT_SECS, show_default=True,
              help="Seconds for the spouts to stop at a committed checkpoint before the swap is given up (the old "
                   "code then runs on).")
@click.option("--allow-dropped-state", is_flag=True,
              help="Start even if a component with state in the old topology is not in the new one.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None, help=DIR_HELP)
@click.option("--resume", is_flag=True,
              help="Follow the swap of NAME under way (its client gone) until it ends; no PATH.")
@common_options
def swap(name, path, wait_secs, allow_dropped_state, directory, resume, conf, overrides):
    """Replace running exactly-once topology NAME by the code at PATH, from its state: its spouts
    stop at a checkpoint, it commits, and PATH starts from it under the same name. Nimbus runs
    the swap: if this command dies, the topology runs the old code or the new one."""
    import tempfile

    from daemons import swap as client
    from daemons.cli_jar import new_code, upload

    if resume == bool(path):
        raise click.UsageError("give PATH (the new code), or --resume without it")
    with NimbusSession(conf) as nimbus:
        def status():
            return nimbus.call("swap_status", name=name)

        if resume:
            record = status()
            if record is None:
                raise click.ClickException(f"topology {name!r} has no swap under way or ended lately")
            deadline = time.monotonic() + max(0.0, record["deadline_secs"] - time.time()) + AFTER_STOP_SECS
        else:
            with tempfile.TemporaryDirectory(prefix="storm-py-swap-") as tmp:
                package, _shapes, _conf = new_code(Path(path), conf, overrides, Path(tmp))
                record = nimbus.call("swap", name=name, upload_id=upload(nimbus, package), conf=dict(overrides),
                                     wait_secs=wait_secs, allow_dropped_state=allow_dropped_state, dir=directory,
                                     provider_config=conf.get(CONFIG_KEY))
            deadline = time.monotonic() + wait_secs + AFTER_STOP_SECS
        try:
            record = client.follow(status, click.echo, deadline, record)
        except TimeoutError as exc:
            raise click.ClickException(f"the swap of topology {name!r} is still at step {exc} (Nimbus goes on with "
                                       f"it): `storm-py swap --resume {name}` follows it") from None
        except KeyboardInterrupt:
            raise click.ClickException(f"interrupted: Nimbus goes on with the swap of {name!r}; `storm-py swap "
                                       f"--resume {name}` follows it") from None
    try:
        click.echo(client.outcome(record))
    except SavepointRefused as exc:
        raise _fail(exc) from None
