/* The writers file: who holds an uncommitted slot (issue 33; docs/design/side-files.md, "The
 * writers file"). PATH.writers beside a single-file bus, DIR/bus.writers beside a rolling one,
 * never inside the Mappedbus file: the Java original keeps reading and writing the bus unaware
 * of it, and its writers are simply never found here (readers fall back to their timeout).
 * The layout is drawn in layout.py (WRITERS_*, WRITER_*) and mirrored in Layout.java; a test
 * checks the three agree. Used by the Cython writer and reader; the Java port implements the
 * same steps over MappedAtomics and takes the locks through its JNI library.
 *
 *   writer, open:   for i in 0..WRITER_SLOT_COUNT-1: live_hold(fd, writers_live_byte(i));
 *                   the first TAKEN is its slot. A non-empty claim there is a dead holder's:
 *                   roll back its uncommitted slots (status 0 -> 2) in the files it maps,
 *                   then writers_clear().
 *   writer, every reservation, after the fetch-and-add returned o for n slots:
 *                   writers_publish(slot, o, o + n * slot_size): begin, then end, both
 *                   release stores to a line only this writer writes.
 *   reader, slot P uncommitted (where it checks its timeout):
 *                   writers_holder(): end, then begin, of every slot (acquire loads, in that
 *                   order: with the writer's order a reader sees a claim or an empty range,
 *                   never a claim spanning another writer's slots); the slot whose claim
 *                   holds P is probed: DEAD -> roll P back at once; ALIVE and its claim
 *                   unchanged -> P is never rolled back; changed -> look again. No claim holds
 *                   P: WRITER_UNKNOWN (the Java original, or a writer between its
 *                   fetch-and-add and its publish), the reader's timeout decides as before.
 *
 * A claim whose holder is dead is final: positions come from the bus's fetch-and-add, so no
 * other writer ever reserves them, and its holder will never commit them.
 */
#ifndef MAPPEDBUS_WRITERS_H
#define MAPPEDBUS_WRITERS_H

#include <stdint.h>

#include "_atomic.h"
#include "_liveness.h"

#define WRITERS_UNUSED __attribute__((unused))

#define WRITERS_FILE_SIZE 16384
#define WRITERS_MAGIC 0x315452575355424DLL       /* "MBUSWRT1" little-endian */
#define WRITERS_VERSION 1
#define WRITERS_MAGIC_OFFSET 0                   /* int64 */
#define WRITERS_VERSION_OFFSET 8                 /* int32 */
#define WRITERS_SLOTS_OFFSET 64
#define WRITER_SLOT_SIZE 64                      /* a cache line the writer owns */
#define WRITER_SLOT_COUNT 255                    /* (16384 - 64) / 64 */
#define WRITER_BEGIN_OFFSET 0                    /* int64: the claim's first position */
#define WRITER_END_OFFSET 8                      /* int64: one past its last slot; begin >= end: none */
#define WRITER_PID_OFFSET 16                     /* int32: for people only */
#define WRITER_TAKEN_NS_OFFSET 24                /* int64: CLOCK_REALTIME ns, for people only */

/* writers_holder's outcomes */
#define WRITER_UNKNOWN 0    /* no claim holds the position, or no answer from the kernel */
#define WRITER_ALIVE 1      /* a live writer holds it: it will commit it */
#define WRITER_DEAD 2       /* its holder is gone: it will never be committed */

/* How often writers_holder looks again when a live slot's claim moved under it (the writer
 * published its next claim: the position it asked about is committed by then). */
#define WRITERS_LOOKS 4

static inline char *writers_slot(char *w, int i) {
    return w + WRITERS_SLOTS_OFFSET + (int64_t)i * WRITER_SLOT_SIZE;
}

/* A slot's liveness byte: its own first byte. */
static inline int64_t writers_live_byte(int i) {
    return WRITERS_SLOTS_OFFSET + (int64_t)i * WRITER_SLOT_SIZE;
}

/* A new (all zero) file gets its magic and version; 0 if the file is a writers file now, -1
 * if its magic is wrong, -2 its version. */
WRITERS_UNUSED static int writers_init(char *w) {
    int64_t magic = cas_i64(w + WRITERS_MAGIC_OFFSET, 0, WRITERS_MAGIC);
    if (magic != 0 && magic != WRITERS_MAGIC) return -1;
    int32_t version = cas_i32(w + WRITERS_VERSION_OFFSET, 0, WRITERS_VERSION);
    if (version != 0 && version != WRITERS_VERSION) return -2;
    return 0;
}

/* The writer's claim [begin, end) after its fetch-and-add: begin first, so that a reader that
 * sees the new end (acquire) sees the new begin too; one that sees the old end sees the old
 * claim or an empty range (a writer's positions only grow). */
static inline void writers_publish(char *slot, int64_t begin, int64_t end) {
    store_release_i64(slot + WRITER_BEGIN_OFFSET, begin);
    store_release_i64(slot + WRITER_END_OFFSET, end);
}

/* No claim: end first, so no reader ever sees a range larger than the claim was. */
static inline void writers_clear(char *slot) {
    store_release_i64(slot + WRITER_END_OFFSET, 0);
    store_release_i64(slot + WRITER_BEGIN_OFFSET, 0);
}

/* A slot's claim as a reader loads it: end, then begin. */
static inline void writers_load_claim(char *slot, int64_t *begin, int64_t *end) {
    *end = load_acquire_i64(slot + WRITER_END_OFFSET);
    *begin = load_acquire_i64(slot + WRITER_BEGIN_OFFSET);
}

/* Who holds position p: WRITER_ALIVE, WRITER_DEAD or WRITER_UNKNOWN, probed through fd (the
 * asker's own descriptor of the writers file; a slot the asker itself holds through fd
 * reads as dead, so a writer never asks about its own slot). On WRITER_ALIVE and WRITER_DEAD,
 * *slot_out is the holder's slot index and *begin, *end its claim. */
WRITERS_UNUSED static int writers_holder(char *w, int fd, int64_t p, int *slot_out,
                                         int64_t *begin, int64_t *end) {
    for (int look = 0; look < WRITERS_LOOKS; look++) {
        int moved = 0;
        for (int i = 0; i < WRITER_SLOT_COUNT; i++) {
            char *s = writers_slot(w, i);
            int64_t b, e;
            writers_load_claim(s, &b, &e);
            if (!(b <= p && p < e)) continue;
            int r = live_probe(fd, writers_live_byte(i));
            if (r == LIVE_ERROR) return WRITER_UNKNOWN;
            if (r == LIVE_DEAD) {
                *slot_out = i; *begin = b; *end = e;
                return WRITER_DEAD;
            }
            int64_t b2, e2;
            writers_load_claim(s, &b2, &e2);
            if (b2 == b && e2 == e) {
                *slot_out = i; *begin = b; *end = e;
                return WRITER_ALIVE;
            }
            moved = 1;      /* the claim moved on while we probed: look again */
            break;
        }
        if (!moved) return WRITER_UNKNOWN;
    }
    return WRITER_UNKNOWN;
}

/* Roll back (status 0 -> 2) the uncommitted slots of a dead claim [from, to) that lie in one
 * mapped bus file: the file holds positions base_position + off for off in [first, last], slots
 * of slot_size bytes from first, and none at or past its limit is touched (a claim left in the
 * file by a bus since made anew under the path must not mark slots not yet reserved). Returns
 * how many this call rolled back. `aligned`: statuses are 4-byte aligned; otherwise the low byte
 * carries the whole status (as the reader swaps it). */
WRITERS_UNUSED static int64_t writers_roll_back(char *base, int64_t base_position, int64_t from,
                                                int64_t to, int64_t first, int64_t last,
                                                int64_t slot_size, int aligned) {
    int64_t n = 0;
    if (slot_size <= 0 || from >= to) return 0;
    int64_t off = from - base_position;
    int64_t stop = to - base_position;
    int64_t limit = load_acquire_i64(base);     /* the bus's limit: slots below it are reserved */
    if (stop > limit) stop = limit;
    if (off < first) off = first;
    if ((off - first) % slot_size != 0) off += slot_size - (off - first) % slot_size;
    for (; off < stop && off <= last; off += slot_size) {
        if (aligned) {
            if (cas_i32(base + off, 0, 2) == 0) n++;
        } else if (load_acquire_u8(base + off + 1) == 0 && load_acquire_u8(base + off + 2) == 0
                   && load_acquire_u8(base + off + 3) == 0) {
            if (cas_u8(base + off, 0, 2) == 0) n++;
        }
    }
    return n;
}

/* A new bus (this writer set its limit from 0): every claim a dead writer left in the writers
 * file is of a bus since deleted. Clear them, each under its slot's lock (so no taker races the
 * clear); slots with live holders (writers of the old bus still running) are left alone. Returns
 * how many were cleared. */
WRITERS_UNUSED static int writers_clear_dead(char *w, int fd) {
    int n = 0;
    for (int i = 0; i < WRITER_SLOT_COUNT; i++) {
        char *s = writers_slot(w, i);
        int64_t b, e;
        writers_load_claim(s, &b, &e);
        if (b >= e) continue;
        if (live_hold(fd, writers_live_byte(i)) != LIVE_TAKEN) continue;
        writers_clear(s);
        live_release(fd, writers_live_byte(i));
        n++;
    }
    return n;
}

#endif
