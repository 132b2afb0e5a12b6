# cython: language_level=3, boundscheck=False, wraparound=False
"""The machine's round-trip floor (bench_latency's "floor" pair, and the cache-line round trip
bench_bus measures before every run): two processes bounce a counter through two cache lines of
shared memory with the bus's own acquire loads and release stores (mappedbus_py/_core/_atomic.h), in
C: no bus, no Python in the loop. What a round trip costs on this machine in this minute; a bus
round trip moves at least these two lines. Built on first use by pyximport into build/perf-pyx."""
import mmap
import os

import numpy as np

from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from posix.unistd cimport getppid, pid_t
from posix.wait cimport waitpid, WNOHANG

cdef extern from "_atomic.h" nogil:
    int64_t load_acquire_i64(const void *p)
    void store_release_i64(void *p, int64_t v)

cdef enum:
    # The ping line and the pong line, two lines apart (the adjacent-line prefetcher pairs lines).
    PING = 0
    PONG = 128
    SIZE = 4096


cdef inline int64_t now_ns() noexcept nogil:
    # CLOCK_MONOTONIC: the clock of time.perf_counter_ns and System.nanoTime, as the bus pairs use.
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1000000000 + t.tv_nsec


cdef void echo(char *base, int64_t total, pid_t parent) noexcept nogil:
    cdef int64_t i
    cdef long spins = 0
    for i in range(1, total + 1):
        while load_acquire_i64(base + PING) != i:
            spins += 1
            if (spins & 0xFFFFF) == 0 and getppid() != parent:
                return          # the initiator is gone: do not spin on
        store_release_i64(base + PONG, i)


def round_trips(int64_t n, int64_t warmup):
    """``warmup`` untimed then ``n`` timed round trips between this process and a forked echo
    over shared memory; returns their times (ns, int64)."""
    mm = mmap.mmap(-1, SIZE)        # anonymous and shared: the child sees the same lines
    cdef unsigned char[::1] buf = mm
    cdef char *base = <char *>&buf[0]
    out = np.zeros(n, np.int64)
    cdef int64_t[::1] rtt = out
    cdef int64_t i, t0
    cdef long spins = 0
    cdef int status
    cdef pid_t parent = os.getpid(), child
    child = os.fork()
    if child == 0:
        try:
            with nogil:
                echo(base, n + warmup, parent)
        finally:
            os._exit(0)
    try:
        with nogil:
            for i in range(1, warmup + n + 1):
                t0 = now_ns()
                store_release_i64(base + PING, i)
                while load_acquire_i64(base + PONG) != i:
                    spins += 1
                    if (spins & 0xFFFFF) == 0 and waitpid(child, &status, WNOHANG) != 0:
                        break       # the echo is gone (reaped here)
                if i > warmup:
                    rtt[i - warmup - 1] = now_ns() - t0
    finally:
        try:
            os.waitpid(child, 0)
        except ChildProcessError:
            pass            # reaped in the loop
    if load_acquire_i64(base + PONG) != warmup + n:
        raise RuntimeError("the echo process stopped before the last round trip")
    del buf
    mm.close()
    return out
