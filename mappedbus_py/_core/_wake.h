/* Parking and waking readers: the wake file beside a bus (PATH.wake, or DIR/bus.wake for a
 * rolling bus), never inside the Mappedbus file, so the Java original reads and writes the
 * same bus unaware of it. The layout is drawn in layout.py (WAKE_*) and mirrored in
 * Layout.java; a test checks the three agree. Used by the Cython reader and writer and by
 * the JNI library of the Java port (interop/native): the protocol is written once, here.
 *
 * A reader that found nothing for a while parks:
 *     wake_prepare()   its slot's state 0 -> 1, parked += 1, armed = 1, full fence, v = seq
 *     look at the bus once more: a record there -> wake_done(), deliver it
 *     wake_wait(v)     FUTEX_WAIT on seq while it still holds v, at most park_ns
 *     wake_done()      state 1 -> 0 and parked -= 1 (whoever wins the compare-and-swap)
 * A writer, after its commit (a seq-cst compare-and-swap):
 *     if armed: if exchange(armed, 0) was 1: seq += 1, FUTEX_WAKE(seq, all)
 * No lost wake-up: the parker's armed = 1 and the writer's commit are both seq-cst, so
 * either the writer sees armed (and bumps seq after taking it, so after the parker read v,
 * or the parker read the new seq and its look comes after the commit: FUTEX_WAIT returns
 * at once, is woken, or is not made), or the parker's last look sees the record. `armed`
 * makes one wake serve every parker registered before it: while woken readers are still
 * waiting for a CPU (a loaded machine), the writers' next commits see armed == 0 and make
 * no system call. A writer that wakes nobody (the Java original, one killed between commit
 * and wake) costs a parked reader at most its park bound: the wait's own timeout.
 *
 * Dead parkers: each slot is held by its parker's liveness (_liveness.h): an OFD lock on
 * the slot's first byte, taken through a descriptor the parker opened itself. The kernel
 * drops it when the parker dies (before it is a zombie, in any pid namespace), so a slot is
 * free exactly when its byte is unlocked; the pid in it is for people only. A reader killed
 * while parked leaves its slot in state 1 and parked > 0 (and armed, until the next
 * writer's wake clears it). wake_reclaim() takes the byte of each such slot (so nobody
 * claims it meanwhile), undoes it and lets it go; readers run it when they claim a slot and
 * once a second while parked, writers after WAKE_FUTILE_RECLAIM wakes that woke nobody. A
 * claimer undoes what the slot's last holder left the same way, holding its byte.
 */
#ifndef MAPPEDBUS_WAKE_H
#define MAPPEDBUS_WAKE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "_atomic.h"
#include "_liveness.h"

#define WAKE_UNUSED __attribute__((unused))

#define WAKE_FILE_SIZE 4096
#define WAKE_MAGIC 0x314B41575355424DLL          /* "MBUSWAK1" little-endian */
#define WAKE_VERSION 2                           /* 2: slots held by OFD locks (1: by pid) */
#define WAKE_MAGIC_OFFSET 0                      /* int64 */
#define WAKE_VERSION_OFFSET 8                    /* int32 */
#define WAKE_OPEN_LOCK_OFFSET 16                 /* the byte openers lock (POSIX) while they
                                                    create and size the file: never a slot's */
#define WAKE_PARKED_OFFSET 64                    /* int32: readers parked now */
#define WAKE_ARMED_OFFSET 68                     /* int32, beside it: 1 while a parker registered
                                                    since the last wake; what writers load */
#define WAKE_SEQ_OFFSET 128                      /* uint32 futex word, its own cache line */
#define WAKE_SLOTS_OFFSET 256
#define WAKE_SLOT_SIZE 16
#define WAKE_SLOT_COUNT 240                      /* (4096 - 256) / 16 */
#define WAKE_SLOT_PID_OFFSET 0                   /* int32: the holder's pid, for people only;
                                                    the slot's liveness byte is its first */
#define WAKE_SLOT_STATE_OFFSET 4                 /* int32: WAKE_STATE_* */
#define WAKE_SLOT_START_OFFSET 8                 /* int64: when the slot was taken (Unix
                                                    ns), for people only */
#define WAKE_STATE_IDLE 0
#define WAKE_STATE_PARKED 1
#define WAKE_FUTILE_RECLAIM 4096

static inline char *wake_slot(char *w, int i) {
    return w + WAKE_SLOTS_OFFSET + (int64_t)i * WAKE_SLOT_SIZE;
}

/* A new (all zero) file gets its magic and version; 0 if the file is a wake file now, -1
 * if its magic is wrong, -2 its version, -3 its parked count impossible. */
WAKE_UNUSED static int wake_init(char *w) {
    int64_t magic = cas_i64(w + WAKE_MAGIC_OFFSET, 0, WAKE_MAGIC);
    if (magic != 0 && magic != WAKE_MAGIC) return -1;
    int32_t version = cas_i32(w + WAKE_VERSION_OFFSET, 0, WAKE_VERSION);
    if (version != 0 && version != WAKE_VERSION) return -2;
    int32_t parked = load_seq_cst_i32(w + WAKE_PARKED_OFFSET);
    if (parked < 0 || parked > WAKE_SLOT_COUNT) return -3;
    return 0;
}

/* The offset of slot i's liveness byte (its first). */
static inline int64_t wake_slot_byte(int i) {
    return WAKE_SLOTS_OFFSET + (int64_t)i * WAKE_SLOT_SIZE;
}

static inline int64_t wake_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Undo a parked slot: state 1 -> 0, then parked -= 1. Exactly one caller wins. */
static inline void wake_done(char *w, int i) {
    if (cas_i32(wake_slot(w, i) + WAKE_SLOT_STATE_OFFSET, WAKE_STATE_PARKED, WAKE_STATE_IDLE)
            == WAKE_STATE_PARKED)
        fetch_add_i32(w + WAKE_PARKED_OFFSET, -1);
}

/* Undo the slots whose holders died: each parked slot (with ``parked_only``; else each
 * parked or showing a pid) whose liveness byte ``fd`` can take has no live holder: undone
 * while held (a claimer cannot take it meanwhile), its pid cleared, the byte let go.
 * ``fd``: a description of the wake file that holds no slot. Returns how many it undid, or
 * -1 if no lock could be taken (a file system without OFD locks: nothing is undone). */
WAKE_UNUSED static int wake_reclaim(char *w, int fd, int parked_only) {
    int freed = 0;
    for (int i = 0; i < WAKE_SLOT_COUNT; i++) {
        char *s = wake_slot(w, i);
        int parked = load_acquire_i32(s + WAKE_SLOT_STATE_OFFSET) == WAKE_STATE_PARKED;
        if (!parked && (parked_only || load_acquire_i32(s + WAKE_SLOT_PID_OFFSET) == 0))
            continue;
        int r = live_hold(fd, wake_slot_byte(i));
        if (r == LIVE_BUSY) continue;
        if (r != LIVE_TAKEN) return -1;
        wake_done(w, i);
        store_release_i32(s + WAKE_SLOT_PID_OFFSET, 0);
        store_release_i64(s + WAKE_SLOT_START_OFFSET, 0);
        live_release(fd, wake_slot_byte(i));
        freed++;
    }
    return freed;
}

/* A slot for the holder of description ``fd`` (which holds no other slot of this file): the
 * first whose liveness byte it takes, undone first if its last holder died parked, then
 * showing ``pid``. -1 if every slot has a live holder, -2 if no lock could be taken. */
WAKE_UNUSED static int wake_claim(char *w, int fd, int pid) {
    for (int i = 0; i < WAKE_SLOT_COUNT; i++) {
        int r = live_hold(fd, wake_slot_byte(i));
        if (r == LIVE_BUSY) continue;
        if (r != LIVE_TAKEN) return -2;
        char *s = wake_slot(w, i);
        wake_done(w, i);
        store_release_i64(s + WAKE_SLOT_START_OFFSET, wake_realtime_ns());
        store_release_i32(s + WAKE_SLOT_PID_OFFSET, pid);
        return i;
    }
    return -1;
}

/* Give slot i back (held through ``fd``): a park left open undone, the pid cleared, then the
 * byte let go (closing ``fd`` would do that too). */
WAKE_UNUSED static void wake_release(char *w, int fd, int i) {
    char *s = wake_slot(w, i);
    wake_done(w, i);
    store_release_i32(s + WAKE_SLOT_PID_OFFSET, 0);
    store_release_i64(s + WAKE_SLOT_START_OFFSET, 0);
    live_release(fd, wake_slot_byte(i));
}

/* Register as parked; returns the seq value to wait on. The caller looks at the bus once
 * more after this (the fence orders that look after the registration). */
static inline uint32_t wake_prepare(char *w, int i) {
    if (cas_i32(wake_slot(w, i) + WAKE_SLOT_STATE_OFFSET, WAKE_STATE_IDLE, WAKE_STATE_PARKED)
            == WAKE_STATE_IDLE)
        fetch_add_i32(w + WAKE_PARKED_OFFSET, 1);
    store_seq_cst_i32(w + WAKE_ARMED_OFFSET, 1);
    fence_seq_cst();
    return (uint32_t)load_acquire_i32(w + WAKE_SEQ_OFFSET);
}

/* wake_prepare for a parker without a slot (all held, or no locks here): armed, not counted
 * in parked; a writer's wake reaches it all the same. */
static inline uint32_t wake_arm(char *w) {
    store_seq_cst_i32(w + WAKE_ARMED_OFFSET, 1);
    fence_seq_cst();
    return (uint32_t)load_acquire_i32(w + WAKE_SEQ_OFFSET);
}

static inline uint32_t wake_seq(const char *w) {
    return (uint32_t)load_acquire_i32(w + WAKE_SEQ_OFFSET);
}

/* Sleep while seq == v, at most ns nanoseconds (a wake, a signal or the time ends it). Not
 * FUTEX_PRIVATE: the word is in a shared file mapping, waited on by other processes. */
static inline void wake_wait_raw(char *w, uint32_t v, int64_t ns) {
    struct timespec ts;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    syscall(SYS_futex, (uint32_t *)(w + WAKE_SEQ_OFFSET), FUTEX_WAIT, v, &ts, NULL, 0);
}

/* A parker's sleep, after wake_prepare() and its look at the bus. If a writer took the
 * arming meanwhile (for a record the look may have missed: it took it before this parker's
 * v, so its bump may be before v too), return at once: the caller looks and parks again.
 * Otherwise any writer that takes it from here on bumps seq after v: no lost wake-up. */
static inline void wake_wait(char *w, uint32_t v, int64_t ns) {
    if (load_seq_cst_i32(w + WAKE_ARMED_OFFSET) == 0) return;
    wake_wait_raw(w, v, ns);
}

/* The writer's look after its commit: one load of a line nobody writes while no one parks. */
static inline int wake_needed(const char *w) {
    return load_seq_cst_i32(w + WAKE_ARMED_OFFSET) != 0;
}

/* Move seq and wake every waiter on it; returns how many the kernel woke. */
static inline int wake_bump(char *w) {
    fetch_add_i32(w + WAKE_SEQ_OFFSET, 1);
    long n = syscall(SYS_futex, (uint32_t *)(w + WAKE_SEQ_OFFSET), FUTEX_WAKE, INT_MAX,
                     NULL, NULL, 0);
    return n < 0 ? 0 : (int)n;
}

/* A writer's wake (after wake_needed() said armed): -1 if another writer took the arming
 * first (its wake serves us), else how many the kernel woke. */
static inline int wake_all(char *w) {
    if (exchange_i32(w + WAKE_ARMED_OFFSET, 0) == 0) return -1;
    return wake_bump(w);
}

/* How long a parker sleeps before it looks by itself. Each look costs a wake-up (about
 * 27 us of CPU on the 2-vCPU VM of perf/: 2.7 % of a core at one a millisecond), and it is
 * needed only for records whose writer wakes nobody. So the bound starts at min_ns, doubles
 * up to max_ns while looks find nothing, and returns to min_ns, held there for
 * WAKE_PIN_NS, when a look finds a record that came without a wake (a writer that does
 * not wake: the Java original). */
#define WAKE_PIN_NS 2000000000LL

typedef struct {
    int64_t min_ns, max_ns;  /* the bounds */
    int64_t cur_ns;          /* the next park's bound */
    int64_t pin_until;       /* monotonic ns: stay at min_ns until then */
} wake_backoff;

static inline void wake_backoff_init(wake_backoff *b, int64_t min_ns, int64_t max_ns) {
    b->min_ns = min_ns;
    b->max_ns = max_ns < min_ns ? min_ns : max_ns;
    b->cur_ns = min_ns;
    b->pin_until = 0;
}

/* After a park: ``woken`` (seq moved), ``found`` (the look after it found a record). */
static inline void wake_backoff_after(wake_backoff *b, int woken, int found, int64_t now) {
    if (found && !woken) {
        b->cur_ns = b->min_ns;
        b->pin_until = now + WAKE_PIN_NS;
    } else if (!found && !woken && now >= b->pin_until) {
        b->cur_ns = b->cur_ns * 2 > b->max_ns ? b->max_ns : b->cur_ns * 2;
    }
}

static inline int64_t wake_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
