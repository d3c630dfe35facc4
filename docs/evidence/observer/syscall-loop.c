#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
static int word;
int main(int argc, char **argv) {
  long n = atol(argv[2]);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  if (!strcmp(argv[1], "fault")) {
    long per = 16384; /* pages a round: 64 MiB */
    for (long done = 0; done < n; done += per) {
      char *p = mmap(0, per * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      for (long i = 0; i < per; i++) p[i * 4096] = 1;
      munmap(p, per * 4096);
    }
  } else
  for (long i = 0; i < n; i++) {
    if (!strcmp(argv[1], "futex")) syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    else syscall(SYS_getppid);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%s %ld calls: %.1f ns a call\n", argv[1], n, ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
