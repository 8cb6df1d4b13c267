#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
/* Streams over 512 MiB for argv[1] seconds: a neighbour that takes memory bandwidth and a CPU. */
int main(int argc, char** argv) {
  size_t n = (size_t)512 << 20;
  double secs = argc > 1 ? atof(argv[1]) : 600;
  char* a = malloc(n);
  memset(a, 1, n);
  time_t end = time(0) + (time_t)secs;
  unsigned long sum = 0;
  while (time(0) < end) {
    for (size_t i = 0; i < n; i += 64) { a[i] += 1; sum += a[i]; }
  }
  printf("%lu\n", sum);
  return 0;
}
