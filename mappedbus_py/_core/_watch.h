/* The writers' watch: is the path still the file this process writes?
 *
 * A writer whose bus file is removed or replaced (rm, mv over it, a rolling bus's
 * directory removed) would go on writing into the orphaned file, and every record after
 * that would reach no reader. A system call per write to look is too dear, so one thread
 * per process looks for all of its writers: every WATCH_INTERVAL_NS it lstat()s each
 * watched path and compares device, inode and size with the mapped file. When the path
 * names no file or another one, it stores WATCH_REPLACED into the mapping's dead flag
 * (the word the SIGBUS guard sets, which every write loads already: no new work per
 * record); a file shorter than the mapping gets WATCH_SHRUNK. The writer raises at its
 * next write (_mapping.pyx, raise_dead). So a write starting more than about
 * WATCH_INTERVAL_NS + one lstat round after the replacement raises, never a later one.
 *
 * A rolling bus's segment is watched only while it still has room (its limit at
 * `base` at or below `last`): retention may remove a full segment a writer still maps,
 * and that writer's next write must roll (BusFullError), not fail.
 *
 * The thread runs while something is watched and ends with the last entry. The table is
 * guarded by one mutex, taken under the GIL by registration and by the thread for a
 * round of lstat()s (a few microseconds). A fork() takes the mutex first (pthread_atfork),
 * so the child never inherits it held; a child with entries (writers opened before the
 * fork) starts its own thread.
 */
#ifndef MAPPEDBUS_WATCH_H
#define MAPPEDBUS_WATCH_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "_atomic.h"

#define WATCH_SLOTS 4096
#define WATCH_INTERVAL_NS 1000000   /* 1 ms: a round of lstat()s costs ~1 us a writer */
enum { WATCH_REPLACED = 2, WATCH_SHRUNK = 3 };   /* the dead flag's values (1: SIGBUS) */

typedef struct {
    char *path;          /* NULL: free */
    dev_t dev;
    ino_t ino;
    off_t size;          /* the file must stay at least this long (the mapping's size) */
    const char *base;    /* a segment: its limit word, else NULL */
    int64_t last;        /* a segment: full once the limit passes this */
    int *flag;           /* the mapping's dead flag */
} watch_entry;

static watch_entry watch_table[WATCH_SLOTS];
static int watch_count = 0;
static int watch_high = 0;
static pid_t watch_pid = 0;        /* the process whose thread runs; 0: none */
static int watch_atfork_done = 0;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

static void watch_round(void) {
    struct stat st;
    for (int i = 0; i < watch_high; i++) {
        watch_entry *e = &watch_table[i];
        int code = 0;
        if (e->path == NULL || load_acquire_int(e->flag) != 0)
            continue;
        if (lstat(e->path, &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR)
                code = WATCH_REPLACED;
        } else if (st.st_dev != e->dev || st.st_ino != e->ino) {
            code = WATCH_REPLACED;
        } else if (st.st_size < e->size) {
            code = WATCH_SHRUNK;
        }
        if (code == WATCH_REPLACED && e->base != NULL && load_acquire_i64(e->base) > e->last)
            code = 0;    /* a full segment: retention's to remove, the writer rolls */
        if (code != 0)
            cas_i32(e->flag, 0, code);     /* a SIGBUS's 1 stays */
    }
}

static void *watch_run(void *arg) {
    (void)arg;
    struct timespec ts = {0, WATCH_INTERVAL_NS};
    for (;;) {
        pthread_mutex_lock(&watch_lock);
        if (watch_count == 0 || watch_pid != getpid()) {
            if (watch_pid == getpid())
                watch_pid = 0;
            pthread_mutex_unlock(&watch_lock);
            return NULL;
        }
        watch_round();
        pthread_mutex_unlock(&watch_lock);
        nanosleep(&ts, NULL);
    }
}

/* Under watch_lock: a thread for this process if none runs. 0 or the error number. */
static int watch_start_locked(void) {
    pthread_t t;
    pthread_attr_t attr;
    int rc;
    if (watch_pid == getpid())
        return 0;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, watch_run, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        watch_pid = getpid();
    return rc;
}

static void watch_prefork(void) { pthread_mutex_lock(&watch_lock); }
static void watch_postfork_parent(void) { pthread_mutex_unlock(&watch_lock); }
static void watch_postfork_child(void) {
    watch_pid = 0;                 /* the parent's thread is not here */
    if (watch_count > 0)
        watch_start_locked();
    pthread_mutex_unlock(&watch_lock);
}

/* Watch `path` (the file of device `dev`, inode `ino`, mapped `size` bytes) for the
 * mapping whose dead flag is `flag`; `base`/`last` for a segment, else NULL/0. Returns
 * the entry's slot, or -1 with errno (ENOMEM, EMFILE when the table is full, or
 * pthread_create's error). */
static int watch_register(const char *path, dev_t dev, ino_t ino, off_t size,
                          const char *base, int64_t last, int *flag) {
    int slot = -1, rc;
    char *copy = strdup(path);
    if (copy == NULL) {
        errno = ENOMEM;
        return -1;
    }
    pthread_mutex_lock(&watch_lock);
    if (!watch_atfork_done) {
        pthread_atfork(watch_prefork, watch_postfork_parent, watch_postfork_child);
        watch_atfork_done = 1;
    }
    for (int i = 0; i < WATCH_SLOTS; i++) {
        if (watch_table[i].path == NULL) {
            slot = i;
            break;
        }
    }
    if (slot < 0) {
        pthread_mutex_unlock(&watch_lock);
        free(copy);
        errno = EMFILE;
        return -1;
    }
    watch_entry *e = &watch_table[slot];
    e->dev = dev;
    e->ino = ino;
    e->size = size;
    e->base = base;
    e->last = last;
    e->flag = flag;
    e->path = copy;
    watch_count++;
    if (slot >= watch_high)
        watch_high = slot + 1;
    rc = watch_start_locked();
    if (rc != 0) {
        e->path = NULL;
        watch_count--;
        pthread_mutex_unlock(&watch_lock);
        free(copy);
        errno = rc;
        return -1;
    }
    pthread_mutex_unlock(&watch_lock);
    return slot;
}

/* Stop watching (before the mapping goes: the thread reads its limit word). */
static void watch_unregister(int slot) {
    char *path;
    if (slot < 0 || slot >= WATCH_SLOTS)
        return;
    pthread_mutex_lock(&watch_lock);
    path = watch_table[slot].path;
    if (path != NULL) {
        watch_table[slot].path = NULL;
        watch_count--;
    }
    pthread_mutex_unlock(&watch_lock);
    free(path);
}

#endif
