# Types of executor/grouping.py for its compiled build (executor/core/__init__.py).
cdef class Grouper:
    pass


cdef class ShuffleGrouper(Grouper):
    cdef object _rng
    cdef list _targets
    cdef Py_ssize_t _i
    cdef Py_ssize_t _n


cdef class FieldsGrouper(Grouper):
    cdef list _targets
    cdef Py_ssize_t _n
    cdef list _idx
    cdef object _single
    cdef dict _cache
    cdef bint _mixed
