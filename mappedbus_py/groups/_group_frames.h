/* Work groups on a framed bus (docs/groups.md, "Framed buses"; frames: docs/design/frames.md).
 * The group protocol of _group.h with one change: a message of n slots is one unit. Its first
 * slot's entry is taken (or skipped) as a record's is, and `end` and `start` then move by n,
 * never stopping at a continuation slot (whose bytes are payload, never a slot header):
 *
 *   entry(g).slots = tag(g) << 32 | n   stored before the CAS that takes or skips g
 *   end:   CAS g -> g + n   by the taker / skipper, or anyone seeing entry(end) taken
 *   start: entry(s) done -> reset to EMPTY(tag(s) + 1), then CAS s -> s + n
 *
 * The entries of continuation slots are never touched, so an entry may still hold an EMPTY
 * word of an older lap when `end` reaches it: EMPTY with a tag <= tag(g) counts as EMPTY
 * (an entry's tags only grow, and `end` leaves g only after entry(g) changed, so a stale
 * word is never taken twice). A member acquires only g < start + window, so the messages in
 * [start, end) have distinct entries and _group.h's scans (redelivery, release of a dead
 * owner) work unchanged: continuation slots' entries never carry their g's tag in a
 * non-EMPTY state.
 *
 * A slots field whose tag is not g's (overwritten by a member that lost an older lap's race
 * long ago) is not trusted: GROUP_ASK tells the caller to read n from the bus (the first
 * slot's frame meta, final once its status left 0) and pass it with group_f_pass_*. */
#ifndef MAPPEDBUS_GROUP_FRAMES_H
#define MAPPEDBUS_GROUP_FRAMES_H

#include "_group.h"

#define GROUP_ASK (-3)        /* the slot count of record *ask is to be read from the bus */

static inline int64_t group_slots_word(uint32_t tag, int64_t n) {
    return (int64_t)(((uint64_t)tag << 32) | (uint64_t)(uint32_t)n);
}

/* The slot count stored for record g, or 0 if the field is not g's. */
static inline int64_t group_f_slots(char *base, int64_t window, int shift, int64_t g) {
    int64_t v = load_acquire_i64(group_entry(base, g, window) + GROUP_ENTRY_SLOTS_OFFSET);
    int64_t n = (int64_t)(uint32_t)((uint64_t)v & 0xFFFFFFFFu);
    if ((uint32_t)((uint64_t)v >> 32) != group_tag(g, shift) || n < 1) return 0;
    return n;
}

static inline void group_f_pass_end(char *base, int64_t g, int64_t n) {
    cas_i64(base + GROUP_END_OFFSET, g, g + n);
}

static inline void group_f_pass_start(char *base, int64_t s, int64_t n) {
    cas_i64(base + GROUP_START_OFFSET, s, s + n);
}

/* The next message's first slot to acquire as new: g (>= 0) with its EMPTY word in *seen,
 * GROUP_FULL, GROUP_CORRUPT, or GROUP_ASK (entry(end) is taken; *ask = end). */
GROUP_UNUSED static int64_t group_f_next_new(char *base, int64_t window, int shift,
                                             int64_t *seen, int64_t *ask) {
    int64_t g, s, w, n;
    uint32_t tag;
    for (;;) {
        g = load_acquire_i64(base + GROUP_END_OFFSET);
        s = load_acquire_i64(base + GROUP_START_OFFSET);
        if (g - s >= window) return GROUP_FULL;
        tag = group_tag(g, shift);
        w = load_acquire_i64(group_entry(base, g, window));
        if (group_word_state(w) == GROUP_EMPTY && group_word_deliveries(w) == 0
                && group_word_owner(w) == 0 && group_word_tag(w) <= tag) {
            *seen = w;
            return g;
        }
        if (group_word_tag(w) == tag) {                   /* taken or skipped: help */
            n = group_f_slots(base, window, shift, g);
            if (n == 0) {
                if (load_acquire_i64(base + GROUP_END_OFFSET) != g) continue;
                *ask = g;
                return GROUP_ASK;
            }
            group_f_pass_end(base, g, n);
            continue;
        }
        if (load_acquire_i64(base + GROUP_END_OFFSET) == g) return GROUP_CORRUPT;
    }
}

/* Take message g of n slots (committed on the bus), its entry seen as `seen`: the acquired
 * word, or 0 if another member took it first. Either way `end` is past it afterwards (or
 * GROUP_ASK-able by the next call). */
GROUP_UNUSED static int64_t group_f_take_new(char *base, int64_t window, int shift, int64_t g,
                                             int64_t seen, int64_t n, int owner,
                                             int64_t lease_deadline, int64_t position) {
    char *e = group_entry(base, g, window);
    uint32_t tag = group_tag(g, shift);
    int64_t want = group_word(tag, GROUP_ACQUIRED, 1, owner);
    int64_t old;
    store_release_i64(e + GROUP_ENTRY_LEASE_OFFSET, lease_deadline);
    store_release_i64(e + GROUP_ENTRY_POSITION_OFFSET, position);
    store_release_i64(e + GROUP_ENTRY_SLOTS_OFFSET, group_slots_word(tag, n));
    old = cas_i64(e + GROUP_ENTRY_WORD_OFFSET, seen, want);
    if (old == seen) {
        group_f_pass_end(base, g, n);
        return want;
    }
    return 0;
}

/* Message g (n slots) was rolled back (its writer died, or a timeout gave it up) or is of a
 * topic the group does not read: no member gets it. */
GROUP_UNUSED static void group_f_skip(char *base, int64_t window, int shift, int64_t g,
                                      int64_t seen, int64_t n) {
    char *e = group_entry(base, g, window);
    uint32_t tag = group_tag(g, shift);
    store_release_i64(e + GROUP_ENTRY_SLOTS_OFFSET, group_slots_word(tag, n));
    if (cas_i64(e + GROUP_ENTRY_WORD_OFFSET, seen, group_word(tag, GROUP_SKIP, 0, 0)) == seen)
        group_f_pass_end(base, g, n);
}

/* Move `start` over done messages: the new start, or GROUP_ASK (*ask = start) when the slot
 * count of the done message at start is to be read from the bus. */
GROUP_UNUSED static int64_t group_f_advance(char *base, int64_t window, int shift,
                                            int64_t *ask) {
    int64_t s, w, n;
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
        n = group_f_slots(base, window, shift, s);
        if (n == 0) {
            if (load_acquire_i64(base + GROUP_START_OFFSET) != s) continue;
            *ask = s;
            return GROUP_ASK;
        }
        group_f_pass_start(base, s, n);                     /* reset (by us or another): pass */
    }
}

#endif
