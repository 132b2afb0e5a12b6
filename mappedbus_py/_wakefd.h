/* A file descriptor that becomes readable when a record may be there, for event loops
 * (asyncio's add_reader, selectors). A thread of this process sleeps on the wake file's
 * seq word (_wake.h) for the reader. The reader itself parks (wakefd_arm: its slot's
 * parked registration, then a look at its next slot), so a record costs two wake-ups:
 * the writer's of this thread, and this thread's of the event loop through an eventfd.
 *
 *   arm (event loop thread)             thread
 *   v = wake_prepare(); look at slot    cur = seq; armed? and (seq != armed_v, or the
 *   armed_v = v; armed = 1 (seq-cst)      watched status is set) -> eventfd, disarm
 *   seq != v now, or the file's arming  FUTEX_WAIT(seq, cur, the park bound)
 *     taken? -> disarm, "ready"
 *
 * No lost wake-up: a writer's bump of seq either comes before the arm's last look at seq
 * (arm reports "ready") or after armed = 1, and the thread, woken by it or finding seq
 * moved when it goes to sleep, sees armed. While armed, the thread also looks at the
 * watched status by itself every park bound (records whose writer woke nobody).
 */
#ifndef MAPPEDBUS_WAKEFD_H
#define MAPPEDBUS_WAKEFD_H

#include <pthread.h>
#include <sys/eventfd.h>

#include "_wake.h"

/* Not every file that includes this header calls every function. */
#define WAKEFD_UNUSED __attribute__((unused))

#define WAKEFD_IDLE_NS 100000000      /* the thread's sleep while not armed */

typedef struct {
    char *w;                 /* the wake file's mapping */
    int slot;                /* the parking slot of this descriptor's reader */
    int efd;                 /* the eventfd handed to the event loop */
    wake_backoff backoff;    /* the armed thread's own looks */
    pthread_t thread;
    pthread_mutex_t mu;      /* held while the thread reads *watch, and to change it */
    int started;
    int stop;
    int armed;               /* 1: fire once (seq-cst: see above) */
    uint32_t armed_v;        /* seq when armed */
    const char *watch;       /* the status word to look at, or NULL: any wake fires */
    int aligned;             /* watch is 4-byte aligned (else its low byte is read) */
} wakefd;

static inline int wakefd_ready(const char *watch, int aligned) {
    if (watch == NULL) return 0;
    return aligned ? load_acquire_i32(watch) != 0 : load_acquire_u8(watch) != 0;
}

WAKEFD_UNUSED static void wakefd_fire(wakefd *f) {
    uint64_t one = 1;
    store_seq_cst_int(&f->armed, 0);
    wake_done(f->w, f->slot);
    if (write(f->efd, &one, sizeof one) < 0) { /* EAGAIN: readable already */ }
}

WAKEFD_UNUSED static void *wakefd_run(void *arg) {
    wakefd *f = (wakefd *)arg;
    while (!load_acquire_int(&f->stop)) {
        uint32_t cur = wake_seq(f->w);
        int armed = load_seq_cst_int(&f->armed);
        int found = 0;
        if (armed) {
            pthread_mutex_lock(&f->mu);
            if (load_acquire_int(&f->armed))
                found = wakefd_ready(f->watch, f->aligned);
            pthread_mutex_unlock(&f->mu);
            if (cur != f->armed_v || found) {
                wakefd_fire(f);
                continue;
            }
        }
        wake_wait_raw(f->w, cur, armed ? f->backoff.cur_ns : WAKEFD_IDLE_NS);
        if (armed && wake_seq(f->w) == cur) {
            /* the park bound passed with no wake: the look decides the next bound */
            pthread_mutex_lock(&f->mu);
            found = load_acquire_int(&f->armed) && wakefd_ready(f->watch, f->aligned);
            pthread_mutex_unlock(&f->mu);
            wake_backoff_after(&f->backoff, 0, found, wake_now_ns());
        }
    }
    return NULL;
}

/* 0, or an errno. */
WAKEFD_UNUSED static int wakefd_start(wakefd *f, char *w, int slot, int64_t park_ns, int64_t park_max_ns) {
    memset(f, 0, sizeof *f);
    f->w = w;
    f->slot = slot;
    wake_backoff_init(&f->backoff, park_ns, park_max_ns);
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) return errno;
    pthread_mutex_init(&f->mu, NULL);
    int rc = pthread_create(&f->thread, NULL, wakefd_run, f);
    if (rc != 0) {
        close(f->efd);
        f->efd = -1;
        return rc;
    }
    f->started = 1;
    return 0;
}

/* Arm for the slot at ``watch`` (NULL: past a segment's end, any wake fires). Returns 0 when
 * armed, 1 when a record may be there now (not armed: read, then arm again). */
WAKEFD_UNUSED static int wakefd_arm(wakefd *f, const char *watch, int aligned) {
    uint32_t v = wake_prepare(f->w, f->slot);
    if (wakefd_ready(watch, aligned)) {
        wake_done(f->w, f->slot);
        return 1;
    }
    pthread_mutex_lock(&f->mu);
    f->watch = watch;
    f->aligned = aligned;
    f->armed_v = v;
    store_seq_cst_int(&f->armed, 1);
    pthread_mutex_unlock(&f->mu);
    /* seq moved, or a writer took the file's arming (see wake_wait): look again */
    if (wake_seq(f->w) != v || !wake_needed(f->w)) {
        store_seq_cst_int(&f->armed, 0);
        wake_done(f->w, f->slot);
        return 1;
    }
    return 0;
}

/* Stop watching. Once it returns the thread no longer reads the watched word (its mapping
 * may go). */
WAKEFD_UNUSED static void wakefd_disarm(wakefd *f) {
    pthread_mutex_lock(&f->mu);
    store_seq_cst_int(&f->armed, 0);
    f->watch = NULL;
    pthread_mutex_unlock(&f->mu);
    wake_done(f->w, f->slot);
}

WAKEFD_UNUSED static void wakefd_drain(wakefd *f) {
    uint64_t n;
    if (read(f->efd, &n, sizeof n) < 0) { /* EAGAIN: nothing to drain */ }
}

WAKEFD_UNUSED static void wakefd_stop(wakefd *f) {
    if (!f->started) return;
    wakefd_disarm(f);
    store_seq_cst_int(&f->stop, 1);
    /* move the word and wake the thread (readers parked on it look again: harmless) */
    wake_bump(f->w);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    close(f->efd);
    f->efd = -1;
    f->started = 0;
}

#endif
