"""Cluster state: configuration, ZooKeeper layout and records, on-disk LocalState.

Never imports executor or daemons (dependencies point cluster_state <- executor <- daemons).
"""
