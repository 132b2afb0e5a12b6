/* SIGBUS guard for bus mappings.
 *
 * A bus file that shrinks under a mapping (truncate, ": > file", cp over it) turns every
 * access past its new end into SIGBUS, which kills the process. This handler looks the
 * faulting address up in a registry of live bus mappings; if it falls in one, it first
 * marks that mapping dead, then maps anonymous zero pages over the whole mapping
 * (MAP_FIXED, so the address range stays owned by the bus) and returns: the faulting
 * access re-executes on zeros, and the reader or writer sees the dead mark at its next
 * check and raises BusTruncatedError. Faults elsewhere go to the handler that was installed
 * before (faulthandler, the JVM, SIG_DFL).
 *
 * The registry is a fixed array read by the handler with acquire loads only (no locks, no
 * allocation): an entry is published by storing its base last, retired by clearing the
 * base first. Registration and retirement run under the GIL, so they never race each
 * other.
 */
#ifndef MAPPEDBUS_GUARD_H
#define MAPPEDBUS_GUARD_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "_atomic.h"

#define GUARD_SLOTS 8192

/* The registry and the handler live in _mapping only; the other modules include this
 * header for guard_is_dead, so the rest is marked unused there. */
#define GUARD_UNUSED __attribute__((unused))

typedef struct {
    uintptr_t base;   /* 0: free */
    uintptr_t size;
    int *dead;        /* set to 1 by the handler */
} guard_entry;

GUARD_UNUSED static guard_entry guard_table[GUARD_SLOTS];
GUARD_UNUSED static int guard_high = 0;          /* entries at or above this index are all free */
GUARD_UNUSED static struct sigaction guard_previous;

GUARD_UNUSED static void guard_chain(int sig, siginfo_t *info, void *ctx) {
    struct sigaction *prev = &guard_previous;
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction != NULL) {
            prev->sa_sigaction(sig, info, ctx);
            return;
        }
    } else if (prev->sa_handler == SIG_IGN) {
        return;
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != NULL) {
        prev->sa_handler(sig);
        return;
    }
    /* Default action: restore it and let the signal (pending: it is blocked while we
     * run) or the re-executed fault terminate the process as it would have. */
    signal(sig, SIG_DFL);
    raise(sig);
}

GUARD_UNUSED static void guard_handler(int sig, siginfo_t *info, void *ctx) {
    int saved = errno;
    uintptr_t addr = (uintptr_t)info->si_addr;
    int high = load_acquire_int(&guard_high);
    /* Only a real fault (not kill -BUS) carries an address worth looking up. */
    if (info->si_code > 0) {
        for (int i = 0; i < high; i++) {
            uintptr_t base = load_acquire_uptr(&guard_table[i].base);
            if (base == 0 || addr < base)
                continue;
            uintptr_t size = guard_table[i].size;
            if (addr - base >= size)
                continue;
            store_seq_cst_int(guard_table[i].dead, 1);
            void *p = mmap((void *)base, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (p != MAP_FAILED) {
                errno = saved;
                return;
            }
            break;   /* cannot repair: behave as without the guard */
        }
    }
    errno = saved;
    guard_chain(sig, info, ctx);
}

/* Install the handler unless it is the current one (someone, e.g. faulthandler.enable(),
 * may have replaced it since: then it chains to that one). 0 or -1 with errno. */
GUARD_UNUSED static int guard_install(void) {
    struct sigaction now, sa;
    if (sigaction(SIGBUS, NULL, &now) != 0)
        return -1;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == guard_handler)
        return 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    guard_previous = now;
    if (sigaction(SIGBUS, &sa, NULL) != 0)
        return -1;
    return 0;
}

/* Register a mapping; returns its slot, or -1 when the table is full. */
GUARD_UNUSED static int guard_register(void *base, size_t size, int *dead) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        if (load_acquire_uptr(&guard_table[i].base) != 0)
            continue;
        guard_table[i].size = size;
        guard_table[i].dead = dead;
        store_release_uptr(&guard_table[i].base, (uintptr_t)base);
        if (i >= guard_high)
            store_release_int(&guard_high, i + 1);
        return i;
    }
    return -1;
}

/* Retire a slot before its mapping is unmapped. */
GUARD_UNUSED static void guard_unregister(int slot) {
    if (slot >= 0 && slot < GUARD_SLOTS)
        store_release_uptr(&guard_table[slot].base, 0);
}

/* The hot-path check: one load of a flag that is always 0 until the handler runs. */
static inline int guard_is_dead(const int *dead) {
    return __builtin_expect(load_relaxed_int(dead), 0);
}

#endif
