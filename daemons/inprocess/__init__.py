"""The in-process pieces LocalCluster plugs into the real Nimbus, supervisor and worker code:
a code store of live topology objects, worker "processes" that are threads of this process
(`WorkerProcess` itself, on the in-process transport and the in-memory cluster state)."""
