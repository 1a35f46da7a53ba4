"""`mk_storm_cluster_state`: the entry point daemons and workers use."""

from __future__ import annotations

from typing import Any, Mapping

from .auth import ROLE_DAEMON
from .memory import InMemoryClusterState, InMemoryStore
from .protocol import ClusterState
from .settings import zk_settings
from .storm import StormClusterState


def mk_storm_cluster_state(
    conf: Mapping[str, Any],
    *,
    store: InMemoryStore | None = None,
    cluster_state: ClusterState | None = None,
    role: str = ROLE_DAEMON,
) -> StormClusterState:
    """A StormClusterState for `conf`.

    - default: connects to the ZooKeeper named by `storm.zookeeper.*` (chroot
      `storm.zookeeper.root`, created on first use), authenticating as the daemons
      (`role="daemon"`, `storm.zookeeper.auth.*`) or as a topology's workers
      (`role="topology"`, `storm.zookeeper.topology.auth.*`);
    - `store=`: local mode, a client of that shared in-memory store under the same root;
    - `cluster_state=`: an existing ClusterState, which `disconnect()` then leaves open.
    """
    if store is not None and cluster_state is not None:
        raise ValueError("pass either store or cluster_state, not both")
    if cluster_state is not None:
        if not isinstance(cluster_state, ClusterState):
            raise TypeError(f"cluster_state must implement ClusterState, got {type(cluster_state).__name__}")
        return StormClusterState(cluster_state, owns_cluster_state=False)
    if store is not None:
        cs: ClusterState = InMemoryClusterState(store, root=zk_settings(conf).root)
    else:
        from .zk import ZkClusterState  # kazoo only when ZooKeeper is actually used

        cs = ZkClusterState(conf, role=role)
    return StormClusterState(cs, owns_cluster_state=True)
