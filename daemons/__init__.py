"""Daemons: nimbus, supervisor, LocalCluster, testing helpers and the CLI."""
