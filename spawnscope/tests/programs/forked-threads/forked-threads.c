/*
 * A program whose children make the threads: it forks PROCESSES children, each starts THREADS
 * pthreads that touch PAGES pages of their own stack and then all hold together for HOLD_MS, and
 * the parent waits for every child. With 1 process it is a plain threads program (the parent
 * still forks, as a launcher would). The probes must count every child's threads, faults and
 * switches as the run's (spawnscope/tests/tree.rs); the parent holds none of the tasks.
 * SHARED_MIB: memory the parent writes before it forks and the children only read, so that
 * every child shares it (copy-on-write, never copied): their RSS summed counts it once per
 * process, PSS once in all (spawnscope/tests/memory_modes.rs).
 *
 * Usage: forked-threads PROCESSES THREADS [PAGES [HOLD_MS [SHARED_MIB]]]
 * Exit: 0, or 1 with why.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define MOST_PAGES 64

static pthread_barrier_t all_started;
static long pages = 4, hold_ms = 1000, shared_mib;
static volatile char *shared;

static void *task(void *arg)
{
	volatile char frame[MOST_PAGES * PAGE];
	struct timespec hold = { hold_ms / 1000, (hold_ms % 1000) * 1000000L };

	(void)arg;
	for (long i = 0; i < pages; i++)
		frame[i * PAGE] = 1;
	pthread_barrier_wait(&all_started);
	nanosleep(&hold, NULL);
	return (void *)(long)frame[0];
}

static int child(long threads)
{
	pthread_t *ids = calloc(threads, sizeof(*ids));
	pthread_attr_t attr;
	long sum = 0;

	/* Read, never written: the pages stay the parent's, shared. */
	for (long i = 0; i < shared_mib * 256; i++)
		sum += shared[i * PAGE];
	if (sum != shared_mib * 256)
		return 1;

	if (!ids || pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, (MOST_PAGES + 16) * PAGE))
		return 1;
	if (pthread_barrier_init(&all_started, NULL, threads))
		return 1;
	for (long i = 0; i < threads; i++)
		if (pthread_create(&ids[i], &attr, task, NULL)) {
			perror("pthread_create");
			return 1;
		}
	for (long i = 0; i < threads; i++)
		pthread_join(ids[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	long processes, threads;
	int failed = 0, status;

	if (argc < 3 || (processes = atol(argv[1])) < 1 || (threads = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: forked-threads PROCESSES THREADS [PAGES [HOLD_MS [SHARED_MIB]]]\n");
		return 2;
	}
	if (argc > 3)
		pages = atol(argv[3]);
	if (argc > 4)
		hold_ms = atol(argv[4]);
	if (argc > 5)
		shared_mib = atol(argv[5]);
	if (pages < 1 || pages > MOST_PAGES || hold_ms < 0 || shared_mib < 0) {
		fprintf(stderr, "forked-threads: PAGES is 1..%d, HOLD_MS and SHARED_MIB at least 0\n",
			MOST_PAGES);
		return 2;
	}
	if (shared_mib > 0) {
		char *mem = malloc(shared_mib << 20);

		if (!mem) {
			perror("malloc");
			return 1;
		}
		for (long i = 0; i < shared_mib * 256; i++)
			mem[i * PAGE] = 1;
		shared = mem;
	}
	for (long p = 0; p < processes; p++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(child(threads));
	}
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	return failed;
}
