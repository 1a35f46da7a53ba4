"""Cluster state: configuration, ZooKeeper layout and records, on-disk LocalState.

Never imports executor or daemons (dependencies point cluster_state <- executor <- daemons).
kazoo is only imported when a ZooKeeper-backed state is created (cluster_state.zk).
"""

from .auth import ROLE_DAEMON, ROLE_TOPOLOGY
from .errors import (
    ClusterStateError,
    ClusterStateUnavailableError,
    DecodeError,
    LocalStateError,
    NodeExistsError,
    NodeTooLargeError,
    NoNodeError,
    NotAuthorizedError,
)
from .factory import mk_storm_cluster_state
from .local_state import (
    LS_APPROVED_WORKERS,
    LS_ID,
    LS_LOCAL_ASSIGNMENTS,
    LS_WORKER_HEARTBEAT,
    LocalState,
)
from .memory import InMemoryClusterState, InMemoryStore
from .protocol import ClusterState, ConnectionState, EventType
from .records import (
    SCHEMA_VERSION,
    STATUS_ACTIVE,
    STATUS_INACTIVE,
    STATUS_KILLED,
    STATUS_REBALANCING,
    Assignment,
    ErrorInfo,
    ExecutorBeat,
    LocalAssignment,
    LogConfig,
    LogLevel,
    NimbusRegistration,
    StormBase,
    SupervisorInfo,
    VersionedAssignment,
    WorkerDeath,
    WorkerHeartbeat,
)
from .storm import StormClusterState

__all__ = [
    "Assignment",
    "ClusterState",
    "ClusterStateError",
    "ClusterStateUnavailableError",
    "ConnectionState",
    "DecodeError",
    "ErrorInfo",
    "EventType",
    "ExecutorBeat",
    "InMemoryClusterState",
    "InMemoryStore",
    "LS_APPROVED_WORKERS",
    "LS_ID",
    "LS_LOCAL_ASSIGNMENTS",
    "LS_WORKER_HEARTBEAT",
    "LocalAssignment",
    "LocalState",
    "LocalStateError",
    "LogConfig",
    "LogLevel",
    "NimbusRegistration",
    "NodeTooLargeError",
    "NoNodeError",
    "NodeExistsError",
    "NotAuthorizedError",
    "ROLE_DAEMON",
    "ROLE_TOPOLOGY",
    "SCHEMA_VERSION",
    "STATUS_ACTIVE",
    "STATUS_INACTIVE",
    "STATUS_KILLED",
    "STATUS_REBALANCING",
    "StormBase",
    "StormClusterState",
    "SupervisorInfo",
    "VersionedAssignment",
    "WorkerDeath",
    "WorkerHeartbeat",
    "mk_storm_cluster_state",
]
