/* Named consumers: the consumer registry beside a bus (PATH.consumers, or DIR/bus.consumers
 * for a rolling bus), never inside the Mappedbus file. The layout is drawn in layout.py
 * (CONSUMERS_*, CONSUMER_*) and mirrored in Layout.java; a test checks they agree. The Java
 * port (interop/.../ConsumerRegistry.java) follows these steps one for one.
 *
 * Two kinds of change:
 *  - structural (an entry made or removed, its holder claimed or released, expired): under
 *    the file's lock, an OFD lock on the lock word's first byte (_liveness.h) taken without
 *    blocking and retried for a bounded time; the kernel drops it when its holder dies (a
 *    SIGKILL inside, a zombie), so nothing wedges it. The word shows the holder's pid, for
 *    people only. These are rare (a reader opening or closing, a writer's retention).
 *  - a commit: the holder's one atomic 8-byte store of the position (then the time), no
 *    lock. A SIGKILL at any instruction leaves the old or the new position.
 * Readers of the registry (consumers(), retention) take no lock: an entry's generation is
 * odd while it is in use and moves on every make and remove, so name, bus id and creation
 * time read between two equal odd generations belong together.
 *
 * An entry's holder (the reader that opened the name) holds the entry's liveness byte, its
 * first, by an OFD lock through a descriptor of its own (_liveness.h): alive while it is
 * locked, in any pid namespace; a dead holder's lock is gone, so its name can be taken at
 * once. The pid in the entry is for people only.
 */
#ifndef MAPPEDBUS_CONSUMERS_H
#define MAPPEDBUS_CONSUMERS_H

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#include "_atomic.h"
#include "_liveness.h"
#include "_wake.h"      /* wake_now_ns */

#define CONSUMERS_UNUSED __attribute__((unused))

#define CONSUMERS_FILE_SIZE 32768
#define CONSUMERS_MAGIC 0x314E4F435355424DLL     /* "MBUSCON1" little-endian */
#define CONSUMERS_VERSION 2                      /* 2: holders and lock by OFD locks (1: by pid) */
#define CONSUMERS_MAGIC_OFFSET 0                 /* int64 */
#define CONSUMERS_VERSION_OFFSET 8               /* int32 */
#define CONSUMERS_OPEN_LOCK_OFFSET 16            /* the byte openers lock (POSIX) while they
                                                    create and size the file */
#define CONSUMERS_LOCK_OFFSET 64                 /* int64: the lock holder's pid (for people);
                                                    its first byte is the lock */
#define CONSUMERS_ENTRIES_OFFSET 128
#define CONSUMER_ENTRY_SIZE 128
#define CONSUMER_ENTRY_COUNT 255                 /* (32768 - 128) / 128 */
#define CONSUMER_GEN_OFFSET 0                    /* int32: odd = in use */
#define CONSUMER_FLAGS_OFFSET 4                  /* int32: CONSUMER_FLAG_* */
#define CONSUMER_PID_OFFSET 8                    /* int32: the holder's pid, for people */
#define CONSUMER_START_OFFSET 16                 /* int64: when the holder took it (Unix ns) */
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

/* The liveness byte of entry i (its first). */
static inline int64_t consumer_entry_byte(int i) {
    return CONSUMERS_ENTRIES_OFFSET + (int64_t)i * CONSUMER_ENTRY_SIZE;
}

/* Take the file's lock through description ``fd``, retrying without blocking for at most
 * timeout_ns (a holder that dies lets go at once). 0 once held, 1 if a live holder kept it
 * that long, LIVE_ERROR if no lock can be taken. The word then shows ``pid``. */
CONSUMERS_UNUSED static int consumers_lock(char *c, int fd, int pid, int64_t timeout_ns) {
    int64_t deadline = wake_now_ns() + timeout_ns;
    struct timespec pause = {0, 20000};
    for (;;) {
        int r = live_hold(fd, CONSUMERS_LOCK_OFFSET);
        if (r == LIVE_TAKEN) {
            store_release_i64(c + CONSUMERS_LOCK_OFFSET, (int64_t)(uint32_t)pid);
            return 0;
        }
        if (r != LIVE_BUSY) return LIVE_ERROR;
        if (wake_now_ns() >= deadline) return 1;
        nanosleep(&pause, NULL);
    }
}

CONSUMERS_UNUSED static void consumers_unlock(char *c, int fd) {
    store_release_i64(c + CONSUMERS_LOCK_OFFSET, 0);
    live_release(fd, CONSUMERS_LOCK_OFFSET);
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
 * -1 if every entry is in use. An entry whose liveness byte is still held (a holder of a
 * name removed by force) is skipped. The fields are written while the generation is even
 * (the entry is free: nobody reads them), then the generation is published odd. */
CONSUMERS_UNUSED static int consumers_make(char *c, int fd, const char *name, int len,
                                           const char *bus_id, int64_t position,
                                           int64_t now_ns) {
    for (int i = 0; i < CONSUMER_ENTRY_COUNT; i++) {
        char *e = consumer_entry(c, i);
        int32_t gen = load_acquire_i32(e + CONSUMER_GEN_OFFSET);
        if (gen & 1) continue;
        if (live_probe(fd, consumer_entry_byte(i)) == LIVE_ALIVE) continue;
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

/* Under the lock: take entry i for the holder of description ``fd``: LIVE_TAKEN (the entry
 * shows ``pid`` now), LIVE_BUSY if another description (a live holder) has it, or
 * LIVE_ERROR. Taking it again through the same description says LIVE_TAKEN: the caller
 * keeps its own holds apart (one description per holder). */
CONSUMERS_UNUSED static int consumer_claim(char *c, int fd, int i, int pid, int64_t now_ns) {
    int r = live_hold(fd, consumer_entry_byte(i));
    if (r != LIVE_TAKEN) return r;
    char *e = consumer_entry(c, i);
    store_release_i64(e + CONSUMER_START_OFFSET, now_ns);
    store_release_i32(e + CONSUMER_PID_OFFSET, pid);
    return r;
}

/* Under the lock: entry i held by nobody (it was held through ``fd``). */
CONSUMERS_UNUSED static void consumer_release(char *c, int fd, int i) {
    char *e = consumer_entry(c, i);
    store_release_i32(e + CONSUMER_PID_OFFSET, 0);
    store_release_i64(e + CONSUMER_START_OFFSET, 0);
    live_release(fd, consumer_entry_byte(i));
}

/* Whether a description other than ``fd``'s holds entry i: LIVE_ALIVE, LIVE_DEAD or
 * LIVE_ERROR. */
static inline int consumer_holder(int fd, int i) {
    return live_probe(fd, consumer_entry_byte(i));
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
