# Types of executor/core/collectors.py for its compiled build (executor/core/__init__.py).
from executor.core.outbox cimport Outbox


cdef class _TaskCollector:
    cdef object _ex
    cdef readonly Outbox _ob
    cdef readonly object _task
    cdef readonly dict _routes


cdef class OutputCollector(_TaskCollector):
    pass


cdef class BasicOutputCollector:
    cdef readonly OutputCollector _collector
    cdef public object input
    cdef readonly Outbox _ob
    cdef readonly object _task
    cdef readonly dict _routes


cdef class SpoutOutputCollector(_TaskCollector):
    pass
