/* A file descriptor that becomes readable when a record may be there, for event loops
 * (asyncio's add_reader, selectors). Two kinds, the first that works:
 *
 * RING (Linux 6.7+): an io_uring whose completion queue is the descriptor. arm() registers
 * the reader as parked (wake_prepare), looks at its next slot, and submits a FUTEX_WAIT on
 * the wake file's seq word (value v) linked to a timeout of the park bound. A writer's
 * FUTEX_WAKE completes the request in the kernel, which makes the ring readable: the event
 * loop is the only thread woken, one wake-up a record as for a pipe. The timeout makes it
 * readable too (the bounded self-look: records whose writer woke nobody); the reader's
 * read() then looks, and the next arm() doubles the bound if that look found nothing, or
 * returns it to park_ns (held WAKE_PIN_NS) if it found a record no one woke it for.
 * No lost wake-up: a bump of seq after wake_prepare's read of v either comes before the
 * kernel queues the wait (it then finds seq != v: -EAGAIN, readable at once) or wakes it.
 *
 * THREAD (io_uring missing, disabled, or without FUTEX_WAIT, e.g. under a seccomp filter):
 * an eventfd and a thread of this process sleeping on seq for the reader; a record costs
 * two wake-ups, the writer's of the thread and the thread's of the event loop.
 *
 *   arm (event loop thread)             thread
 *   drain the eventfd                   cur = seq; armed? and (seq != armed_v, or the
 *   v = wake_prepare(); look at slot      watched status is set) -> eventfd, disarm
 *   armed_v = v; armed = 1 (seq-cst)    FUTEX_WAIT(seq, cur, the park bound)
 *   seq != v now, or the file's arming  not armed: the same wait (arm is seen within one
 *     taken? -> disarm, "ready"           park bound), or after WAKEFD_DEEP_NS without an
 *   the thread in a deep sleep? wake it   arm a deep sleep on a word of its own
 *
 * No lost wake-up: a writer's bump of seq either comes before the arm's last look at seq
 * (arm reports "ready") or after armed = 1, and the thread, woken by it or finding seq
 * moved when it goes to sleep, sees armed. While armed, the thread also looks at the
 * watched status by itself every park bound (records whose writer woke nobody).
 *
 * In both kinds arm() first clears the descriptor's readiness: after arm() it is readable
 * only when a record may be there or the self-look's bound passed.
 */
#ifndef MAPPEDBUS_WAKEFD_H
#define MAPPEDBUS_WAKEFD_H

#include <linux/io_uring.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "_wake.h"

#define WAKEFD_DEEP_NS 1000000000LL   /* not armed this long: the thread sleeps until arm() */
#define WAKEFD_CANCEL_WAIT_NS 1000000000LL   /* disarm's longest wait for the cancelled wait */

#define WAKEFD_KIND_RING 1
#define WAKEFD_KIND_THREAD 2

/* Not in older <linux/io_uring.h> (an enum there, so not #ifdef-able): the kernel's values. */
#define WAKEFD_OP_FUTEX_WAIT 51
#define WAKEFD_FUTEX2_SIZE_U32 0x02
#define WAKEFD_FUTEX_BITSET_ANY 0xffffffffu

/* user_data of the ring's requests */
#define WAKEFD_UD_FUTEX 1
#define WAKEFD_UD_TIMEOUT 2
#define WAKEFD_UD_CANCEL 3

/* The last FUTEX_WAIT's outcome, read by the next arm() for the self-look's backoff. */
#define WAKEFD_OUTCOME_NONE 0
#define WAKEFD_OUTCOME_WOKEN 1        /* woken, or seq had moved (a writer's wake) */
#define WAKEFD_OUTCOME_TIMED_OUT 2    /* the park bound passed (or cancelled by disarm) */

typedef struct {
    int fd;                  /* the ring's descriptor, -1 */
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_map, *cq_map;   /* the mappings, and their sizes */
    size_t sq_map_len, cq_map_len, sqes_len;
    int inflight;            /* completions still to come */
    int futex_pending;       /* a FUTEX_WAIT is queued */
    uint32_t wait_v;         /* the value it waits on */
    int64_t fire_at_ns;      /* monotonic ns its linked timeout ends (about) */
    int outcome;             /* WAKEFD_OUTCOME_* of the last FUTEX_WAIT, NONE once read */
    struct __kernel_timespec ts;   /* the link timeout's bound (read by the kernel at submit) */
} wakefd_ring;

typedef struct {
    int kind;                /* WAKEFD_KIND_* */
    char *w;                 /* the wake file's mapping */
    int slot;                /* the parking slot of this descriptor's reader */
    wake_backoff backoff;    /* the self-look's bound */
    const char *last_watch;  /* RING: the slot watched by the last arm (compared, never read) */
    wakefd_ring ring;        /* RING */
    /* THREAD */
    int efd;                 /* the eventfd handed to the event loop */
    pthread_t thread;
    pthread_mutex_t mu;      /* held while the thread reads *watch, and to change it */
    int started;
    int stop;
    int armed;               /* 1: fire once (seq-cst: see above) */
    int deep;                /* 1 while the thread sleeps until arm() (seq-cst with armed) */
    int64_t last_arm_ns;     /* monotonic ns of the last arm() */
    int64_t fire_at_ns;      /* fire by then even if nothing came (monotonic ns), or 0 */
    uint32_t armed_v;        /* seq when armed */
    const char *watch;       /* the status word to look at, or NULL: any wake fires */
    int aligned;             /* watch is 4-byte aligned (else its low byte is read) */
} wakefd;

static inline int wakefd_ready(const char *watch, int aligned) {
    if (watch == NULL) return 0;
    return aligned ? load_acquire_i32(watch) != 0 : load_acquire_u8(watch) != 0;
}

/* -- RING ------------------------------------------------------------------------------ */

static inline int wakefd_enter(int fd, unsigned submit, unsigned wait_nr) {
    long rc = syscall(__NR_io_uring_enter, fd, submit, wait_nr,
                      wait_nr ? IORING_ENTER_GETEVENTS : 0, NULL, 0);
    return rc < 0 ? -errno : (int)rc;
}

/* Wait up to ns for a completion (ns: the kernel's timeout, so a request whose completion
 * another thread must run cannot hang us); 0 or -errno (-ETIME: none came). */
static inline int wakefd_enter_wait(int fd, int64_t ns) {
    struct __kernel_timespec ts;
    struct io_uring_getevents_arg arg;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    memset(&arg, 0, sizeof arg);
    arg.ts = (uint64_t)(uintptr_t)&ts;
    long rc = syscall(__NR_io_uring_enter, fd, 0, 1,
                      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof arg);
    return rc < 0 ? -errno : 0;
}

static struct io_uring_sqe *wakefd_sqe(wakefd_ring *r) {
    /* the only producer: our own tail; the kernel consumes up to it at io_uring_enter */
    unsigned tail = *r->sq_tail;
    unsigned i = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = &r->sqes[i];
    memset(sqe, 0, sizeof *sqe);
    r->sq_array[i] = i;
    store_release_i32(r->sq_tail, (int32_t)(tail + 1));
    return sqe;
}

/* Take every completion: the ring is not readable after this until a new one comes. */
static void wakefd_reap(wakefd *f) {
    wakefd_ring *r = &f->ring;
    unsigned head = *r->cq_head;
    unsigned tail = (unsigned)load_acquire_i32(r->cq_tail);
    while (head != tail) {
        struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
        if (cqe->user_data == WAKEFD_UD_FUTEX) {
            r->futex_pending = 0;
            r->outcome = cqe->res == -ECANCELED ? WAKEFD_OUTCOME_TIMED_OUT
                                                : WAKEFD_OUTCOME_WOKEN;
            wake_done(f->w, f->slot);
        }
        r->inflight--;
        head++;
    }
    store_release_i32(r->cq_head, (int32_t)head);
}

/* Queue FUTEX_WAIT(seq, v) linked to a timeout of ns; 0 or -errno. */
static int wakefd_ring_wait(wakefd *f, uint32_t v, int64_t ns) {
    wakefd_ring *r = &f->ring;
    struct io_uring_sqe *sqe = wakefd_sqe(r);
    sqe->opcode = WAKEFD_OP_FUTEX_WAIT;
    sqe->flags = IOSQE_IO_LINK;
    sqe->fd = WAKEFD_FUTEX2_SIZE_U32;         /* not FUTEX2_PRIVATE: the word is shared */
    sqe->addr = (uint64_t)(uintptr_t)(f->w + WAKE_SEQ_OFFSET);
    sqe->off = v;                             /* addr2: the expected value */
    sqe->addr3 = WAKEFD_FUTEX_BITSET_ANY;
    sqe->user_data = WAKEFD_UD_FUTEX;
    r->ts.tv_sec = ns / 1000000000;
    r->ts.tv_nsec = ns % 1000000000;
    sqe = wakefd_sqe(r);
    sqe->opcode = IORING_OP_LINK_TIMEOUT;
    sqe->addr = (uint64_t)(uintptr_t)&r->ts;
    sqe->len = 1;
    sqe->user_data = WAKEFD_UD_TIMEOUT;
    int rc = wakefd_enter(r->fd, 2, 0);
    if (rc < 0) return rc;
    r->inflight += 2;
    r->futex_pending = 1;
    r->wait_v = v;
    r->fire_at_ns = wake_now_ns() + ns;
    return 0;
}

/* Cancel a queued FUTEX_WAIT and take every completion (the ring is not readable after). */
static void wakefd_ring_cancel(wakefd *f) {
    wakefd_ring *r = &f->ring;
    int cancelled = 0;
    wakefd_reap(f);
    if (r->futex_pending) {
        cancelled = 1;
        struct io_uring_sqe *sqe = wakefd_sqe(r);
        sqe->opcode = IORING_OP_ASYNC_CANCEL;
        sqe->addr = WAKEFD_UD_FUTEX;
        sqe->user_data = WAKEFD_UD_CANCEL;
        if (wakefd_enter(r->fd, 1, 0) == 1) r->inflight++;
    }
    /* the futex's, the timeout's and the cancel's completions come at once now (run by the
     * thread that armed: another one's may take a moment; past a second, they come later
     * and the next reap takes them) */
    int64_t give_up = wake_now_ns() + WAKEFD_CANCEL_WAIT_NS;
    while (r->inflight > 0 && wake_now_ns() < give_up) {
        int rc = wakefd_enter_wait(r->fd, WAKEFD_CANCEL_WAIT_NS / 10);
        wakefd_reap(f);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) break;
    }
    if (cancelled) r->outcome = WAKEFD_OUTCOME_NONE;    /* cut short: no word on the bound */
}

static void wakefd_ring_close(wakefd_ring *r) {
    if (r->sqes) munmap(r->sqes, r->sqes_len);
    if (r->cq_map && r->cq_map != r->sq_map) munmap(r->cq_map, r->cq_map_len);
    if (r->sq_map) munmap(r->sq_map, r->sq_map_len);
    if (r->fd >= 0) close(r->fd);       /* the kernel cancels what is still queued */
    r->sqes = NULL;
    r->sq_map = r->cq_map = NULL;
    r->fd = -1;
}

/* Set up the ring and check the kernel runs FUTEX_WAIT on the wake file: 0, or -errno. */
static int wakefd_ring_open(wakefd *f) {
    wakefd_ring *r = &f->ring;
    struct io_uring_params p;
    memset(r, 0, sizeof *r);
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (r->fd < 0) {
        r->fd = -1;
        return -errno;
    }
    r->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        if (r->cq_map_len > r->sq_map_len) r->sq_map_len = r->cq_map_len;
        r->cq_map_len = r->sq_map_len;
    }
    r->sq_map = mmap(NULL, r->sq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                     r->fd, IORING_OFF_SQ_RING);
    if (r->sq_map == MAP_FAILED) { r->sq_map = NULL; goto fail; }
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        r->cq_map = r->sq_map;
    } else {
        r->cq_map = mmap(NULL, r->cq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                         r->fd, IORING_OFF_CQ_RING);
        if (r->cq_map == MAP_FAILED) { r->cq_map = NULL; goto fail; }
    }
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) { r->sqes = NULL; goto fail; }
    char *sq = (char *)r->sq_map, *cq = (char *)r->cq_map;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    /* The probe: a wait on a value seq does not hold (it is not 2^31 bumps away) must fail
     * with EAGAIN at once; an older kernel answers EINVAL (no FUTEX_WAIT), one without
     * IORING_ENTER_EXT_ARG (which disarm needs) EINVAL too. */
    uint32_t seq = wake_seq(f->w);
    int rc = wakefd_ring_wait(f, seq + 0x80000000u, 1000000000LL);
    if (rc < 0) goto fail_rc;
    int res = 0, got = 0;
    while (r->inflight > 0) {
        rc = wakefd_enter_wait(r->fd, 2000000000LL);
        if (rc == -ETIME) goto fail_rc;
        unsigned head = *r->cq_head, tail = (unsigned)load_acquire_i32(r->cq_tail);
        for (; head != tail; head++) {
            struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
            if (cqe->user_data == WAKEFD_UD_FUTEX) { res = cqe->res; got = 1; }
            r->inflight--;
        }
        store_release_i32(r->cq_head, (int32_t)head);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) goto fail_rc;
    }
    r->futex_pending = 0;
    r->outcome = WAKEFD_OUTCOME_NONE;
    if (!got || res != -EAGAIN) { rc = got ? res : -EIO; goto fail_rc; }
    return 0;
fail:
    rc = -errno;
fail_rc:
    wakefd_ring_close(r);
    return rc < 0 ? rc : -EIO;
}

/* -- THREAD ---------------------------------------------------------------------------- */

static inline void wakefd_futex_private(int *word, int op, int val, int64_t ns) {
    struct timespec ts;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, op == FUTEX_WAIT ? &ts : NULL,
            NULL, 0);
}

static void wakefd_fire(wakefd *f) {
    uint64_t one = 1;
    store_seq_cst_int(&f->armed, 0);
    wake_done(f->w, f->slot);
    if (write(f->efd, &one, sizeof one) < 0) { /* EAGAIN: readable already */ }
}

static void *wakefd_run(void *arg) {
    wakefd *f = (wakefd *)arg;
    while (!load_acquire_int(&f->stop)) {
        uint32_t cur = wake_seq(f->w);
        int armed = load_seq_cst_int(&f->armed);
        int found = 0;
        if (!armed) {
            if (wake_now_ns() - load_acquire_i64(&f->last_arm_ns) < WAKEFD_DEEP_NS) {
                /* armed again soon, most likely: seen within one park bound */
                wake_wait_raw(f->w, cur, f->backoff.cur_ns);
            } else {
                store_seq_cst_int(&f->deep, 1);
                if (!load_seq_cst_int(&f->armed) && !load_acquire_int(&f->stop))
                    wakefd_futex_private(&f->deep, FUTEX_WAIT, 1, WAKEFD_DEEP_NS);
                store_seq_cst_int(&f->deep, 0);
            }
            continue;
        }
        int64_t fire_at;
        pthread_mutex_lock(&f->mu);
        if (load_acquire_int(&f->armed))
            found = wakefd_ready(f->watch, f->aligned);
        fire_at = f->fire_at_ns;
        pthread_mutex_unlock(&f->mu);
        int64_t now = wake_now_ns();
        if (cur != f->armed_v || found || (fire_at > 0 && now >= fire_at)) {
            /* a record no wake announced: back to the shortest bound */
            if (found && cur == f->armed_v) wake_backoff_after(&f->backoff, 0, 1, now);
            wakefd_fire(f);
            continue;
        }
        int64_t ns = f->backoff.cur_ns;
        int cut = fire_at > 0 && fire_at - now < ns;
        wake_wait_raw(f->w, cur, cut ? fire_at - now : ns);
        if (!cut && wake_seq(f->w) == cur) {
            /* the park bound passed with no wake: the look decides the next bound */
            pthread_mutex_lock(&f->mu);
            found = load_acquire_int(&f->armed) && wakefd_ready(f->watch, f->aligned);
            pthread_mutex_unlock(&f->mu);
            wake_backoff_after(&f->backoff, 0, found, wake_now_ns());
        }
    }
    return NULL;
}

WAKE_UNUSED static void wakefd_drain(wakefd *f) {
    uint64_t n;
    if (f->kind == WAKEFD_KIND_RING) {
        wakefd_reap(f);
        return;
    }
    if (read(f->efd, &n, sizeof n) < 0) { /* EAGAIN: nothing to drain */ }
}

/* -- both ------------------------------------------------------------------------------ */

/* 0, or an errno. ``kind``: WAKEFD_KIND_RING tries the ring first, falling back to the
 * thread; WAKEFD_KIND_THREAD the thread only. */
WAKE_UNUSED static int wakefd_start(wakefd *f, char *w, int slot, int64_t park_ns, int64_t park_max_ns,
                        int kind) {
    memset(f, 0, sizeof *f);
    f->w = w;
    f->slot = slot;
    f->efd = -1;
    f->ring.fd = -1;
    wake_backoff_init(&f->backoff, park_ns, park_max_ns);
    if (kind == WAKEFD_KIND_RING && wakefd_ring_open(f) == 0) {
        f->kind = WAKEFD_KIND_RING;
        f->started = 1;
        return 0;
    }
    f->kind = WAKEFD_KIND_THREAD;
    store_release_i64(&f->last_arm_ns, wake_now_ns());
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) return errno;
    pthread_mutex_init(&f->mu, NULL);
    int rc = pthread_create(&f->thread, NULL, wakefd_run, f);
    if (rc != 0) {
        pthread_mutex_destroy(&f->mu);
        close(f->efd);
        f->efd = -1;
        return rc;
    }
    f->started = 1;
    return 0;
}

static inline int wakefd_fileno(const wakefd *f) {
    return f->kind == WAKEFD_KIND_RING ? f->ring.fd : f->efd;
}

/* RING: the last wait's outcome and whether the reader moved on since decide the bound. */
static void wakefd_ring_backoff(wakefd *f, const char *watch) {
    int outcome = f->ring.outcome;
    f->ring.outcome = WAKEFD_OUTCOME_NONE;
    if (outcome == WAKEFD_OUTCOME_NONE) return;
    wake_backoff_after(&f->backoff, outcome == WAKEFD_OUTCOME_WOKEN,
                       watch != f->last_watch, wake_now_ns());
}

/* Arm for the slot at ``watch`` (NULL: past a segment's end, any wake fires), clearing any
 * earlier readiness; ``within_ns`` > 0: readable after that long at the latest, even if
 * nothing came (a caller's own deadline or check, without a timer of its own). Returns 0
 * when armed, 1 when a record may be there now (not armed: read, then arm again), or
 * -errno. */
WAKE_UNUSED static int wakefd_arm(wakefd *f, const char *watch, int aligned, int64_t within_ns) {
    if (f->kind == WAKEFD_KIND_RING) {
        wakefd_ring *r = &f->ring;
        wakefd_reap(f);
        wakefd_ring_backoff(f, watch);
        f->last_watch = watch;
        uint32_t v = wake_prepare(f->w, f->slot);
        if (wakefd_ready(watch, aligned) || !wake_needed(f->w)) {
            /* a record, or a writer took the file's arming (its bump may precede v) */
            wake_done(f->w, f->slot);
            return 1;
        }
        int64_t ns = f->backoff.cur_ns;
        if (within_ns > 0 && within_ns < ns) ns = within_ns;
        if (r->futex_pending) {
            if (r->wait_v != v) {
                wake_done(f->w, f->slot);     /* seq moved: it completes now */
                return 1;
            }
            if (r->fire_at_ns <= wake_now_ns() + ns) return 0;   /* the queued wait serves */
            wakefd_ring_cancel(f);            /* it would fire too late: queue a new one */
            v = wake_prepare(f->w, f->slot);
            if (wakefd_ready(watch, aligned) || !wake_needed(f->w)) {
                wake_done(f->w, f->slot);
                return 1;
            }
        }
        int rc = wakefd_ring_wait(f, v, ns);
        if (rc < 0) {
            wake_done(f->w, f->slot);
            return rc;
        }
        return 0;
    }
    wakefd_drain(f);
    uint32_t v = wake_prepare(f->w, f->slot);
    if (wakefd_ready(watch, aligned)) {
        wake_done(f->w, f->slot);
        return 1;
    }
    pthread_mutex_lock(&f->mu);
    f->watch = watch;
    f->aligned = aligned;
    f->armed_v = v;
    int64_t now = wake_now_ns();
    f->fire_at_ns = within_ns > 0 ? now + within_ns : 0;
    store_release_i64(&f->last_arm_ns, now);
    store_seq_cst_int(&f->armed, 1);
    pthread_mutex_unlock(&f->mu);
    /* the thread in its deep sleep (it stored deep = 1, then found armed == 0): wake it */
    if (load_seq_cst_int(&f->deep) && exchange_i32(&f->deep, 0) == 1)
        wakefd_futex_private(&f->deep, FUTEX_WAKE, 1, 0);
    /* seq moved, or a writer took the file's arming (see wake_wait): look again */
    if (wake_seq(f->w) != v || !wake_needed(f->w)) {
        store_seq_cst_int(&f->armed, 0);
        wake_done(f->w, f->slot);
        return 1;
    }
    return 0;
}

/* Stop watching and clear the readiness. Once it returns nothing reads the watched word
 * (its mapping may go). */
WAKE_UNUSED static void wakefd_disarm(wakefd *f) {
    if (f->kind == WAKEFD_KIND_RING) {
        wakefd_ring_cancel(f);
        wake_done(f->w, f->slot);
        return;
    }
    pthread_mutex_lock(&f->mu);
    store_seq_cst_int(&f->armed, 0);
    f->watch = NULL;
    f->fire_at_ns = 0;
    pthread_mutex_unlock(&f->mu);
    wake_done(f->w, f->slot);
    wakefd_drain(f);
}

WAKE_UNUSED static void wakefd_stop(wakefd *f) {
    if (!f->started) return;
    if (f->kind == WAKEFD_KIND_RING) {
        wake_done(f->w, f->slot);
        wakefd_ring_close(&f->ring);
        f->started = 0;
        return;
    }
    wakefd_disarm(f);
    store_seq_cst_int(&f->stop, 1);
    /* move the word and wake the thread (readers parked on it look again: harmless); a
     * deep sleep after this finds deep == 0 and returns at once */
    wake_bump(f->w);
    exchange_i32(&f->deep, 0);
    wakefd_futex_private(&f->deep, FUTEX_WAKE, 1, 0);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    close(f->efd);
    f->efd = -1;
    f->started = 0;
}

#endif
