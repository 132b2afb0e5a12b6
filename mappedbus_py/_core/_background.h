/* One slow system call on a thread of its own, never holding the GIL: a rolling writer's
 * spare segment is preallocated (posix_fallocate) and its pages mapped (madvise
 * MADV_POPULATE_*) beside the writes, as the Java writer's helper thread does, while the
 * writing thread goes on (rolling/roller.py, the spare; _rolling.pyx, BackgroundCall).
 *
 * The call's thread publishes its result with a release store of `done` (_atomic.h); the
 * writing thread looks with an acquire load and joins it once done. A forked child has no
 * such thread: it never joins one started by its parent (pid). */
#ifndef MAPPEDBUS_BACKGROUND_H
#define MAPPEDBUS_BACKGROUND_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "_atomic.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  /* Linux 5.14; older kernels refuse it with EINVAL */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { MB_BG_FALLOCATE = 1, MB_BG_MADVISE = 2, MB_BG_MUNMAP = 3 };

typedef struct {
    pthread_t thread;
    pid_t pid;          /* the process that started it: 0 while none runs */
    int kind;
    int fd;             /* MB_BG_FALLOCATE: the file, grown to `len` bytes, then the byte */
    int unlock_fd;      /* at `unlock_at` of unlock_fd unlocked (a segment's claim lapses */
    off_t unlock_at;    /* with its file made; -1: none) */
    void *addr;         /* MB_BG_MADVISE: [addr, addr + len) with `advice` */
    size_t len;
    int advice;
    int prefault;       /* MB_BG_FALLOCATE: then its pages made up to date (zeroed) */
    int rc;             /* 0, or the error number */
    int done;
} mb_bg;

/* A made file's pages written once, through a mapping of its own (then unmapped), so that
 * the writes into the segment find them up to date: MADV_POPULATE_WRITE (Linux 5.14), else
 * each page's first byte read and written back (the file is nobody else's yet). Best
 * effort: a failure leaves the pages to the writes, as without it. */
static void mb_bg_prefault(int fd, size_t len) {
    long page = sysconf(_SC_PAGESIZE);
    char *base = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        return;
    }
    if (madvise(base, len, MADV_POPULATE_WRITE) != 0 && page > 0) {
        volatile char *p = (volatile char *)base;
        for (size_t off = 0; off < len; off += (size_t)page) {
            p[off] = p[off];
        }
    }
    munmap(base, len);
}

static void *mb_bg_run(void *arg) {
    mb_bg *j = (mb_bg *)arg;
    int rc;
    if (j->kind == MB_BG_FALLOCATE) {
        rc = posix_fallocate(j->fd, 0, (off_t)j->len);
        if (rc == 0 && j->prefault) {
            mb_bg_prefault(j->fd, j->len);
        }
        if (j->unlock_fd >= 0) {
            struct flock fl;
            memset(&fl, 0, sizeof fl);
            fl.l_type = F_UNLCK;
            fl.l_whence = SEEK_SET;
            fl.l_start = j->unlock_at;
            fl.l_len = 1;
            fcntl(j->unlock_fd, F_SETLK, &fl);  /* POSIX locks are the process's: any thread */
        }
    } else if (j->kind == MB_BG_MUNMAP) {
        rc = munmap(j->addr, j->len) == 0 ? 0 : errno;
    } else {
        rc = madvise(j->addr, j->len, j->advice) == 0 ? 0 : errno;
    }
    j->rc = rc;
    store_release_int(&j->done, 1);
    return NULL;
}

/* 0 once started, else the error number (the caller then does the work itself). */
static inline int mb_bg_start(mb_bg *j) {
    int rc;
    j->done = 0;
    j->rc = 0;
    j->pid = getpid();
    rc = pthread_create(&j->thread, NULL, mb_bg_run, j);
    if (rc != 0) {
        j->pid = 0;
    }
    return rc;
}

static inline int mb_bg_done(mb_bg *j) {
    return load_acquire_int(&j->done);
}

/* Waits for the call: its result, or -1 if none runs here (never started, already joined,
 * or started by the parent of this forked process). */
static inline int mb_bg_join(mb_bg *j) {
    if (j->pid == 0 || j->pid != getpid()) {
        return -1;
    }
    pthread_join(j->thread, NULL);
    j->pid = 0;
    return j->rc;
}

#endif
