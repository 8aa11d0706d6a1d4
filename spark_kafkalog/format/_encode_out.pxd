# What Cython uses of _encode_out.h (the encode kernel's output-buffer C).
# Extern declarations only: no module.
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t

cdef extern from "_encode_out.h":
    void kl_hint_hugepages(void* p, size_t n) nogil
    void kl_copy_field(uint8_t* d, const uint8_t* s, size_t n) nogil
    int kl_bytes_reset_hash(PyObject* o)
