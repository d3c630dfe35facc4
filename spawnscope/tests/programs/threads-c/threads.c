/*
 * threads: N POSIX threads, each touching TOUCH pages of its own stack, all held together for
 * HOLD seconds, then joined. A command for spawnscope's tests (run -- ./threads N HOLD): its
 * threads are its tasks, its memory a known shape (a few pages of stack each), and it knows
 * nothing of spawnscope. C and libc only.
 *
 *   threads N HOLD [TOUCH]    N threads (1..1000000), HOLD seconds (0..3600, may be fractional),
 *                             TOUCH stack pages each (default 4)
 *
 * Prints "all N holding" once every thread has touched its pages (a line --peak-when can match),
 * and "released" when the hold ends. Bad arguments: one line on stderr, exit 2. A thread that
 * cannot be created: one line naming how many were, exit 1.
 */
#include <alloca.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t started;
static pthread_barrier_t released;
static long page_size;
static long touch_pages = 4;

static void *task(void *arg) {
    (void)arg;
    /* Below this frame: TOUCH pages written one byte a page, so each is faulted in. */
    volatile char *pages = alloca((size_t)(touch_pages * page_size));
    for (long i = 0; i < touch_pages; i++)
        pages[i * page_size] = (char)i;
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&released);
    return NULL;
}

static int usage(const char *why) {
    fprintf(stderr, "threads: %s (usage: threads N HOLD_SECONDS [TOUCH_PAGES])\n", why);
    return 2;
}

static int parse_long(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *text == '\0' || *end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv) {
    long n;
    if (argc < 3 || argc > 4)
        return usage("two or three arguments");
    if (!parse_long(argv[1], 1, 1000000, &n))
        return usage("N must be a whole number from 1 to 1000000");
    char *end;
    errno = 0;
    double hold = strtod(argv[2], &end);
    if (errno || *argv[2] == '\0' || *end != '\0' || !(hold >= 0 && hold <= 3600))
        return usage("HOLD_SECONDS must be a number from 0 to 3600");
    if (argc == 4 && !parse_long(argv[3], 0, 1024, &touch_pages))
        return usage("TOUCH_PAGES must be a whole number from 0 to 1024");
    page_size = sysconf(_SC_PAGESIZE);

    pthread_t *ids = calloc((size_t)n, sizeof *ids);
    if (!ids) {
        fprintf(stderr, "threads: no memory for %ld thread ids\n", n);
        return 1;
    }
    pthread_barrier_init(&started, NULL, (unsigned)n + 1);
    pthread_barrier_init(&released, NULL, (unsigned)n + 1);
    for (long i = 0; i < n; i++) {
        int err = pthread_create(&ids[i], NULL, task, NULL);
        if (err) {
            fprintf(stderr, "threads: thread %ld of %ld not created: %s\n", i + 1, n, strerror(err));
            _exit(1); /* the threads created wait at a barrier that will never fill */
        }
    }
    pthread_barrier_wait(&started);
    printf("all %ld holding\n", n);
    fflush(stdout);
    struct timespec t = {(time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9)};
    while (nanosleep(&t, &t) == -1 && errno == EINTR)
        ;
    pthread_barrier_wait(&released);
    for (long i = 0; i < n; i++)
        pthread_join(ids[i], NULL);
    printf("released\n");
    free(ids);
    return 0;
}
