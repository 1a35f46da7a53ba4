"""Session-scoped real ZooKeeper fixture (filled in by the cluster-state work)."""
