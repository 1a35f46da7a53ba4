# Types of executor/tuple.py for its compiled build (executor/core/__init__.py).
cdef class Fields:
    cdef readonly tuple _names
    cdef readonly dict _index


cdef class Tuple:
    cdef public object values
    cdef public object source_task
    cdef public object source_stream
    cdef public object source_component
    cdef public object fields
    cdef public object anchors_to_ids
    cdef public object ack_val
