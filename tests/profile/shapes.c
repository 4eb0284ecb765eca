/* A workload with a known profile shape for tests/profile.
 *
 * main -> work -> {hot, cold}: hot spins three times as many iterations as
 * cold, in loops that keep everything in registers (no store per iteration:
 * sampling then matches the run time).  main -> other -> leaf runs as long as
 * cold.  Usage: shapes [ROUNDS] (each round: hot 3 units, cold 1, leaf 1).
 *
 * Built with frame pointers: -O1 -fno-omit-frame-pointer -fno-shrink-wrap
 * -fno-optimize-sibling-calls.  gcc 12 still leaves a leaf function without
 * one (the kernel's unwinder would then skip the leaf's caller), so spin()
 * is made a non-leaf by a call that never happens.
 */
#include <stdlib.h>

#define UNIT 20000000UL

__attribute__((noinline)) unsigned long spin(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("" : "+r"(x));      /* keeps x in a register */
    if (x == 0x5eed5eed5eedUL)               /* never: makes spin() keep a frame */
        abort();
    return x;
}

__attribute__((noinline)) unsigned long hot(unsigned long x) { return spin(3 * UNIT, x) + 1; }
__attribute__((noinline)) unsigned long cold(unsigned long x) { return spin(UNIT, x) + 1; }
__attribute__((noinline)) unsigned long leaf(unsigned long x) { return spin(UNIT, x) + 1; }

__attribute__((noinline)) unsigned long work(unsigned long x) { return hot(x) + cold(x); }
__attribute__((noinline)) unsigned long other(unsigned long x) { return leaf(x); }

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 10, x = 0;
    for (unsigned long r = 0; r < rounds; r++)
        x += work(r) + other(r);
    return (int)(x & 1) * 0;
}
