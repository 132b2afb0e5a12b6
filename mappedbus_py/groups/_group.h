/* The work-group protocol, written once in C for every member: the Cython member
 * (groups/_group.pyx) and, through the JNI library, the Java one. Design:
 * docs/design/side-files.md, "Work groups"; layout and diagram: mappedbus_py/formats/layout.py,
 * GROUP_*; guide: docs/groups.md.
 *
 * A group file holds `window` entries; entry(g) = g mod window describes record g (the global
 * slot index of the bus) while start <= g < end. An entry's word changes only by CAS, from the
 * exact word a member saw, so of two members racing for a record one wins, and an ack from a
 * member whose delivery was taken away (lease expired, declared dead) fails:
 *
 *   EMPTY(t) --acquire--> ACQUIRED(t, 1, me) --ack--> ACKED(t) --advance--> EMPTY(t + 1)
 *   EMPTY(t) --skip (slot rolled back)--> SKIP(t) --advance--> EMPTY(t + 1)
 *   ACQUIRED(t, d, m) --release / owner dead / lease past--> RELEASED or redelivered:
 *       ACQUIRED(t, d + 1, me); past max_deliveries: DEAD(t) (after the dead-letter append)
 *
 * `end` moves by CAS g -> g + 1 once entry(g) left EMPTY(tag(g)); anyone seeing that entry
 * taken while end == g helps, so a member dying between the two CASes loses nothing. `start`
 * moves over done entries (ACKED, DEAD, SKIP): the entry is reset to EMPTY(tag + 1) first,
 * then start CASes s -> s + 1, so an entry is EMPTY for its next lap before anyone may take
 * g + window (acquire refuses g - start >= window).
 *
 * The lease deadline and position of an entry are written before the CAS that publishes an
 * acquisition; a racing loser may overwrite the lease with a similar value. The lease is a
 * hint for redelivery only: correctness (one ack per record) rests on the word alone.
 *
 * Member liveness is an OFD lock on the first byte of its member slot (_liveness.h); probed
 * only when looking for redeliveries, never per record.
 */
#ifndef MAPPEDBUS_GROUP_H
#define MAPPEDBUS_GROUP_H

#include <stdint.h>
#include "_atomic.h"
#include "_liveness.h"

#define GROUP_UNUSED __attribute__((unused))

/* offsets: mappedbus_py/formats/layout.py (tests/groups/test_groups.py checks they agree) */
#define GROUP_MAGIC_OFFSET 0
#define GROUP_VERSION_OFFSET 8
#define GROUP_WINDOW_OFFSET 12
#define GROUP_MAX_DELIVERIES_OFFSET 16
#define GROUP_MAX_IN_FLIGHT_OFFSET 20
#define GROUP_LEASE_NS_OFFSET 24
#define GROUP_START_OFFSET 64
#define GROUP_END_OFFSET 128
#define GROUP_REDELIVERED_OFFSET 192
#define GROUP_DEAD_LETTERED_OFFSET 200
#define GROUP_RELEASED_OFFSET 208
#define GROUP_REJECTED_OFFSET 216
#define GROUP_HINT_OFFSET 224
#define GROUP_MEMBERS_OFFSET 256
#define GROUP_MEMBER_SIZE 64
#define GROUP_MEMBER_COUNT 128
#define GROUP_MEMBER_PID_OFFSET 0
#define GROUP_MEMBER_IN_FLIGHT_OFFSET 4
#define GROUP_MEMBER_ACKED_OFFSET 8
#define GROUP_MEMBER_TAKEN_NS_OFFSET 16
#define GROUP_MEMBER_DELIVERED_OFFSET 24
#define GROUP_ENTRIES_OFFSET 8448
#define GROUP_ENTRY_SIZE 32
#define GROUP_ENTRY_WORD_OFFSET 0
#define GROUP_ENTRY_LEASE_OFFSET 8
#define GROUP_ENTRY_POSITION_OFFSET 16
#define GROUP_ENTRY_SLOTS_OFFSET 24     /* framed bus only: _group_frames.h */

/* entry states */
#define GROUP_EMPTY 0
#define GROUP_ACQUIRED 1
#define GROUP_RELEASED 2
#define GROUP_ACKED 3
#define GROUP_DEAD 4
#define GROUP_SKIP 5

/* group_next_new */
#define GROUP_FULL (-1)       /* the window is full: g - start >= window */
#define GROUP_CORRUPT (-2)    /* entry(end) holds a word no protocol step writes there */

/* group_find_redelivery */
#define GROUP_NONE (-1)       /* nothing to redeliver */

static inline uint32_t group_tag(int64_t g, int shift) { return (uint32_t)((uint64_t)g >> shift); }

static inline int64_t group_word(uint32_t tag, int state, int deliveries, int owner) {
    return (int64_t)((uint64_t)tag | ((uint64_t)(state & 0xFF) << 32)
                     | ((uint64_t)(deliveries & 0xFF) << 40) | ((uint64_t)(owner & 0xFFFF) << 48));
}
static inline uint32_t group_word_tag(int64_t w) { return (uint32_t)((uint64_t)w & 0xFFFFFFFFu); }
static inline int group_word_state(int64_t w) { return (int)(((uint64_t)w >> 32) & 0xFF); }
static inline int group_word_deliveries(int64_t w) { return (int)(((uint64_t)w >> 40) & 0xFF); }
static inline int group_word_owner(int64_t w) { return (int)(((uint64_t)w >> 48) & 0xFFFF); }
static inline int64_t group_word_with(int64_t w, int state) {
    return group_word(group_word_tag(w), state, group_word_deliveries(w), group_word_owner(w));
}

static inline char *group_entry(char *base, int64_t g, int64_t window) {
    return base + GROUP_ENTRIES_OFFSET + (g & (window - 1)) * GROUP_ENTRY_SIZE;
}
static inline char *group_member_slot(char *base, int index) {
    return base + GROUP_MEMBERS_OFFSET + (int64_t)index * GROUP_MEMBER_SIZE;
}
static inline int64_t group_member_byte(int index) {
    return GROUP_MEMBERS_OFFSET + (int64_t)index * GROUP_MEMBER_SIZE;
}

/* The next record to acquire as new: g (>= 0) with entry(g) EMPTY(tag(g)), GROUP_FULL or
 * GROUP_CORRUPT. Helps `end` past records others took or skipped but did not yet pass. */
GROUP_UNUSED static int64_t group_next_new(char *base, int64_t window, int shift) {
    int64_t g, s, w;
    for (;;) {
        g = load_acquire_i64(base + GROUP_END_OFFSET);
        s = load_acquire_i64(base + GROUP_START_OFFSET);
        if (g - s >= window) return GROUP_FULL;
        w = load_acquire_i64(group_entry(base, g, window));
        if (w == group_word(group_tag(g, shift), GROUP_EMPTY, 0, 0)) return g;
        if (group_word_tag(w) == group_tag(g, shift)) {
            cas_i64(base + GROUP_END_OFFSET, g, g + 1);     /* taken or skipped: help */
            continue;
        }
        if (load_acquire_i64(base + GROUP_END_OFFSET) == g) return GROUP_CORRUPT;
    }
}

/* Take record g (its bus slot is committed) as `owner`: the acquired word, or 0 if another
 * member took it first. Either way `end` is past g afterwards. */
GROUP_UNUSED static int64_t group_take_new(char *base, int64_t window, int shift, int64_t g,
                                           int owner, int64_t lease_deadline, int64_t position) {
    char *e = group_entry(base, g, window);
    uint32_t tag = group_tag(g, shift);
    int64_t want = group_word(tag, GROUP_ACQUIRED, 1, owner);
    int64_t old;
    store_release_i64(e + GROUP_ENTRY_LEASE_OFFSET, lease_deadline);
    store_release_i64(e + GROUP_ENTRY_POSITION_OFFSET, position);
    old = cas_i64(e + GROUP_ENTRY_WORD_OFFSET, group_word(tag, GROUP_EMPTY, 0, 0), want);
    cas_i64(base + GROUP_END_OFFSET, g, g + 1);
    return old == group_word(tag, GROUP_EMPTY, 0, 0) ? want : 0;
}

/* Record g's bus slot was rolled back: no member gets it. */
GROUP_UNUSED static void group_skip(char *base, int64_t window, int shift, int64_t g) {
    uint32_t tag = group_tag(g, shift);
    cas_i64(group_entry(base, g, window) + GROUP_ENTRY_WORD_OFFSET,
            group_word(tag, GROUP_EMPTY, 0, 0), group_word(tag, GROUP_SKIP, 0, 0));
    cas_i64(base + GROUP_END_OFFSET, g, g + 1);
}

/* Move `start` over done entries (ACKED, DEAD, SKIP); returns the new start. */
GROUP_UNUSED static int64_t group_advance(char *base, int64_t window, int shift) {
    int64_t s, w;
    uint32_t tag;
    int state;
    for (;;) {
        s = load_acquire_i64(base + GROUP_START_OFFSET);
        if (s >= load_acquire_i64(base + GROUP_END_OFFSET)) return s;
        tag = group_tag(s, shift);
        w = load_acquire_i64(group_entry(base, s, window));
        state = group_word_state(w);
        if (group_word_tag(w) == tag
                && (state == GROUP_ACKED || state == GROUP_DEAD || state == GROUP_SKIP)) {
            cas_i64(group_entry(base, s, window), w, group_word(tag + 1, GROUP_EMPTY, 0, 0));
        } else if (w != group_word(tag + 1, GROUP_EMPTY, 0, 0)) {
            return s;                                       /* not done yet */
        }
        cas_i64(base + GROUP_START_OFFSET, s, s + 1);       /* reset (by us or another): pass */
    }
}

/* ack / release / reject: CAS from the exact acquired word to ACKED / RELEASED / DEAD.
 * 1 if this member's delivery was still current, else 0 (taken away, or already done). */
GROUP_UNUSED static int group_finish(char *base, int64_t window, int64_t g, int64_t acquired,
                                     int state) {
    char *e = group_entry(base, g, window);
    if (cas_i64(e + GROUP_ENTRY_WORD_OFFSET, acquired, group_word_with(acquired, state)) != acquired)
        return 0;
    if (state == GROUP_RELEASED) {
        fetch_add_i64(base + GROUP_RELEASED_OFFSET, 1);
        fetch_add_i64(base + GROUP_HINT_OFFSET, 1);
    }
    return 1;
}

/* Redeliver record g, seen as word `seen`, to `owner`: the new word, or 0 if it changed. */
GROUP_UNUSED static int64_t group_redeliver(char *base, int64_t window, int64_t g, int64_t seen,
                                            int owner, int64_t lease_deadline) {
    char *e = group_entry(base, g, window);
    int64_t want = group_word(group_word_tag(seen), GROUP_ACQUIRED,
                              group_word_deliveries(seen) + 1, owner);
    store_release_i64(e + GROUP_ENTRY_LEASE_OFFSET, lease_deadline);
    if (cas_i64(e + GROUP_ENTRY_WORD_OFFSET, seen, want) != seen) return 0;
    fetch_add_i64(base + GROUP_REDELIVERED_OFFSET, 1);
    return want;
}

/* Whether an entry word `w` for record g (with lease deadline `lease`) may be taken from its
 * holder now: RELEASED, or ACQUIRED by another member past its lease or whose liveness byte
 * nobody holds. `probed` caches one probe per member slot per scan (0 not asked, 1 alive,
 * 2 dead); `live_fd` is the caller's own description (its own slot is never probed). */
static inline int group_takeable(int64_t w, int64_t lease, int64_t now, int me, int live_fd,
                                 signed char *probed) {
    int state = group_word_state(w), owner, r;
    if (state == GROUP_RELEASED) return 1;
    if (state != GROUP_ACQUIRED) return 0;
    if (now - lease > 0) return 1;
    owner = group_word_owner(w);
    if (owner == me || owner >= GROUP_MEMBER_COUNT) return 0;
    if (probed[owner] == 0) {
        r = live_probe(live_fd, group_member_byte(owner));
        probed[owner] = r == LIVE_DEAD ? 2 : 1;             /* LIVE_ERROR: treated as alive */
    }
    return probed[owner] == 2;
}

/* The first record in [start, end) another member may take now (see group_takeable): its g,
 * with its word in *seen, or GROUP_NONE. */
GROUP_UNUSED static int64_t group_find_redelivery(char *base, int64_t window, int shift,
                                                  int64_t now, int me, int live_fd,
                                                  int64_t *seen) {
    signed char probed[GROUP_MEMBER_COUNT];
    int64_t g, s, end, w, lease;
    char *e;
    memset(probed, 0, sizeof probed);
    s = load_acquire_i64(base + GROUP_START_OFFSET);
    end = load_acquire_i64(base + GROUP_END_OFFSET);
    if (end - s > window) end = s + window;
    for (g = s; g < end; g++) {
        e = group_entry(base, g, window);
        w = load_acquire_i64(e + GROUP_ENTRY_WORD_OFFSET);
        if (group_word_tag(w) != group_tag(g, shift)) continue;
        lease = load_acquire_i64(e + GROUP_ENTRY_LEASE_OFFSET);
        if (group_takeable(w, lease, now, me, live_fd, probed)) {
            *seen = w;
            return g;
        }
    }
    return GROUP_NONE;
}

/* A member slot taken over (its last holder is dead): release every record it still holds,
 * before its new holder acquires anything under the same owner number. Returns how many. */
GROUP_UNUSED static int64_t group_release_owner(char *base, int64_t window, int shift, int owner) {
    int64_t g, s, end, w, n = 0;
    char *e;
    s = load_acquire_i64(base + GROUP_START_OFFSET);
    end = load_acquire_i64(base + GROUP_END_OFFSET);
    if (end - s > window) end = s + window;
    for (g = s; g < end; g++) {
        e = group_entry(base, g, window);
        w = load_acquire_i64(e + GROUP_ENTRY_WORD_OFFSET);
        if (group_word_tag(w) == group_tag(g, shift) && group_word_state(w) == GROUP_ACQUIRED
                && group_word_owner(w) == owner
                && cas_i64(e + GROUP_ENTRY_WORD_OFFSET, w, group_word_with(w, GROUP_RELEASED)) == w)
            n++;
    }
    if (n) {
        fetch_add_i64(base + GROUP_RELEASED_OFFSET, n);
        fetch_add_i64(base + GROUP_HINT_OFFSET, 1);
    }
    return n;
}

#endif
