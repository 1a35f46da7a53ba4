# Types of executor/spouts/stream_ledger.py for its compiled build (executor/core/__init__.py).

cdef class StreamLedger:
    cdef public Py_ssize_t limit
    cdef public object max_deliveries
    cdef public set in_flight
    cdef public dict fails

    cpdef Py_ssize_t budget(self, Py_ssize_t held=*)
    cpdef bint take(self, object key)
    cpdef bint acked(self, object key)
    cpdef object failed(self, object key)
    cpdef forget(self, object key)


cpdef dict map_fields(object flat)
