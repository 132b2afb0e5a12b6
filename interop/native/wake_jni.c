/* The JNI face of _wake.h for the Java port (io.mappedbuspy.WakeFile): one function per call of
 * the protocol, each taking the address of the mapped wake file (MemoryMappedFile's mapping of
 * PATH.wake or DIR/bus.wake). The protocol itself is written once, in mappedbus_py/_wake.h.
 *
 * Built by interop/build_native.sh into build/jvm/libmappedbuswake.so. No call holds a lock or
 * a JNI resource: wake_wait is a plain blocking futex call, made in the thread's native state,
 * so the JVM's safepoints and garbage collections go on while a reader sleeps in it.
 */
#include <stdint.h>
#include <stdlib.h>     /* strtoll, used by _wake.h */

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

#define BASE(w) ((char *)(intptr_t)(w))

JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nInit(JNIEnv *env, jclass cls, jlong w) {
    (void)env; (void)cls;
    return wake_init(BASE(w));
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nClaim(JNIEnv *env, jclass cls, jlong w, jint pid,
                                                           jlong start) {
    (void)env; (void)cls;
    return wake_claim(BASE(w), pid, start);
}

JNIEXPORT void JNICALL Java_io_mappedbuspy_WakeFile_nRelease(JNIEnv *env, jclass cls, jlong w, jint slot,
                                                             jint pid) {
    (void)env; (void)cls;
    wake_release(BASE(w), slot, pid);
}

/* The seq value to wait on, as a Java int (the same 32 bits). */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nPrepare(JNIEnv *env, jclass cls, jlong w, jint slot) {
    (void)env; (void)cls;
    return (jint)wake_prepare(BASE(w), slot);
}

/* 1 if a writer woke the file meanwhile (the wake word moved), the `woken` of wake_backoff_after. */
JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nWait(JNIEnv *env, jclass cls, jlong w, jint v,
                                                          jlong ns) {
    (void)env; (void)cls;
    wake_wait(BASE(w), (uint32_t)v, ns);
    return wake_seq(BASE(w)) != (uint32_t)v;
}

JNIEXPORT void JNICALL Java_io_mappedbuspy_WakeFile_nDone(JNIEnv *env, jclass cls, jlong w, jint slot) {
    (void)env; (void)cls;
    wake_done(BASE(w), slot);
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nWakeAll(JNIEnv *env, jclass cls, jlong w) {
    (void)env; (void)cls;
    return wake_all(BASE(w));
}

JNIEXPORT jint JNICALL Java_io_mappedbuspy_WakeFile_nReclaim(JNIEnv *env, jclass cls, jlong w, jint self,
                                                             jint parkedOnly) {
    (void)env; (void)cls;
    return wake_reclaim(BASE(w), self, parkedOnly);
}

JNIEXPORT jlong JNICALL Java_io_mappedbuspy_WakeFile_nProcStart(JNIEnv *env, jclass cls, jint pid) {
    (void)env; (void)cls;
    return wake_proc_start(pid);
}

/* The header's constants as compiled, in the order WakeFile.nativeConstants() documents, so a
 * test checks Layout.java against the C the protocol runs (as _wake.pyx's C_CONSTANTS does for
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
