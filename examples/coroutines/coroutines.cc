// Stackful coroutines created and switched on glibc's ucontext or Boost.Context's fcontext, as
// the libcopp article (owent, 2018) measured them: each stack mmap'd, 4 KiB-aligned, with a
// PROT_NONE guard page at its low end; create = stack + context + the first switch into it
// (where the stack's first page is faulted in) and back; switch = one resume and the yield that
// returns (two context swaps), round-robin over all N so that each finds its stack out of cache.
// --pool keeps destroyed stacks for the next coroutine (the article's stack pool): rounds after
// the first reuse them.
//
// Speaks spawnscope's workload events on stdout (one JSON object per line, "event" first:
// start, phase marks on CLOCK_MONOTONIC, peak with all N alive, result); messages on stderr;
// bad input: exit 2 and one line. Built by scripts/lib/common.sh (build_workloads) or by
// `spawnscope compare --reproduce libcopp-2018`: -DWITH_BOOST_CONTEXT -lboost_context for fcontext.
#include <errno.h>
#include <gnu/libc-version.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <string>
#include <vector>

#ifdef WITH_BOOST_CONTEXT
#include <boost/context/detail/fcontext.hpp>
#include <boost/version.hpp>
namespace ctx = boost::context::detail;
#endif

static const size_t PAGE = 4096;

static uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long minor_faults() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

[[noreturn]] static void usage_error(const std::string& why) {
  fprintf(stderr,
          "coroutines: %s; usage: coroutines ucontext|fcontext [--stack BYTES] [--pool] "
          "[--switches K] [--rounds R] N\n",
          why.c_str());
  exit(2);
}

[[noreturn]] static void die(const char* what) {
  fprintf(stderr, "coroutines: %s: %s\n", what, strerror(errno));
  exit(1);
}

// A stack: the mapping (guard page first) and its usable size.
struct Stack {
  char* base = nullptr;
  size_t size = 0;
  char* top() const { return base + PAGE + size; }
};

static std::vector<Stack> pool;
static bool pooled = false;

static Stack stack_get(size_t size) {
  if (pooled && !pool.empty()) {
    Stack s = pool.back();
    pool.pop_back();
    return s;
  }
  void* p = mmap(nullptr, size + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap");
  if (mprotect(p, PAGE, PROT_NONE) != 0) die("mprotect");
  Stack s;
  s.base = (char*)p;
  s.size = size;
  return s;
}

static void stack_put(const Stack& s) {
  if (pooled) {
    pool.push_back(s);
  } else if (munmap(s.base, s.size + PAGE) != 0) {
    die("munmap");
  }
}

// One coroutine: its stack and its suspended context (one of the two backends).
struct Co {
  Stack stack;
  ucontext_t uc;
#ifdef WITH_BOOST_CONTEXT
  ctx::fcontext_t fc = nullptr;
#endif
};

static ucontext_t main_uc;
static Co* current = nullptr;

// ucontext: the body yields back to main for ever; it is never resumed after its last yield.
static void uc_body() {
  for (;;) swapcontext(&current->uc, &main_uc);
}

#ifdef WITH_BOOST_CONTEXT
static void fc_body(ctx::transfer_t t) {
  for (;;) t = ctx::jump_fcontext(t.fctx, nullptr);
}
#endif

enum Backend { UCONTEXT, FCONTEXT };
static Backend backend;

static void resume(Co* co) {
  if (backend == UCONTEXT) {
    current = co;
    if (swapcontext(&main_uc, &co->uc) != 0) die("swapcontext");
  } else {
#ifdef WITH_BOOST_CONTEXT
    co->fc = ctx::jump_fcontext(co->fc, nullptr).fctx;
#endif
  }
}

// A coroutine on a stack, switched into once (its stack's first touch) and back.
static void create(Co* co, size_t stack_size) {
  co->stack = stack_get(stack_size);
  if (backend == UCONTEXT) {
    if (getcontext(&co->uc) != 0) die("getcontext");
    co->uc.uc_stack.ss_sp = co->stack.base + PAGE;
    co->uc.uc_stack.ss_size = co->stack.size;
    co->uc.uc_link = nullptr;
    makecontext(&co->uc, uc_body, 0);
  } else {
#ifdef WITH_BOOST_CONTEXT
    co->fc = ctx::make_fcontext(co->stack.top(), co->stack.size, fc_body);
#endif
  }
  resume(co);
}

static uint64_t parse_count(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v == 0 || text[0] == '-')
    usage_error(std::string(flag) + " '" + text + "' is not a positive whole number");
  return v;
}

// The article's stack at its three points (1: 16 KiB, 1,000: 2 MiB, 30,000: 64 KiB); 64 KiB else.
static size_t article_stack(uint64_t n) {
  if (n == 1) return 16 * 1024;
  if (n == 1000) return 2 * 1024 * 1024;
  return 64 * 1024;
}

static std::string runtime_version() {
  if (backend == UCONTEXT) return std::string("glibc ") + gnu_get_libc_version();
#ifdef WITH_BOOST_CONTEXT
  return std::string("Boost.Context ") + BOOST_LIB_VERSION;
#else
  return "";
#endif
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("coroutines 1 (ucontext: glibc %s; fcontext: %s)\n", gnu_get_libc_version(),
#ifdef WITH_BOOST_CONTEXT
           "Boost.Context " BOOST_LIB_VERSION
#else
           "not built with Boost.Context"
#endif
    );
    return 0;
  }
  if (argc < 3) usage_error("a backend and N are needed");
  std::string which = argv[1];
  if (which == "ucontext") {
    backend = UCONTEXT;
  } else if (which == "fcontext") {
#ifndef WITH_BOOST_CONTEXT
    usage_error("fcontext: built without Boost.Context (apt-get install libboost-context-dev, then build with -DWITH_BOOST_CONTEXT -lboost_context)");
#endif
    backend = FCONTEXT;
  } else {
    usage_error("unknown backend '" + which + "' (ucontext or fcontext)");
  }
  size_t stack_size = 0;
  uint64_t switches = 0, rounds = 2;
  for (int i = 2; i < argc - 1; i++) {
    std::string flag = argv[i];
    if (flag == "--pool") {
      pooled = true;
    } else if ((flag == "--stack" || flag == "--switches" || flag == "--rounds") && i + 1 < argc - 1) {
      uint64_t v = parse_count(argv[i], argv[i + 1]);
      i++;
      if (flag == "--stack") {
        if (v % PAGE != 0 || v < PAGE) usage_error("--stack must be a multiple of 4096");
        stack_size = v;
      } else if (flag == "--switches") {
        switches = v;
      } else {
        rounds = v;
      }
    } else {
      usage_error("unknown or incomplete flag '" + flag + "'");
    }
  }
  uint64_t n = parse_count("N", argv[argc - 1]);
  if (n > 10000000) usage_error("N above 10,000,000");
  if (stack_size == 0) stack_size = article_stack(n);
  // About a million switches a round, at least 3 per coroutine.
  if (switches == 0) switches = n >= 333333 ? 3 : 1000000 / n;

  const char* rt = backend == UCONTEXT ? "ucontext" : "fcontext";
  char params[256];
  snprintf(params, sizeof params,
           "{\"n\":%llu,\"stack_size\":%zu,\"pool\":%s,\"switches\":%llu,\"rounds\":%llu}",
           (unsigned long long)n, stack_size, pooled ? "true" : "false",
           (unsigned long long)switches, (unsigned long long)rounds);
  printf("{\"event\":\"start\",\"schema\":1,\"t_ns\":%llu,\"runtime\":\"%s\",\"workload\":\"coroutines\","
         "\"pid\":%d,\"program_version\":\"coroutines 1\",\"runtime_version\":\"%s\",\"params\":%s}\n",
         (unsigned long long)now_ns(), rt, (int)getpid(), runtime_version().c_str(), params);
  fflush(stdout);

  std::vector<Co> cos(n);
  double create_first = 0, create_later = 0, switch_total = 0;
  long faults_first = 0, faults_later = 0;
  for (uint64_t r = 0; r < rounds; r++) {
    printf("{\"event\":\"phase\",\"name\":\"create\",\"t_ns\":%llu}\n", (unsigned long long)now_ns());
    fflush(stdout);
    long f0 = minor_faults();
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < n; i++) create(&cos[i], stack_size);
    uint64_t t1 = now_ns();
    long faults = minor_faults() - f0;
    double per = (double)(t1 - t0) / (double)n;
    if (r == 0) {
      create_first = per;
      faults_first = faults;
    } else {
      create_later += per / (double)(rounds - 1);
      faults_later += faults;
    }
    if (r + 1 == rounds) {
      // All N alive, each stack touched: the moment memory is read (spawnscope --peak-when),
      // held a moment so that the reading falls while they live.
      printf("{\"event\":\"peak\",\"t_ns\":%llu,\"alive\":%llu,\"expected\":%llu}\n",
             (unsigned long long)now_ns(), (unsigned long long)n, (unsigned long long)n);
      fflush(stdout);
      usleep(500000);
    }
    printf("{\"event\":\"phase\",\"name\":\"switch\",\"t_ns\":%llu}\n", (unsigned long long)now_ns());
    fflush(stdout);
    uint64_t s0 = now_ns();
    for (uint64_t k = 0; k < switches; k++)
      for (uint64_t i = 0; i < n; i++) resume(&cos[i]);
    switch_total += (double)(now_ns() - s0) / (double)(n * switches);
    printf("{\"event\":\"phase\",\"name\":\"destroy\",\"t_ns\":%llu}\n", (unsigned long long)now_ns());
    fflush(stdout);
    for (uint64_t i = 0; i < n; i++) stack_put(cos[i].stack);
  }
  char later[128] = "null", later_faults[64] = "null";
  if (rounds > 1) {
    snprintf(later, sizeof later, "%.1f", create_later);
    snprintf(later_faults, sizeof later_faults, "%.3f",
             (double)faults_later / (double)(n * (rounds - 1)));
  }
  printf("{\"event\":\"result\",\"schema\":1,\"t_ns\":%llu,\"runtime\":\"%s\",\"workload\":\"coroutines\","
         "\"ok\":true,\"params\":%s,\"target\":%llu,\"spawned\":%llu,"
         "\"create_ns\":%.1f,\"create_ns_later_rounds\":%s,\"switch_ns\":%.1f,"
         "\"minflt_per_create\":%.3f,\"minflt_per_create_later_rounds\":%s}\n",
         (unsigned long long)now_ns(), rt, params, (unsigned long long)n, (unsigned long long)n,
         create_first, later, switch_total / (double)rounds, (double)faults_first / (double)n,
         later_faults);
  return 0;
}
