# Types of executor/core/collectors.py for its compiled build (executor/core/__init__.py).
cimport cython

from executor.core.outbox cimport Outbox
from executor.serialization cimport TupleColumn
from executor.tuple cimport Tuple


cdef class _TaskCollector:
    cdef object _ex
    cdef readonly Outbox _ob
    cdef readonly object _task
    cdef readonly dict _routes


cdef class OutputCollector(_TaskCollector):
    pass


cdef class BasicOutputCollector:
    cdef readonly OutputCollector _collector
    cdef public Tuple input  # the tuple being executed (None between executes)
    cdef readonly Outbox _ob
    cdef readonly object _task
    cdef readonly dict _routes


cdef class SpoutOutputCollector(_TaskCollector):
    pass


@cython.locals(i=Py_ssize_t)
cpdef run_basic_batch(BasicOutputCollector basic, object user, object batch)

cdef _run_one(BasicOutputCollector basic, OutputCollector collector, Outbox ob, object user_execute,
              object user, object tup, bint anchored)
