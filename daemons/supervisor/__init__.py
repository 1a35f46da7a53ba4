"""Supervisor: keeps exactly the assigned workers alive on this host's slots (Storm's supervisor.clj).

Kept import-free so that importing one pure submodule (slot, local_assignments, worker_state)
pulls nothing else.
"""
