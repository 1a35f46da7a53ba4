"""What Nimbus answers, typed: `cluster_info` (cluster.py), `topology_details` (details.py) and
`topology_info`, derived from it (info.py).

The answers cross Nimbus's RPC (ZeroMQ + msgpack) as plain maps with string keys; that shape is
fixed (other processes, the REST API and the tests read it). Nimbus builds these classes and
sends `to_wire()`; a reader (daemons/reports/, the UI, the CLI) takes `from_wire(answer)`, which
names the key it misses rather than failing later on a KeyError. Below daemons/nimbus/ and
daemons/reports/ both: neither imports the other for them.
"""
