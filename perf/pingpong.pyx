# cython: language_level=3, boundscheck=False, wraparound=False
"""The machine's round-trip floor (bench_latency's "floor" pair): two processes bounce a counter
through two cache lines of a shared /dev/shm file with the bus's own acquire loads and release
stores (mappedbus_py/_atomic.h), in C: no bus, no Python in the loop. What a round trip costs on
this machine in this minute; a bus round trip moves at least these two lines. Built on first
use by pyximport into build/perf-pyx."""
import mmap

import numpy as np

from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef extern from "_atomic.h" nogil:
    int64_t load_acquire_i64(const void *p)
    void store_release_i64(void *p, int64_t v)

# The ping line and the pong line, two lines apart (the adjacent-line prefetcher pairs lines).
cdef enum:
    PING = 0
    PONG = 128
    FILE_SIZE = 4096


cdef inline int64_t now_ns() noexcept nogil:
    # CLOCK_MONOTONIC: the clock of time.perf_counter_ns and System.nanoTime, as the bus pairs use.
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1000000000 + t.tv_nsec


def _map(path):
    with open(path, "r+b") as f:
        return mmap.mmap(f.fileno(), FILE_SIZE)


def echo(path, int64_t total, ready=None):
    """Answer ``total`` pings: wait for ping == i, store pong = i. ``ready()`` once mapped."""
    mm = _map(path)
    cdef unsigned char[::1] buf = mm
    cdef char *base = <char *>&buf[0]
    cdef int64_t i
    if ready is not None:
        ready()
    with nogil:
        for i in range(1, total + 1):
            while load_acquire_i64(base + PING) != i:
                pass
            store_release_i64(base + PONG, i)
    del buf
    mm.close()


def initiate(path, int64_t n, int64_t warmup):
    """``warmup`` untimed then ``n`` timed round trips; returns their times (ns, int64)."""
    mm = _map(path)
    cdef unsigned char[::1] buf = mm
    cdef char *base = <char *>&buf[0]
    out = np.zeros(n, np.int64)
    cdef int64_t[::1] rtt = out
    cdef int64_t i, t0
    with nogil:
        for i in range(1, warmup + n + 1):
            t0 = now_ns()
            store_release_i64(base + PING, i)
            while load_acquire_i64(base + PONG) != i:
                pass
            if i > warmup:
                rtt[i - warmup - 1] = now_ns() - t0
    del buf
    mm.close()
    return out
