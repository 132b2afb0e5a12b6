/* Liveness the kernel keeps: one mechanism for every holder of a side file's slot (a parked
 * reader in the wake file, a named consumer's holder in the registry, a writer's claim in the
 * writers file, a member of a work group). Design: docs/design/side-files.md, "Liveness".
 *
 * A holder takes an open-file-description (OFD) write lock on ONE byte of the side file, the
 * byte at its slot's offset (live_byte), through a descriptor it opened itself (its own open
 * file description). The kernel drops the lock when the last descriptor of that description
 * is closed: at exit, at SIGKILL, before the process is a zombie. Any process that can open
 * the same file sees the lock with F_OFD_GETLK, whatever its pid namespace: a lock is on the
 * inode, not on a pid. A pid is no proof across containers (it names another process there)
 * and a zombie's pid is "alive" to kill(2); a lock is neither.
 *
 *     holder:  live_hold(fd, byte)        F_OFD_SETLK F_WRLCK [byte, byte+1): LIVE_TAKEN, or
 *                                         LIVE_BUSY if a live holder has it
 *              ... the slot is ours while fd stays open ...
 *              live_release(fd, byte)     F_OFD_SETLK F_UNLCK (close(fd) does it too)
 *     anyone:  live_probe(fd, byte)       F_OFD_GETLK: LIVE_ALIVE if some other description
 *                                         holds it, LIVE_DEAD if nobody does
 *
 * Two rules follow from OFD semantics:
 *  - a probe through the holder's own description never sees the holder's lock (a lock does
 *    not conflict with its own description): probe through another descriptor, or skip your
 *    own slots (every user here does both: each holder object opens its own descriptor);
 *  - fork() shares the description: a child that keeps the inherited descriptor keeps the
 *    parent's lock alive after the parent dies. Holders open with O_CLOEXEC and close their
 *    lock descriptors in the child after fork (pthread_atfork / os.register_at_fork).
 * A probe costs one system call (about a microsecond): callers probe when a slot looks stuck,
 * never per record.
 */
#ifndef MAPPEDBUS_LIVENESS_H
#define MAPPEDBUS_LIVENESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* F_OFD_SETLK, F_OFD_GETLK */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>

/* Linux's values (fcntl.h defines them only under _GNU_SOURCE, which an includer may have missed). */
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#endif
#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

#define LIVE_UNUSED __attribute__((unused))

/* live_hold */
#define LIVE_TAKEN 0        /* the lock is ours now (or already was, through this description) */
#define LIVE_BUSY 1         /* a live holder has it */
/* live_probe */
#define LIVE_DEAD 0         /* nobody holds the byte: its last holder is gone */
#define LIVE_ALIVE 1        /* some other open file description holds it */
/* either: a failed system call (EBADF, ENOLCK, a file system without OFD locks) */
#define LIVE_ERROR (-1)

static inline void live_range(struct flock *fl, short type, int64_t byte) {
    memset(fl, 0, sizeof *fl);
    fl->l_type = type;
    fl->l_whence = SEEK_SET;
    fl->l_start = (off_t)byte;
    fl->l_len = 1;
    fl->l_pid = 0;          /* must be 0 for OFD locks */
}

/* Take the liveness byte of a slot: LIVE_TAKEN, LIVE_BUSY or LIVE_ERROR (errno set). */
LIVE_UNUSED static int live_hold(int fd, int64_t byte) {
    struct flock fl;
    live_range(&fl, F_WRLCK, byte);
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return LIVE_TAKEN;
    if (errno == EAGAIN || errno == EACCES) return LIVE_BUSY;
    return LIVE_ERROR;
}

/* Give the byte back (closing the descriptor does it too): 0, or LIVE_ERROR. */
LIVE_UNUSED static int live_release(int fd, int64_t byte) {
    struct flock fl;
    live_range(&fl, F_UNLCK, byte);
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : LIVE_ERROR;
}

/* Whether some other open file description holds the byte: LIVE_ALIVE, LIVE_DEAD or
 * LIVE_ERROR. Through the holder's own description this says LIVE_DEAD (see above). */
LIVE_UNUSED static int live_probe(int fd, int64_t byte) {
    struct flock fl;
    live_range(&fl, F_WRLCK, byte);
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return LIVE_ERROR;
    return fl.l_type == F_UNLCK ? LIVE_DEAD : LIVE_ALIVE;
}

#endif
