/* A file descriptor that becomes readable when a record may be there, for event loops
 * (asyncio's add_reader, selectors): a thread of this process parks on the wake file for
 * the reader (_wake.h) and writes to an eventfd when woken, or when the status word it
 * watches (the reader's next slot) turns non-zero by its own 1 ms look. The reader arms it
 * before each wait; it disarms itself when it fires.
 */
#ifndef MAPPEDBUS_WAKEFD_H
#define MAPPEDBUS_WAKEFD_H

#include <pthread.h>
#include <sys/eventfd.h>

#include "_wake.h"

typedef struct {
    char *w;                 /* the wake file's mapping */
    int slot;                /* this watcher's parking slot */
    int efd;                 /* the eventfd handed to the event loop */
    wake_backoff backoff;    /* the thread's self-wake bound */
    pthread_t thread;
    pthread_mutex_t mu;      /* guards the fields below */
    pthread_cond_t cv;
    int started, stop;
    int armed;               /* 1: watch and fire once; read without the lock by the thread */
    int busy;                /* the thread is parked for an arm (reads `watch`) */
    const char *watch;       /* the status word to watch, or NULL: fire on every self-wake */
    int aligned;             /* watch is 4-byte aligned (else its low byte is read) */
} wakefd;

static inline int wakefd_ready(const char *watch, int aligned) {
    if (watch == NULL) return 1;
    return aligned ? load_acquire_i32(watch) != 0 : load_acquire_u8(watch) != 0;
}

static void *wakefd_run(void *arg) {
    wakefd *f = (wakefd *)arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->armed && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop) break;
        f->busy = 1;
        const char *watch = f->watch;
        int aligned = f->aligned;
        pthread_mutex_unlock(&f->mu);
        int fire = 0;
        while (!fire && load_acquire_int(&f->armed)) {
            uint32_t v = wake_prepare(f->w, f->slot);
            if (watch != NULL && wakefd_ready(watch, aligned)) {
                fire = 1;
            } else {
                wake_wait(f->w, v, f->backoff.cur_ns);
                int woken = wake_seq(f->w) != v;
                int found = wakefd_ready(watch, aligned);
                wake_backoff_after(&f->backoff, woken, found && watch != NULL, wake_now_ns());
                fire = woken || found;
            }
            wake_done(f->w, f->slot);
        }
        pthread_mutex_lock(&f->mu);
        f->busy = 0;
        if (fire && f->armed) {
            uint64_t one = 1;
            f->armed = 0;
            if (write(f->efd, &one, sizeof one) < 0) { /* EAGAIN: already readable */ }
        }
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* 0, or an errno. */
static int wakefd_start(wakefd *f, char *w, int slot, int64_t park_ns, int64_t park_max_ns) {
    memset(f, 0, sizeof *f);
    f->w = w;
    f->slot = slot;
    wake_backoff_init(&f->backoff, park_ns, park_max_ns);
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) return errno;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = pthread_create(&f->thread, NULL, wakefd_run, f);
    if (rc != 0) {
        close(f->efd);
        f->efd = -1;
        return rc;
    }
    f->started = 1;
    return 0;
}

static void wakefd_arm(wakefd *f, const char *watch, int aligned) {
    pthread_mutex_lock(&f->mu);
    f->watch = watch;
    f->aligned = aligned;
    store_release_int(&f->armed, 1);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Stop watching; with ``sync``, return only once the thread no longer reads the watched
 * word (before its mapping goes): at most the park bound. */
static void wakefd_disarm(wakefd *f, int sync) {
    pthread_mutex_lock(&f->mu);
    store_release_int(&f->armed, 0);
    while (sync && f->busy) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void wakefd_drain(wakefd *f) {
    uint64_t n;
    if (read(f->efd, &n, sizeof n) < 0) { /* EAGAIN: nothing to drain */ }
}

static void wakefd_stop(wakefd *f) {
    if (!f->started) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    store_release_int(&f->armed, 0);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    close(f->efd);
    f->efd = -1;
    f->started = 0;
}

#endif
