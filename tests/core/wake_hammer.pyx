# cython: language_level=3, boundscheck=False, wraparound=False
"""The lost-wake-up window hammered with the wake protocol itself (mappedbus_py/_core/_wake.h): a
forked parker waits for record i exactly as a reader does (prepare, look, wait, done) while
the writer commits record i after a random delay that lands before, inside and after the
parker's registration, then wakes as a writer does. Built on first use by pyximport."""
import mmap
import os

from libc.stdint cimport int32_t, int64_t, uint32_t
from posix.unistd cimport getppid, pid_t

from mappedbus_py._core._atomic cimport load_acquire_i32, cas_i32, load_acquire_i64, store_release_i64, cpu_relax
from mappedbus_py._core._wake cimport (wake_init, wake_claim, wake_prepare, wake_seq, wake_wait, wake_done,
                                 wake_needed, wake_all, wake_now_ns)

cdef enum:
    CONSUMED = 4096           # int64: records the parker has taken
    RESULTS = 4096 + 64       # int64 x 4: lost, parked, woken, done
    STATUS = 8192             # int32 per record


cdef void parker(char *base, int64_t n, int64_t self_wake_ns, pid_t parent) noexcept nogil:
    cdef int slot = wake_claim(base, 1, 0)
    cdef int64_t i, lost = 0, parked = 0, woken = 0, t0
    cdef uint32_t v
    cdef char *status
    for i in range(n):
        status = base + STATUS + 4 * (i % 1000000)
        while True:
            v = wake_prepare(base, slot)
            if load_acquire_i32(status) != 0:
                wake_done(base, slot)
                break
            parked += 1
            t0 = wake_now_ns()
            wake_wait(base, v, self_wake_ns)
            wake_done(base, slot)
            if wake_now_ns() - t0 >= self_wake_ns:
                lost += 1         # the whole bound passed: no wake came
            elif wake_seq(base) != v:
                woken += 1
            if load_acquire_i32(status) != 0:
                break
            if getppid() != parent:
                return
        store_release_i64(base + CONSUMED, i + 1)
    store_release_i64(base + RESULTS, lost)
    store_release_i64(base + RESULTS + 8, parked)
    store_release_i64(base + RESULTS + 16, woken)
    store_release_i64(base + RESULTS + 24, 1)


def hammer(int64_t n, int64_t max_delay_spins, double self_wake_s, unsigned int seed):
    """Returns (lost, parked, woken): ``lost`` cycles in which the parker waited out its
    self-wake bound, ``parked`` cycles in which it went to sleep, ``woken`` wakes it got."""
    mm = mmap.mmap(-1, STATUS + 4 * 1000000)
    cdef unsigned char[::1] buf = mm
    cdef char *base = <char *>&buf[0]
    cdef int64_t i, k, delay
    cdef unsigned int rnd = seed
    cdef pid_t parent = os.getpid()
    cdef int64_t self_wake_ns = <int64_t>(self_wake_s * 1e9)
    if wake_init(base) != 0:
        raise RuntimeError("wake_init failed")
    pid = os.fork()
    if pid == 0:
        try:
            with nogil:
                parker(base, n, self_wake_ns, parent)
        finally:
            os._exit(0)
    with nogil:
        for i in range(n):
            if i >= 1000000:
                # statuses are reused modulo 10^6: clear the one record i will use
                (<int32_t *>(base + STATUS + 4 * (i % 1000000)))[0] = 0
            while load_acquire_i64(base + CONSUMED) < i:
                cpu_relax()
            rnd = rnd * 1103515245 + 12345
            delay = (rnd >> 8) % (max_delay_spins + 1)
            for k in range(delay):
                cpu_relax()
            cas_i32(base + STATUS + 4 * (i % 1000000), 0, 1)
            if wake_needed(base):
                wake_all(base)
    os.waitpid(pid, 0)
    if load_acquire_i64(base + RESULTS + 24) != 1:
        raise RuntimeError("the parker did not finish")
    return (load_acquire_i64(base + RESULTS), load_acquire_i64(base + RESULTS + 8),
            load_acquire_i64(base + RESULTS + 16))
