/* The commits' clock (see CONSUMERS_CLOCK_NS in _consumers.h): one thread per process,
 * running while at least one reader of the process holds a consumer. Included by
 * _consumers.pyx only: the other modules reach the clock through a pointer to it. */
#ifndef MAPPEDBUS_CONSUMERS_CLOCK_H
#define MAPPEDBUS_CONSUMERS_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "_atomic.h"
#include "_consumers.h"

static int64_t consumers_clock_now;          /* Unix ns, refreshed by the thread */
static int consumers_clock_users;            /* holders in this process */
static int consumers_clock_running;          /* the thread exists */
static pthread_mutex_t consumers_clock_mutex = PTHREAD_MUTEX_INITIALIZER;

static void *consumers_clock_loop(void *arg) {
    struct timespec pause = {0, CONSUMERS_CLOCK_NS};
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&consumers_clock_mutex);
        if (consumers_clock_users == 0) {
            consumers_clock_running = 0;
            pthread_mutex_unlock(&consumers_clock_mutex);
            return NULL;
        }
        pthread_mutex_unlock(&consumers_clock_mutex);
        store_release_i64(&consumers_clock_now, consumers_realtime_ns());
        nanosleep(&pause, NULL);
    }
}

/* A holder more: the clock is set now, and kept by a thread until the last one lets go.
 * 0, or an errno if the thread could not start (the clock is then set at each hold only). */
static int consumers_clock_hold(void) {
    int rc = 0;
    pthread_mutex_lock(&consumers_clock_mutex);
    consumers_clock_users++;
    store_release_i64(&consumers_clock_now, consumers_realtime_ns());
    if (!consumers_clock_running) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &a, consumers_clock_loop, NULL);
        pthread_attr_destroy(&a);
        if (rc == 0) consumers_clock_running = 1;
    }
    pthread_mutex_unlock(&consumers_clock_mutex);
    return rc;
}

static void consumers_clock_let_go(void) {
    pthread_mutex_lock(&consumers_clock_mutex);
    if (consumers_clock_users > 0) consumers_clock_users--;
    pthread_mutex_unlock(&consumers_clock_mutex);
}

/* In a forked child: no thread, no holders (the parent's holds are not the child's). */
static void consumers_clock_after_fork(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    consumers_clock_mutex = fresh;
    consumers_clock_users = 0;
    consumers_clock_running = 0;
}

#endif
