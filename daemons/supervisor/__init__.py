"""Supervisor: keeps exactly the assigned workers alive on this host's slots (seed 003).

Kept import-free so that importing one pure submodule (slot, local_assignments, worker_state)
pulls nothing else.
"""
