/* Named consumers: the consumer registry beside a bus (PATH.consumers, or DIR/bus.consumers
 * for a rolling bus), never inside the Mappedbus file. The layout is drawn in layout.py
 * (CONSUMERS_*, CONSUMER_*) and mirrored in Layout.java; a test checks they agree. The Java
 * port (interop/.../ConsumerRegistry.java) follows these steps one for one.
 *
 * Two kinds of change:
 *  - structural (an entry made or removed, its holder claimed or released, expired): under
 *    the file's lock word, a compare-and-swap spinlock whose holder (pid and start time) is
 *    replaced by the next locker once it is gone, so a SIGKILL inside never wedges it. These
 *    are rare (a reader opening or closing, a writer's retention).
 *  - a commit: the holder's one atomic 8-byte store of the position (then the time), no
 *    lock. A SIGKILL at any instruction leaves the old or the new position.
 * Readers of the registry (consumers(), retention) take no lock: an entry's generation is
 * odd while it is in use and moves on every make and remove, so name, bus id and creation
 * time read between two equal odd generations belong together.
 */
#ifndef MAPPEDBUS_CONSUMERS_H
#define MAPPEDBUS_CONSUMERS_H

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#include "_atomic.h"
#include "_wake.h"      /* wake_alive, wake_proc_start: the same liveness rule */

#define CONSUMERS_UNUSED __attribute__((unused))

#define CONSUMERS_FILE_SIZE 32768
#define CONSUMERS_MAGIC 0x314E4F435355424DLL     /* "MBUSCON1" little-endian */
#define CONSUMERS_VERSION 1
#define CONSUMERS_MAGIC_OFFSET 0                 /* int64 */
#define CONSUMERS_VERSION_OFFSET 8               /* int32 */
#define CONSUMERS_LOCK_OFFSET 64                 /* int64: 0, or pid | (start & 0xFFFFFFFF) << 32 */
#define CONSUMERS_ENTRIES_OFFSET 128
#define CONSUMER_ENTRY_SIZE 128
#define CONSUMER_ENTRY_COUNT 255                 /* (32768 - 128) / 128 */
#define CONSUMER_GEN_OFFSET 0                    /* int32: odd = in use */
#define CONSUMER_FLAGS_OFFSET 4                  /* int32: CONSUMER_FLAG_* */
#define CONSUMER_PID_OFFSET 8                    /* int32: the live holder, 0 = none */
#define CONSUMER_START_OFFSET 16                 /* int64: the holder's start time (ticks) */
#define CONSUMER_POSITION_OFFSET 24              /* int64: the committed position */
#define CONSUMER_COMMITTED_NS_OFFSET 32          /* int64: Unix ns of the last commit */
#define CONSUMER_CREATED_NS_OFFSET 40            /* int64: Unix ns the entry was made */
#define CONSUMER_BUS_ID_OFFSET 48                /* 16 bytes */
#define CONSUMER_BUS_ID_SIZE 16
#define CONSUMER_NAME_OFFSET 64                  /* 64 bytes of UTF-8, NUL padded */
#define CONSUMER_NAME_MAX 64
#define CONSUMER_FLAG_EXPIRED 1

static inline char *consumer_entry(char *c, int i) {
    return c + CONSUMERS_ENTRIES_OFFSET + (int64_t)i * CONSUMER_ENTRY_SIZE;
}

/* A new (all zero) file gets its magic and version: 0 if it is a registry now, -1 if its
 * magic is wrong, -2 its version. */
CONSUMERS_UNUSED static int consumers_init(char *c) {
    int64_t magic = cas_i64(c + CONSUMERS_MAGIC_OFFSET, 0, CONSUMERS_MAGIC);
    if (magic != 0 && magic != CONSUMERS_MAGIC) return -1;
    int32_t version = cas_i32(c + CONSUMERS_VERSION_OFFSET, 0, CONSUMERS_VERSION);
    if (version != 0 && version != CONSUMERS_VERSION) return -2;
    return 0;
}

static inline int64_t consumers_lock_word(int pid, int64_t start) {
    return (int64_t)(uint32_t)pid | (int64_t)((uint64_t)(start & 0xFFFFFFFFLL) << 32);
}

/* Whether the holder a lock word names is still there (its pid alive with the same start). */
static inline int consumers_word_alive(int64_t word) {
    int pid = (int)(uint32_t)(word & 0xFFFFFFFFLL);
    int64_t start32 = (int64_t)((uint64_t)word >> 32);
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    int64_t now = wake_proc_start(pid);
    if (now >= 0 && (now & 0xFFFFFFFFLL) != start32) return 0;   /* the pid was reused */
    return 1;
}

/* Take the lock for ``word`` (consumers_lock_word of this process), waiting at most
 * timeout_ns; a holder that is gone is replaced. 0 once held, else the pid holding it. */
CONSUMERS_UNUSED static int consumers_lock(char *c, int64_t word, int64_t timeout_ns) {
    int64_t deadline = wake_now_ns() + timeout_ns;
    int64_t seen = 0, seen_since = 0;
    struct timespec pause = {0, 20000};
    for (;;) {
        int64_t cur = load_acquire_i64(c + CONSUMERS_LOCK_OFFSET);
        if (cur == 0) {
            if (cas_i64(c + CONSUMERS_LOCK_OFFSET, 0, word) == 0) return 0;
            continue;
        }
        /* Ask about a holder only once it has held the lock a while: the checks read /proc. */
        int64_t now = wake_now_ns();
        if (cur != seen) {
            seen = cur;
            seen_since = now;
        } else if (now - seen_since > 1000000 && !consumers_word_alive(cur)) {
            if (cas_i64(c + CONSUMERS_LOCK_OFFSET, cur, word) == cur) return 0;
            continue;
        }
        if (now >= deadline) return (int)(uint32_t)(cur & 0xFFFFFFFFLL);
        nanosleep(&pause, NULL);
    }
}

CONSUMERS_UNUSED static void consumers_unlock(char *c, int64_t word) {
    cas_i64(c + CONSUMERS_LOCK_OFFSET, word, 0);
}

static inline int consumer_in_use(char *e) {
    return load_acquire_i32(e + CONSUMER_GEN_OFFSET) & 1;
}

/* The entry named ``name`` (len bytes, 1..CONSUMER_NAME_MAX), or -1. Under the lock, or
 * lock-free when the caller checks the generation after. */
CONSUMERS_UNUSED static int consumers_find(char *c, const char *name, int len) {
    for (int i = 0; i < CONSUMER_ENTRY_COUNT; i++) {
        char *e = consumer_entry(c, i);
        if (!consumer_in_use(e)) continue;
        const char *n = e + CONSUMER_NAME_OFFSET;
        if (memcmp(n, name, len) == 0 && (len == CONSUMER_NAME_MAX || n[len] == 0)) return i;
    }
    return -1;
}

/* Under the lock: make an entry (holder none, not expired) at ``position``; its index, or
 * -1 if every entry is in use. The fields are written while the generation is even (the
 * entry is free: nobody reads them), then the generation is published odd. */
CONSUMERS_UNUSED static int consumers_make(char *c, const char *name, int len,
                                           const char *bus_id, int64_t position,
                                           int64_t now_ns) {
    for (int i = 0; i < CONSUMER_ENTRY_COUNT; i++) {
        char *e = consumer_entry(c, i);
        int32_t gen = load_acquire_i32(e + CONSUMER_GEN_OFFSET);
        if (gen & 1) continue;
        store_release_i32(e + CONSUMER_FLAGS_OFFSET, 0);
        store_release_i32(e + CONSUMER_PID_OFFSET, 0);
        store_release_i64(e + CONSUMER_START_OFFSET, 0);
        store_release_i64(e + CONSUMER_POSITION_OFFSET, position);
        store_release_i64(e + CONSUMER_COMMITTED_NS_OFFSET, now_ns);
        store_release_i64(e + CONSUMER_CREATED_NS_OFFSET, now_ns);
        memcpy(e + CONSUMER_BUS_ID_OFFSET, bus_id, CONSUMER_BUS_ID_SIZE);
        memset(e + CONSUMER_NAME_OFFSET, 0, CONSUMER_NAME_MAX);
        memcpy(e + CONSUMER_NAME_OFFSET, name, len);
        store_release_i32(e + CONSUMER_GEN_OFFSET, gen + 1);
        return i;
    }
    return -1;
}

/* Under the lock: remove entry i (the generation goes even first: readers drop it). */
CONSUMERS_UNUSED static void consumers_remove(char *c, int i) {
    char *e = consumer_entry(c, i);
    int32_t gen = load_acquire_i32(e + CONSUMER_GEN_OFFSET);
    if (!(gen & 1)) return;
    store_release_i32(e + CONSUMER_GEN_OFFSET, gen + 1);
    store_release_i32(e + CONSUMER_PID_OFFSET, 0);
    store_release_i64(e + CONSUMER_START_OFFSET, 0);
    memset(e + CONSUMER_BUS_ID_OFFSET, 0, CONSUMER_BUS_ID_SIZE + CONSUMER_NAME_MAX);
}

/* Under the lock: the live holder of entry i other than (pid, start), or 0 when there is
 * none (a holder that is gone is forgotten). */
CONSUMERS_UNUSED static int consumer_other_holder(char *c, int i, int pid, int64_t start) {
    char *e = consumer_entry(c, i);
    int32_t holder = load_acquire_i32(e + CONSUMER_PID_OFFSET);
    if (holder == 0) return 0;
    int64_t hstart = load_acquire_i64(e + CONSUMER_START_OFFSET);
    if (holder == pid && hstart == start) return 0;
    if (holder > 0 && wake_alive(holder, hstart)) return holder;
    return 0;
}

/* Under the lock, once consumer_other_holder() said 0: entry i is held by (pid, start). The
 * start goes first, so a reader that sees the pid sees its start. */
CONSUMERS_UNUSED static void consumer_claim(char *c, int i, int pid, int64_t start) {
    char *e = consumer_entry(c, i);
    store_release_i64(e + CONSUMER_START_OFFSET, start);
    store_release_i32(e + CONSUMER_PID_OFFSET, pid);
}

/* Under the lock: entry i is held by nobody (if (pid, start) still holds it). */
CONSUMERS_UNUSED static void consumer_release(char *c, int i, int pid, int64_t start) {
    char *e = consumer_entry(c, i);
    if (load_acquire_i32(e + CONSUMER_PID_OFFSET) != pid
            || load_acquire_i64(e + CONSUMER_START_OFFSET) != start) return;
    store_release_i32(e + CONSUMER_PID_OFFSET, 0);
    store_release_i64(e + CONSUMER_START_OFFSET, 0);
}

/* Under the lock: flag entry i expired (a writer's retention). */
CONSUMERS_UNUSED static void consumer_expire(char *c, int i) {
    char *f = consumer_entry(c, i) + CONSUMER_FLAGS_OFFSET;
    int32_t cur = load_acquire_i32(f);
    while (!(cur & CONSUMER_FLAG_EXPIRED)) {
        int32_t was = cas_i32(f, cur, cur | CONSUMER_FLAG_EXPIRED);
        if (was == cur) break;
        cur = was;
    }
}

/* The time a commit stores, from a clock a thread of this process refreshes every
 * CONSUMERS_CLOCK_NS while a reader of it holds a consumer (consumers_clock_hold): a commit
 * then makes no clock call (10 ns on the VM of perf/, a third of the commit's budget), and
 * committed_ns is at most that late. The Java port keeps the same clock. */
#define CONSUMERS_CLOCK_NS 4000000

static inline int64_t consumers_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The holder's commit: the position with one atomic store, then the time (``now_ns``, the
 * clock above). An expired flag is cleared after (the consumer has moved on; where its
 * position is in removed segments it reads a gap, and the next retention expires it again). */
static inline void consumer_commit(char *e, int64_t position, int64_t now_ns) {
    store_release_i64(e + CONSUMER_POSITION_OFFSET, position);
    store_release_i64(e + CONSUMER_COMMITTED_NS_OFFSET, now_ns);
    if (load_acquire_i32(e + CONSUMER_FLAGS_OFFSET) & CONSUMER_FLAG_EXPIRED)
        cas_i32(e + CONSUMER_FLAGS_OFFSET, CONSUMER_FLAG_EXPIRED, 0);
}

#endif
