# Types of executor/serialization.py for its compiled build (executor/core/__init__.py).
cdef class TupleColumn:
    cdef public object task
    cdef public object source_task
    cdef public object stream
    cdef public object component
    cdef public object fields
    cdef public list values
    cdef public object anchors
