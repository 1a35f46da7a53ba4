# Types of executor/spouts/stream_cursor.py for its compiled build (executor/core/__init__.py).

from executor.spouts.stream_ledger cimport StreamLedger


cdef class StreamCursor:
    cdef readonly StreamLedger ledger
    cdef readonly object fetcher
    cdef object ready
    cdef object acks
    cdef object problems
    cdef object on_problems
    cdef object emit
    cdef readonly object stream0
    cdef readonly bint multi
    cdef readonly Py_ssize_t wake_at
    cdef public Py_ssize_t taken
    cdef list batch
    cdef Py_ssize_t pos
    cdef int kind
    cdef object stream
    cdef dict last
    cdef Py_ssize_t rewinds
    cdef Py_ssize_t awaiting

    cpdef Py_ssize_t budget(self)
    cpdef bint next_tuple(self)
    cpdef ack(self, object msg_id)
    cpdef tuple key(self, object msg_id)
