# Types of executor/state/kv.py for its compiled build (executor/core/__init__.py): its layers
# typed, so that the per-tuple `get` and `put` reach them without an attribute lookup. Providers
# subclass it in Python; `__dict__` keeps their attributes (and anyone's) as before.
cdef class KeyValueState:
    cdef dict __dict__
    cdef public object namespace
    cdef public dict _pending
    cdef public dict _prepared
    cdef public object _prepared_txid
    cdef public object _committed_txid
    cdef public dict _cache
    cdef public bint _complete
    cdef public set _forget
