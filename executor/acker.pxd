# Types of executor/acker.py for its compiled build (executor/core/__init__.py).
from executor.rotating_map cimport RotatingMap


cdef class AckerLedger:
    cdef RotatingMap _pending

    cpdef _check(self, root, list entry)
