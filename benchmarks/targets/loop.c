/* A traced loop for the benchmarks: calls hit(i, 2*i) N times and prints the
 * nanoseconds per call.  With -DWITH_USDT the loop also fires a USDT probe
 * loop:hit with the same two 8-byte arguments (sys/sdt.h).
 *
 * usage: loop N [start_fd]
 *   When start_fd is given, the program writes one byte to it when it is ready
 *   and waits for one byte back before looping (so a tracer can attach first).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_USDT
#include <sys/sdt.h>
#endif

volatile uint64_t sink;

/* hit() starts with a 5-byte nop (patchable_function_entry), so a uprobe on
 * it lands on an instruction the kernel emulates.  Without it the first
 * instruction is a RIP-relative load that the kernel must single-step out of
 * line, which costs ~13 us per hit on this VM for every tracer alike and
 * would hide what the tracers themselves cost. */
__attribute__((noinline, patchable_function_entry(5, 0))) void hit(uint64_t a, uint64_t b)
{
    sink += a ^ b;
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (argc > 2) {
        int fd = atoi(argv[2]);
        char c = 'r';
        if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
            return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
#ifdef WITH_USDT
        DTRACE_PROBE2(loop, hit, (uint64_t)i, (uint64_t)(2 * i));
#else
        hit((uint64_t)i, (uint64_t)(2 * i));
#endif
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("%ld calls %.1f ns/call\n", n, ns / (n ? n : 1));
    return 0;
}
