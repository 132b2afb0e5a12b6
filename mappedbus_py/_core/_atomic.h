/* The only atomics in mappedbus_py. Named by operation, type and memory order, as
 * CPython's pyatomic.h does; read-modify-writes return the old value.
 *
 * Pairings (see layout.py for the offsets):
 *   limit:  fetch_add_i64 (writer allocates)  ->  load_acquire_i64 (reader polls)
 *           cas_i64 0 -> 8 (first writer)
 *   status: cas_i32 / cas_u8 0 -> 1 (writer commits; seq-cst, so it also releases the
 *           payload written before it)  ->  load_acquire_i32 / load_acquire_u8 (reader)
 *           cas_i32 / cas_u8 0 -> 2 (reader rolls back a timed-out record)
 *
 * The GCC/Clang __atomic builtins compile to lock-prefixed instructions on x86-64 and to
 * LDAR/STLR/CAS (or LDAXR/STLXR loops) on aarch64. The u8 forms serve statuses that are not
 * 4-byte aligned (record_size not a multiple of 4): the values 0/1/2 differ only in the
 * low byte, and a byte access is always aligned, so no split lock and no alignment fault.
 */
#ifndef MAPPEDBUS_ATOMIC_H
#define MAPPEDBUS_ATOMIC_H

#include <stdint.h>

#if !defined(__GNUC__) && !defined(__clang__)
#error "mappedbus_py needs GCC or Clang __atomic builtins"
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Mappedbus format is little-endian; big-endian hosts are not supported"
#endif

static inline int64_t load_acquire_i64(const void *p) {
    return __atomic_load_n((const int64_t *)p, __ATOMIC_ACQUIRE);
}

static inline int32_t load_acquire_i32(const void *p) {
    return __atomic_load_n((const int32_t *)p, __ATOMIC_ACQUIRE);
}

static inline uint8_t load_acquire_u8(const void *p) {
    return __atomic_load_n((const uint8_t *)p, __ATOMIC_ACQUIRE);
}

static inline void store_release_i64(void *p, int64_t v) {
    __atomic_store_n((int64_t *)p, v, __ATOMIC_RELEASE);
}

static inline int64_t fetch_add_i64(void *p, int64_t v) {
    return __atomic_fetch_add((int64_t *)p, v, __ATOMIC_SEQ_CST);
}

static inline int64_t cas_i64(void *p, int64_t expected, int64_t desired) {
    __atomic_compare_exchange_n((int64_t *)p, &expected, desired, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected; /* the old value: equal to the argument on success */
}

static inline int32_t cas_i32(void *p, int32_t expected, int32_t desired) {
    __atomic_compare_exchange_n((int32_t *)p, &expected, desired, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}

static inline uint8_t cas_u8(void *p, uint8_t expected, uint8_t desired) {
    __atomic_compare_exchange_n((uint8_t *)p, &expected, desired, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}

/* The wake file (_wake.h): a parker's registration and a writer's look at it form a Dekker
 * pair (each stores, then loads what the other stores), so both sides are seq-cst:
 *   reader: store_seq_cst_i32(armed, 1); fence_seq_cst(); load status  (then FUTEX_WAIT on seq)
 *   writer: cas status 0 -> 1 (seq-cst);  load_seq_cst_i32(armed)       (then exchange_i32(armed,
 *           0), and if it was 1: bump seq, FUTEX_WAKE)
 * at least one of the two sees the other's store. */
static inline int32_t load_seq_cst_i32(const void *p) {
    return __atomic_load_n((const int32_t *)p, __ATOMIC_SEQ_CST);
}

static inline void store_release_i32(void *p, int32_t v) {
    __atomic_store_n((int32_t *)p, v, __ATOMIC_RELEASE);
}

static inline void store_seq_cst_i32(void *p, int32_t v) {
    __atomic_store_n((int32_t *)p, v, __ATOMIC_SEQ_CST);
}

static inline int32_t exchange_i32(void *p, int32_t v) {
    return __atomic_exchange_n((int32_t *)p, v, __ATOMIC_SEQ_CST);
}

static inline int32_t fetch_add_i32(void *p, int32_t v) {
    return __atomic_fetch_add((int32_t *)p, v, __ATOMIC_SEQ_CST);
}

static inline void fence_seq_cst(void) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* The SIGBUS guard (_guard.h): its registry of mappings, read from a signal handler, and
 * the per-mapping dead flag the handler sets and every call checks. */
static inline uintptr_t load_acquire_uptr(const uintptr_t *p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store_release_uptr(uintptr_t *p, uintptr_t v) {
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline int load_acquire_int(const int *p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store_release_int(int *p, int v) {
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline void store_seq_cst_int(int *p, int v) {
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

static inline int load_seq_cst_int(const int *p) {
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static inline int load_relaxed_int(const int *p) {
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* A pause for spin loops: lets the sibling hyper-thread run and saves power. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
