"""Nimbus: the master daemon (RPC server, code store, scheduler, topology state machine, monitor).

Kept import-free so that importing one submodule (e.g. the pure scheduler) pulls nothing else.
"""
