/* Frames: messages of any size over consecutive slots (issue 36; docs/design/frames.md).
 * The layout is drawn in layout.py (FRAME_*, TOPICS_*, TOPIC_*) and mirrored in Layout.java;
 * tests/formats/test_frames_layout.py checks the three agree. Used by the Cython writer, reader
 * and work groups; the Java port implements the same steps over MappedAtomics.
 *
 *   first slot: status i32 | meta i32 = FRAME_META_FLAG | n | length i64 | topic i32 | flags i32
 *               | payload, running on over the next n - 1 slots (their header bytes included)
 *
 *   writer: pos = fetch_add(limit, n * slot); claim; frame_set_slots (CAS meta 0 -> flag|n:
 *           lost -> rolled back, write nothing more); frame_set_header; payload; CAS status 0 -> 1
 *   reader: status 1 -> frame_check, deliver, pos += n * slot; 2 -> pos += frame_skip(rec) * slot;
 *           0 and given up -> frame_roll_back (CAS meta 0 -> flag|k, then CAS status 0 -> 2)
 * Statuses of a framed bus are always 4-byte aligned (record_size % 8 == 0).
 */
#ifndef MAPPEDBUS_FRAMES_H
#define MAPPEDBUS_FRAMES_H

#include <stdint.h>
#include <string.h>

#include "_atomic.h"

#define FRAME_META_FLAG ((int32_t)0x80000000)
#define FRAME_META_COUNT_MASK 0x7FFFFFFF
#define FRAME_MAX_SLOTS 0x7FFFFFFF
#define FRAME_LENGTH_OFFSET 0        /* int64, from the first slot's payload (offset 8) */
#define FRAME_TOPIC_OFFSET 8         /* int32 */
#define FRAME_FLAGS_OFFSET 12        /* int32: bits 0..7 the encoding */
#define FRAME_HEADER_SIZE 16
#define FRAME_PAYLOAD_OFFSET 24      /* from the first slot's start */
#define FRAME_RECORD_ALIGN 8
#define FRAME_MIN_RECORD_SIZE 16
#define FRAME_TOPIC_NONE 0
#define FRAME_ENCODING_MASK 0xFF
#define FRAME_ENCODING_BYTES 0
#define FRAME_ENCODING_PICKLE 1
#define FRAME_ENCODING_SERIALIZED 2

#define TOPICS_FILE_SIZE 16384
#define TOPICS_MAGIC 0x31504F545355424DLL       /* "MBUSTOP1" little-endian */
#define TOPICS_VERSION 1
#define TOPICS_MAGIC_OFFSET 0                   /* int64 */
#define TOPICS_VERSION_OFFSET 8                 /* int32 */
#define TOPICS_COUNT_OFFSET 16                  /* int32: entries claimed (CAS c -> c + 1) */
#define TOPICS_ENTRIES_OFFSET 64
#define TOPIC_ENTRY_SIZE 64
#define TOPICS_MAX 255
#define TOPIC_LENGTH_OFFSET 0                   /* int32: 0 claimed, > 0 published (release) */
#define TOPIC_NAME_OFFSET 8
#define TOPIC_NAME_MAX 56

/* What the reader's topic filter knows of an id (one byte per id 0..TOPICS_MAX). */
#define FRAME_TOPIC_UNKNOWN 0    /* not looked up yet: the topics file is read again */
#define FRAME_TOPIC_WANTED 1
#define FRAME_TOPIC_UNWANTED 2

#define FRAMES_UNUSED __attribute__((unused))

/* Slots a message of `length` payload bytes takes. */
static inline int64_t frame_slots(int64_t length, int64_t slot) {
    return (FRAME_PAYLOAD_OFFSET + length + slot - 1) / slot;
}

/* The slot count of a first slot's meta; 0 if it is not a frame's (0: not written yet). */
static inline int64_t frame_meta_slots(int32_t meta) {
    if (meta >= 0) return 0;
    return (int64_t)(meta & FRAME_META_COUNT_MASK);
}

static inline int32_t frame_meta_load(const char *rec) {
    return load_acquire_i32(rec + 4);
}

/* Writer, right after its claim: the slot count, first of all. 0 when set; -1 when a reader
 * rolled the message back first (the writer must write nothing more into it). */
static inline int frame_set_slots(char *rec, int64_t n) {
    int32_t want = FRAME_META_FLAG | (int32_t)n;
    int32_t old = cas_i32(rec + 4, 0, want);
    return old == 0 ? 0 : -1;
}

static inline void frame_set_header(char *rec, int64_t length, int32_t topic, int32_t flags) {
    memcpy(rec + 8 + FRAME_LENGTH_OFFSET, &length, 8);
    memcpy(rec + 8 + FRAME_TOPIC_OFFSET, &topic, 4);
    memcpy(rec + 8 + FRAME_FLAGS_OFFSET, &flags, 4);
}

static inline int64_t frame_length(const char *rec) {
    int64_t n;
    memcpy(&n, rec + 8 + FRAME_LENGTH_OFFSET, 8);
    return n;
}

static inline int32_t frame_topic(const char *rec) {
    int32_t t;
    memcpy(&t, rec + 8 + FRAME_TOPIC_OFFSET, 4);
    return t;
}

static inline int32_t frame_flags(const char *rec) {
    int32_t f;
    memcpy(&f, rec + 8 + FRAME_FLAGS_OFFSET, 4);
    return f;
}

/* A committed first slot at offset `pos`: its slot count, or 0 if the frame is corrupt (no
 * flag, a count running past `file_size`, a length longer than its slots, a topic id
 * outside 0..TOPICS_MAX). */
static inline int64_t frame_check(const char *rec, int64_t pos, int64_t slot, int64_t file_size) {
    int64_t n = frame_meta_slots(frame_meta_load(rec));
    if (n < 1 || n > (file_size - pos) / slot) return 0;
    int64_t len = frame_length(rec);
    if (len < 0 || len > n * slot - FRAME_PAYLOAD_OFFSET) return 0;
    int32_t t = frame_topic(rec);
    if (t < 0 || t > TOPICS_MAX) return 0;
    return n;
}

/* A rolled-back first slot (status 2): how many slots to pass (1 when its meta carries no
 * count: a rollback of an older writer, never of this protocol's readers). */
static inline int64_t frame_skip(const char *rec) {
    int64_t n = frame_meta_slots(frame_meta_load(rec));
    return n >= 1 ? n : 1;
}

/* Give up on the uncommitted message at `rec`: its meta set by CAS 0 -> flag|k if still 0
 * (k: 1, or the dead claim's slot count capped at the file), then its status CAS 0 -> 2.
 * Returns the old status (0: rolled back now). *slots_out: the message's final slot count,
 * read after the meta is final. */
static inline int32_t frame_roll_back(char *rec, int64_t k, int64_t *slots_out) {
    if (k < 1) k = 1;
    if (k > FRAME_MAX_SLOTS) k = FRAME_MAX_SLOTS;
    cas_i32(rec + 4, 0, FRAME_META_FLAG | (int32_t)k);
    int32_t old = cas_i32(rec, 0, 2);
    *slots_out = frame_skip(rec);
    return old;
}

/* The slots of a file from offset `pos` on (`last`: the last offset a slot may start at). */
static inline int64_t frame_slots_left(int64_t pos, int64_t last, int64_t slot) {
    return pos > last ? 0 : (last - pos) / slot + 1;
}

#endif
