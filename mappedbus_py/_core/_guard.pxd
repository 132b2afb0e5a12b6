# cython: language_level=3
# Declarations of _guard.h: the SIGBUS guard of bus mappings. Only _mapping registers
# mappings (the registry is per module); readers and writers only test the dead flag.

cdef extern from "_guard.h" nogil:
    int guard_install()
    int guard_register(void *base, size_t size, int *dead)
    void guard_unregister(int slot)
    int guard_is_dead(const int *dead)
