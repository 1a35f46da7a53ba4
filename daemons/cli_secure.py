"""`storm-py secure`: make a cluster's credentials, and set the ZooKeeper ACLs of a cluster that
ran without them (docs/operations.md, "Security")."""

from __future__ import annotations

import os
from pathlib import Path

import click
import yaml

from cluster_state.config import ConfigError
from daemons.cli_options import common_options, group


@group()
def secure() -> None:
    """Credentials for ZooKeeper, Nimbus, the UI and the logviewer."""


@secure.command("credentials")
@click.option("--write", is_flag=True, help="Add them to the storm.yaml of --conf-dir / $STORM_CONF_DIR "
                                            "(created, with the directory, when missing) instead of printing them.")
@click.option("--conf-dir", type=click.Path(file_okay=False),
              help="Directory of the storm.yaml --write adds to (default: $STORM_CONF_DIR).")
def credentials_cmd(write: bool, conf_dir: str | None) -> None:
    """Make fresh credentials: ZooKeeper digest credentials for the daemons (each topology's own
    identity is derived from them), the secret of Nimbus's RPC, the UI and the logviewer, and
    the cluster's CurveZMQ key pair (links between workers and to Nimbus encrypted, open only to
    its holders). Every daemon and client of the cluster needs the same storm.yaml values."""
    # No config is read: the command only makes keys, and --write may be what creates storm.yaml.
    from cluster_state.acl_upgrade import new_credentials
    from executor.transport.curve import new_keys

    fresh = {**new_credentials(), **new_keys()}
    text = yaml.safe_dump(fresh, default_flow_style=False, sort_keys=False)
    if not write:
        click.echo("# storm-py secure credentials: add to the storm.yaml of every daemon and client\n" + text, nl=False)
        return
    conf_dir = conf_dir or os.environ.get("STORM_CONF_DIR")
    if not conf_dir:
        raise click.ClickException("--write needs --conf-dir (or $STORM_CONF_DIR): the directory of the storm.yaml "
                                   "to add the credentials to")
    path = Path(conf_dir) / "storm.yaml"
    try:
        existing = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, yaml.YAMLError) as exc:
        raise click.ClickException(f"{path}: cannot read it: {exc}") from None
    if not isinstance(existing, dict):
        existing = {}
    already = sorted(k for k in fresh if existing.get(k) is not None)
    if already:
        raise click.ClickException(f"{path} already sets {', '.join(already)}: not overwritten (to rotate "
                                   f"ZooKeeper credentials see docs/operations.md, 'Security')")
    created = not path.exists()
    try:
        Path(conf_dir).mkdir(parents=True, exist_ok=True)
        # Created private: the file holds secrets from its first byte.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("\n# Added by `storm-py secure credentials`\n" + text)
        os.chmod(path, 0o600)
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc}") from None
    click.echo(f"credentials {'written to new file' if created else 'added to'} {path} (mode 600); copy them to "
               f"every daemon's and client's storm.yaml, restart the daemons, then run `storm-py secure zookeeper` once")


@secure.command("zookeeper")
@click.option("--previous-payload", default=None, metavar="USER:PASSWORD",
              help="The daemons' earlier storm.zookeeper.auth.payload, when moving to new credentials.")
@common_options
def zookeeper_cmd(conf, previous_payload: str | None) -> None:
    """Set the ACL of every node the cluster has in ZooKeeper to what its credentials give new
    ones: the daemons may change them, each topology its own, everyone may read. Run once after
    adding credentials to a cluster that ran without them, or after rotating them."""
    from cluster_state.acl_upgrade import secure_tree

    try:
        report = secure_tree(conf, previous_payload)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # kazoo: unreachable, not authorized
        raise click.ClickException(f"ZooKeeper at {conf.get('storm.zookeeper.servers')}: "
                                   f"{type(exc).__name__}: {exc}") from None
    click.echo(f"{report.nodes} node(s) under {conf.get('storm.zookeeper.root')}: {report.changed} ACL(s) set")
