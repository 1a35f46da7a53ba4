# Types of executor/rotating_map.py for its compiled build (executor/core/__init__.py).
cdef class RotatingMap:
    cdef list _buckets
    cdef object _expired
