// Touch N MiB of anonymous memory in 256 MiB chunks; print per-chunk time and
// the kernel's free/managed counters, so the lazy init of deferred memory shows.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
static long rd(const char *file, const char *key){FILE*f=fopen(file,"r");char l[256];long v=-1;size_t k=strlen(key);while(fgets(l,sizeof l,f)){if(!strncmp(l,key,k)&&(l[k]==' '||l[k]==':')){v=atol(l+k+1+(l[k]==':'));break;}}fclose(f);return v;}
static long managed(void){FILE*f=fopen("/proc/zoneinfo","r");char l[256];long s=0,v;while(fgets(l,sizeof l,f)){if(sscanf(l," managed %ld",&v)==1)s+=v;}fclose(f);return s;}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static void line(const char*tag){printf("%s MemFree=%ld nr_free_kB=%ld managed_kB=%ld MemTotal=%ld MemAvailable=%ld\n",tag,rd("/proc/meminfo","MemFree"),rd("/proc/vmstat","nr_free_pages")*4,managed()*4,rd("/proc/meminfo","MemTotal"),rd("/proc/meminfo","MemAvailable"));}
int main(int c,char**v){long mib=atol(v[1]);size_t chunk=256UL<<20;line("before");
char*p=mmap(0,(size_t)mib<<20,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);
for(long off=0;off<(mib<<20);off+=chunk){double t=now();for(size_t i=0;i<chunk;i+=4096)p[off+i]=1;double d=now()-t;printf("chunk %ld MiB: %.1f ms (%.2f us/page)\n",(off>>20)+256,d*1e3,d*1e6/(chunk/4096));}
struct rusage ru;getrusage(RUSAGE_SELF,&ru);printf("utime %.3f s stime %.3f s minflt %ld\n",ru.ru_utime.tv_sec+ru.ru_utime.tv_usec/1e6,ru.ru_stime.tv_sec+ru.ru_stime.tv_usec/1e6,ru.ru_minflt);
line("touched");munmap(p,(size_t)mib<<20);line("freed");return 0;}
