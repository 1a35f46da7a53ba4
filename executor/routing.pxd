# Types of executor/routing.py for its compiled build (executor/core/__init__.py).
cdef class StreamOut:
    cdef public object component
    cdef public object stream
    cdef public object fields
    cdef public Py_ssize_t n
    cdef public bint direct
    cdef public list _groupers
    cdef public object _single
    cdef public object direct_tasks
    cdef public object targets
    cdef public list counts
