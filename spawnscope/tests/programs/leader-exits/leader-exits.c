/*
 * leader-exits: N POSIX threads, each touching a few pages of its own stack and then holding
 * HOLD seconds, while the main thread ends first (pthread_exit) LEAD seconds after all started.
 * A command for spawnscope's tests: from the main thread's end on, the process's status has no
 * memory lines (the leader let go of its address space) though every page is still held and
 * charged by the threads left, as while a process exits. C and libc only.
 *
 *   leader-exits N LEAD HOLD   N threads (1..100000), LEAD < HOLD seconds (fractional allowed)
 *
 * Prints "all N holding" once every thread has touched its pages. Bad arguments: one line on
 * stderr, exit 2.
 */
#include <alloca.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOUCH_PAGES 4

static pthread_barrier_t started;
static struct timespec hold;

static void sleep_for(struct timespec t) {
    while (nanosleep(&t, &t) == -1 && errno == EINTR)
        ;
}

static struct timespec seconds(double s) {
    return (struct timespec){(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
}

static void *task(void *arg) {
    long page_size = (long)arg;
    /* Below this frame: pages written one byte a page, so each is faulted in. */
    volatile char *pages = alloca((size_t)(TOUCH_PAGES * page_size));
    for (long i = 0; i < TOUCH_PAGES; i++)
        pages[i * page_size] = (char)i;
    pthread_barrier_wait(&started);
    sleep_for(hold);
    return NULL;
}

static int usage(const char *why) {
    fprintf(stderr, "leader-exits: %s (usage: leader-exits N LEAD_SECONDS HOLD_SECONDS)\n", why);
    return 2;
}

static int parse_seconds(const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *text == '\0' || *end != '\0' || !(v >= 0 && v <= 3600))
        return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4)
        return usage("three arguments");
    char *end;
    errno = 0;
    long n = strtol(argv[1], &end, 10);
    if (errno || *argv[1] == '\0' || *end != '\0' || n < 1 || n > 100000)
        return usage("N must be a whole number from 1 to 100000");
    double lead, held;
    if (!parse_seconds(argv[2], &lead) || !parse_seconds(argv[3], &held) || lead >= held)
        return usage("LEAD and HOLD must be seconds from 0 to 3600, LEAD below HOLD");
    hold = seconds(held);
    long page_size = sysconf(_SC_PAGESIZE);
    pthread_barrier_init(&started, NULL, (unsigned)n + 1);
    for (long i = 0; i < n; i++) {
        pthread_t id;
        int err = pthread_create(&id, NULL, task, (void *)page_size);
        if (err) {
            fprintf(stderr, "leader-exits: thread %ld of %ld not created: %s\n", i + 1, n,
                    strerror(err));
            _exit(1); /* the threads created wait at a barrier that will never fill */
        }
        pthread_detach(id);
    }
    pthread_barrier_wait(&started);
    printf("all %ld holding\n", n);
    fflush(stdout);
    sleep_for(seconds(lead));
    pthread_exit(NULL); /* the process lives on in its threads until the last one returns */
}
