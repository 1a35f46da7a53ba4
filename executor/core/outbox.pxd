# Types of executor/core/outbox.py for its compiled build (executor/core/__init__.py).
cimport cython

from executor.routing cimport StreamOut
from executor.tuple cimport Tuple

cdef unsigned long long _MASK, _GAMMA, _MIX1, _MIX2
cdef unsigned long long _edge_state

@cython.locals(z=cython.ulonglong)
cdef inline object _edge_id()


cdef class Outbox:
    cdef public object component_id
    cdef list _slot_queues
    cdef object _task_slot
    cdef list _bufs
    cdef Py_ssize_t _batch_size
    cdef public object pending_emits
    cdef dict _pending_acks
    cdef list _acker_tasks
    cdef Py_ssize_t _n_ackers
    cdef public bint has_ackers
    cdef object _local_acker
    cdef int _root_bits
    cdef object _listener
    cdef object _max_tuple_bytes
    cdef object _large_bytes
    cdef object _report_error
    cdef object _new_routes
    cdef object _untracked_fail
    cdef bint _sealing
    cdef object _tasks

    @cython.locals(out=StreamOut)
    cpdef route(self, dict routes, task, stream, values, bint direct=*)
    cpdef _counted(self, task, StreamOut out, values, targets)
    cpdef emit(self, task, StreamOut out, values, targets)
    @cython.locals(n=Py_ssize_t, sent=Py_ssize_t, out=StreamOut)
    cpdef emit_many(self, task, dict routes, stream, many)
    @cython.locals(i=Py_ssize_t, bs=Py_ssize_t)
    cdef _place(self, targets, tup)
    @cython.locals(a=Tuple, bs=Py_ssize_t, a2i=dict, roots=dict)
    cpdef emit_anchored(self, task, StreamOut out, values, targets, anchors)
    cpdef emit_rooted(self, task, StreamOut out, values, targets, root)
    @cython.locals(bs=Py_ssize_t)
    cpdef _rooted(self, task, StreamOut out, values, targets, root)
    cpdef emit_tracked(self, task, StreamOut out, values, targets)
    cpdef _flush_slot(self, Py_ssize_t i)
    cpdef send(self, target, payload)
    @cython.locals(a2i=dict, pending=dict)
    cpdef ack(self, tup)
    cpdef fail(self, tup)
    cpdef to_acker(self, root, payload)
    cpdef _send_pending_acks(self)
    cpdef flush(self)
    cpdef begin_barriers(self)
    cpdef end_barriers(self)
