/* The system calls the JDK lacks: those of the wake file's protocol, and posix_fallocate and madvise for a
 * rolling writer's next segment (io.mappedbuspy.internal.DiskSpace). The Java port (io.mappedbuspy.internal.WakeFile) runs
 * the protocol of mappedbus_py/_core/_wake.h itself, in Java: every load, store and read-modify-write of the
 * mapped file goes through the JVM's Unsafe, whose fault on a page past the end of a file truncated
 * under the mapping is an InternalError. Nothing here reads or writes the mapping (but the work groups'
 * calls at the end, whose caller checks the file's length first: see there): a fault in native
 * code would be a SIGBUS that ends the JVM. The futex calls take the word's address, and on a page
 * that is gone the kernel returns EFAULT instead of faulting.
 *
 * Built by interop/build_native.sh into build/jvm/libmappedbuswake.so. No call holds a lock or a JNI
 * resource: the futex wait is a plain blocking system call, made in the thread's native state, so
 * the JVM's safepoints and garbage collections go on while a reader sleeps in it.
 */
#include <stdint.h>
#include <stdlib.h>

#if defined(__has_include)
#if __has_include(<jni.h>)
#include <jni.h>
#define MAPPEDBUS_HAVE_JNI_H 1
#endif
#endif
#ifndef MAPPEDBUS_HAVE_JNI_H
/* No JDK headers (a build image with gcc but no JDK): the few JNI types used here, as jni.h
 * defines them on Linux. A JNIEnv * and a jclass are pointers either way. */
typedef int32_t jint;
typedef int64_t jlong;
typedef void *jclass;
typedef void JNIEnv;
#define JNIEXPORT __attribute__((visibility("default")))
#define JNICALL
#endif

#include "_wake.h"
#include "_liveness.h"

#define BASE(w) ((char *)(intptr_t)(w))

/* FUTEX_WAIT on the futex word of the file mapped at w while it holds v, at most ns: wake_wait_raw.
 * WakeFile checks `armed` first (wake_wait). */
JNIEXPORT void JNICALL Java_io_mappedbuspy_internal_WakeFile_nFutexWait(JNIEnv *env, jclass cls, jlong w, jint v,
                                                               jlong ns) {
    (void)env; (void)cls;
    wake_wait_raw(BASE(w), (uint32_t)v, ns);
}

/* FUTEX_WAKE of every waiter on the futex word of the file mapped at w (the system call of wake_bump;
 * WakeFile moves the word first): how many the kernel woke, 0 on an error. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_WakeFile_nFutexWake(JNIEnv *env, jclass cls, jlong w) {
    (void)env; (void)cls;
    long n = syscall(SYS_futex, (uint32_t *)(BASE(w) + WAKE_SEQ_OFFSET), FUTEX_WAKE, INT_MAX,
                     NULL, NULL, 0);
    return n < 0 ? 0 : (jint)n;
}

/* posix_fallocate of bytes [from, from + len) of the file open as fd (DiskSpace.preallocate: Java has no
 * fallocate; the descriptor is a FileChannel's): 0, or the error number. Nothing here touches a mapping. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_DiskSpace_nFallocate(JNIEnv *env, jclass cls, jint fd, jlong from,
                                                                jlong len) {
    (void)env; (void)cls;
    return posix_fallocate(fd, (off_t)from, (off_t)len);
}

#include <sys/mman.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* madvise(MADV_POPULATE_WRITE, or with write false MADV_POPULATE_READ) of [address, address + len) of a
 * mapping the caller holds (DiskSpace.populate: a writer mapping the pages ahead of its records): 0, or the
 * error number. The kernel maps the pages without touching them from here; on a page past the end of a
 * truncated file it fails with EFAULT rather than raising SIGBUS, and an old kernel says EINVAL. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_DiskSpace_nPopulate(JNIEnv *env, jclass cls, jlong address, jlong len,
                                                               jboolean write) {
    (void)env; (void)cls;
    int advice = write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
    return madvise((void *)(intptr_t)address, (size_t)len, advice) == 0 ? 0 : errno;
}

/* The header's constants as compiled, in the order WakeFile.nativeConstants() documents, so a
 * test checks Layout.java, whose offsets the Java protocol uses, against the _wake.h the Python side
 * runs and the futex calls above take WAKE_SEQ_OFFSET from (as _wake.pyx's C_CONSTANTS does for
 * Python). */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_WakeFile_nConstant(JNIEnv *env, jclass cls, jint i) {
    (void)env; (void)cls;
    static const jlong c[] = {
        WAKE_FILE_SIZE, WAKE_MAGIC, WAKE_VERSION, WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET,
        WAKE_PARKED_OFFSET, WAKE_SEQ_OFFSET, WAKE_SLOTS_OFFSET, WAKE_SLOT_SIZE, WAKE_SLOT_COUNT,
        WAKE_SLOT_PID_OFFSET, WAKE_SLOT_STATE_OFFSET, WAKE_SLOT_START_OFFSET, WAKE_STATE_IDLE,
        WAKE_STATE_PARKED, WAKE_FUTILE_RECLAIM, WAKE_PIN_NS, WAKE_ARMED_OFFSET,
    };
    return i >= 0 && i < (jint)(sizeof c / sizeof c[0]) ? c[i] : -1;
}

/* Liveness (mappedbus_py/_core/_liveness.h; docs/design/side-files.md): an OFD write lock on one byte of a side
 * file, through the descriptor of a FileChannel the holder opened itself (UnsafeAccess.descriptor). Each
 * returns _liveness.h's codes: LIVE_TAKEN/LIVE_BUSY, LIVE_DEAD/LIVE_ALIVE, or LIVE_ERROR. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_Liveness_nHold(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_hold(fd, byte);
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_Liveness_nRelease(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_release(fd, byte);
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_internal_Liveness_nProbe(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_probe(fd, byte);
}

/* Work groups (mappedbus_py/groups/_group.h; docs/groups.md, "Java members"): io.mappedbuspy.internal.GroupProtocol
 * runs the protocol through these, so that Python and Java members share one implementation of it. Unlike
 * the functions above, these read and write the group file's mapping from native code: `b` is the address
 * of a mapping of the whole group file (GroupReader's MemoryMappedFile, `size` bytes). Each first checks the
 * file's length (fstat of `fd`, the member's own descriptor of the group file) and returns GROUP_TRUNCATED
 * without touching the mapping if it is shorter than the mapping (or fstat fails): GroupProtocol turns that
 * into a BusTruncatedException. A truncation between that check and the call's few loads and CASes (well
 * under a microsecond) is the one residual risk: a SIGBUS ending the JVM. The library never truncates a
 * group file; only another program can. (Checked here rather than in Java: FileChannel.size() costs a
 * microsecond, several times a member's work per record, and a check here leaves the shortest window.) */
#include <string.h>
#include <sys/stat.h>
#include "groups/_group.h"

#define GROUP_TRUNCATED (-3)  /* the group file is shorter than its mapping: nothing was touched */

static int group_file_short(jint fd, jlong size) {
    struct stat st;
    return fstat(fd, &st) != 0 || st.st_size < size;
}

#define GROUP_CHECK(fd, size) do { if (group_file_short(fd, size)) return GROUP_TRUNCATED; } while (0)

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nNextNew(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                   jlong size, jlong window, jint shift) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_next_new(BASE(b), window, shift);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nTakeNew(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                   jlong size, jlong window, jint shift, jlong g,
                                                                   jint owner, jlong lease, jlong position) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_take_new(BASE(b), window, shift, g, owner, lease, position);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nSkip(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                jlong size, jlong window, jint shift, jlong g) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    group_skip(BASE(b), window, shift, g);
    return 0;
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nAdvance(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                   jlong size, jlong window, jint shift) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_advance(BASE(b), window, shift);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFinish(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                  jlong size, jlong window, jlong g, jlong acquired,
                                                                  jint state) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_finish(BASE(b), window, g, acquired, state);
}

/* An ack: group_finish to ACKED, then (if it was still this delivery) group_advance, under one length check:
 * 1 or 0 as group_finish. */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nAck(JNIEnv *env, jclass cls, jlong b, jint fd, jlong size,
                                                               jlong window, jint shift, jlong g, jlong acquired) {
    int ok;
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    ok = group_finish(BASE(b), window, g, acquired, GROUP_ACKED);
    if (ok)
        group_advance(BASE(b), window, shift);
    return ok;
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nRedeliver(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                     jlong size, jlong window, jlong g, jlong seen,
                                                                     jint owner, jlong lease) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_redeliver(BASE(b), window, g, seen, owner, lease);
}

/* group_find_redelivery: g, or GROUP_NONE; the word seen is stored at `seen`, an 8-byte native buffer of
 * the caller's (GroupProtocol's, not the mapping). `fd` is also the descriptor other members are probed
 * through (the member's own: its own lock never conflicts with itself). */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFindRedelivery(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                          jlong size, jlong window, jint shift,
                                                                          jlong now, jint me, jlong seen) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_find_redelivery(BASE(b), window, shift, now, me, fd, (int64_t *)(intptr_t)seen);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nReleaseOwner(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                        jlong size, jlong window, jint shift,
                                                                        jint owner) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_release_owner(BASE(b), window, shift, owner);
}

/* Work groups on a framed bus (mappedbus_py/groups/_group_frames.h; docs/groups.md, "Framed buses"): a message's
 * first slot is the unit, `end` and `start` move by its slot count. `seen` and `ask` are 8-byte native buffers of
 * the caller's (GroupProtocol's), as group_find_redelivery's `seen`. */
#include "groups/_group_frames.h"

/* GROUP_ASK as these calls answer it: GROUP_ASK is GROUP_TRUNCATED's -3 */
#define GROUP_ASKED (-4)

static jlong group_asked(int64_t r) { return r == GROUP_ASK ? GROUP_ASKED : r; }

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFNextNew(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                    jlong size, jlong window, jint shift, jlong seen,
                                                                    jlong ask) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_asked(group_f_next_new(BASE(b), window, shift, (int64_t *)(intptr_t)seen, (int64_t *)(intptr_t)ask));
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFTakeNew(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                    jlong size, jlong window, jint shift, jlong g,
                                                                    jlong seen, jlong n, jint owner, jlong lease,
                                                                    jlong position) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_f_take_new(BASE(b), window, shift, g, seen, n, owner, lease, position);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFSkip(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                 jlong size, jlong window, jint shift, jlong g,
                                                                 jlong seen, jlong n) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    group_f_skip(BASE(b), window, shift, g, seen, n);
    return 0;
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFAdvance(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                    jlong size, jlong window, jint shift, jlong ask) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    return group_asked(group_f_advance(BASE(b), window, shift, (int64_t *)(intptr_t)ask));
}

/* group_f_pass_end (which 0) or group_f_pass_start (which 1): a slot count read from the bus after GROUP_ASK. */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFPass(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                 jlong size, jint which, jlong g, jlong n) {
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    if (which == 0)
        group_f_pass_end(BASE(b), g, n);
    else
        group_f_pass_start(BASE(b), g, n);
    return 0;
}

/* An ack on a framed bus: group_finish to ACKED, then (if it was still this delivery) group_f_advance, under one
 * length check: 1 or 0 as group_finish, or GROUP_ASKED when it was acked and `start` waits on a slot count to read
 * from the bus (*ask). */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nFAck(JNIEnv *env, jclass cls, jlong b, jint fd,
                                                                jlong size, jlong window, jint shift, jlong g,
                                                                jlong acquired, jlong ask) {
    int ok;
    (void)env; (void)cls;
    GROUP_CHECK(fd, size);
    ok = group_finish(BASE(b), window, g, acquired, GROUP_ACKED);
    if (ok && group_f_advance(BASE(b), window, shift, (int64_t *)(intptr_t)ask) == GROUP_ASK)
        return GROUP_ASKED;
    return ok;
}

/* _group.h's constants as compiled, in the order GroupProtocol.expectedConstants() lists them. */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_internal_GroupProtocol_nConstant(JNIEnv *env, jclass cls, jint i) {
    (void)env; (void)cls;
    static const jlong c[] = {
        GROUP_START_OFFSET, GROUP_END_OFFSET, GROUP_HINT_OFFSET, GROUP_MEMBERS_OFFSET, GROUP_MEMBER_SIZE,
        GROUP_MEMBER_COUNT, GROUP_ENTRIES_OFFSET, GROUP_ENTRY_SIZE, GROUP_ACQUIRED, GROUP_RELEASED, GROUP_ACKED,
        GROUP_DEAD, GROUP_SKIP, GROUP_FULL, GROUP_CORRUPT, GROUP_NONE, GROUP_TRUNCATED,
        GROUP_ENTRY_SLOTS_OFFSET, GROUP_ASKED,
    };
    return i >= 0 && i < (jint)(sizeof c / sizeof c[0]) ? c[i] : -1;
}
