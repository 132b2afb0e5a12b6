/* The system calls the JDK lacks: those of the wake file's protocol, and posix_fallocate and madvise for a
 * rolling writer's next segment (io.mappedbuspy.DiskSpace). The Java port (io.mappedbuspy.WakeFile) runs
 * the protocol of mappedbus_py/_core/_wake.h itself, in Java: every load, store and read-modify-write of the
 * mapped file goes through the JVM's Unsafe, whose fault on a page past the end of a file truncated
 * under the mapping is an InternalError. Nothing here reads or writes the mapping: a fault in native
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
JNIEXPORT void JNICALL Java_io_mappedbuspy_WakeFile_nFutexWait(JNIEnv *env, jclass cls, jlong w, jint v,
                                                               jlong ns) {
    (void)env; (void)cls;
    wake_wait_raw(BASE(w), (uint32_t)v, ns);
}

/* FUTEX_WAKE of every waiter on the futex word of the file mapped at w (the system call of wake_bump;
 * WakeFile moves the word first): how many the kernel woke, 0 on an error. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nFutexWake(JNIEnv *env, jclass cls, jlong w) {
    (void)env; (void)cls;
    long n = syscall(SYS_futex, (uint32_t *)(BASE(w) + WAKE_SEQ_OFFSET), FUTEX_WAKE, INT_MAX,
                     NULL, NULL, 0);
    return n < 0 ? 0 : (jint)n;
}

/* posix_fallocate of bytes [from, from + len) of the file open as fd (DiskSpace.preallocate: Java has no
 * fallocate; the descriptor is a FileChannel's): 0, or the error number. Nothing here touches a mapping. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_DiskSpace_nFallocate(JNIEnv *env, jclass cls, jint fd, jlong from,
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
JNIEXPORT jint JNICALL Java_io_mappedbuspy_DiskSpace_nPopulate(JNIEnv *env, jclass cls, jlong address, jlong len,
                                                               jboolean write) {
    (void)env; (void)cls;
    int advice = write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
    return madvise((void *)(intptr_t)address, (size_t)len, advice) == 0 ? 0 : errno;
}

/* The header's constants as compiled, in the order WakeFile.nativeConstants() documents, so a
 * test checks Layout.java, whose offsets the Java protocol uses, against the _wake.h the Python side
 * runs and the futex calls above take WAKE_SEQ_OFFSET from (as _wake.pyx's C_CONSTANTS does for
 * Python). */
JNIEXPORT jlong JNICALL Java_io_mappedbuspy_WakeFile_nConstant(JNIEnv *env, jclass cls, jint i) {
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
JNIEXPORT jint JNICALL Java_io_mappedbuspy_Liveness_nHold(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_hold(fd, byte);
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_Liveness_nRelease(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_release(fd, byte);
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_Liveness_nProbe(JNIEnv *env, jclass cls, jint fd, jlong byte) {
    (void)env; (void)cls;
    return live_probe(fd, byte);
}
