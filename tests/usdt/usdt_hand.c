/* usdt_hand.c: USDT probes whose argument specs are written by hand
 * (sys/sdt.h's STAP_PROBE_ASM), for the forms compilers rarely emit:
 * high-byte registers (%ah), every sub-register width, SIB without a base
 * register, $sym addresses, numeric off(%rip), GOTPCREL, and a probe with
 * several locations whose specs differ, some naming globals.
 *
 * Each function loads known values into registers right before its probe
 * and prints, after it, the line "<probe> <value> ..." with what every
 * argument must read as (decimal, as the C type holds it).
 *
 * Usage: usdt_hand [ROUNDS]
 */
#include <sys/sdt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int32_t g_arr[8] __attribute__((aligned(16))) = { 11, -22, 33, -44, 55, -66, 77, -88 };
int64_t g_val = -1234567;
int32_t g_small = -9;
static volatile int64_t v_x = -5000000000LL;
static volatile int32_t v_y = -70000;

__attribute__((noinline)) void hand_regs(void)
{
	__asm__ __volatile__(
		"movabsq $0x1122334455667788, %%rax\n\t"
		"movq $0xff00, %%rcx\n\t"
		"movq $0x80, %%rdx\n\t"
		"movq $0xffff8000, %%r8\n\t"
		"movq $-2, %%r9\n\t"
		"movabsq $0x8000000000000001, %%r10\n\t"
		STAP_PROBE_ASM(hand, regs, 1@%%ah -1@%%al 2@%%ax -4@%%eax -1@%%ch 1@%%ch -1@%%dl 1@%%dl -2@%%r8w 4@%%r8d -4@%%r8d -8@%%r9 8@%%r9 -8@%%r10)
		::: "rax", "rcx", "rdx", "r8", "r9", "r10", "memory");
}

__attribute__((noinline)) void hand_mem(void)
{
	__asm__ __volatile__(
		"leaq g_arr(%%rip), %%rax\n\t"
		"shrq $2, %%rax\n\t"                /* rax*4 = &g_arr: SIB without base */
		"movq $3, %%rcx\n\t"
		"leaq g_arr(%%rip), %%rsi\n\t"
		STAP_PROBE_ASM(hand, mem, -4@8(,%%rax,4) -4@(,%%rax,4) -4@(%%rsi,%%rcx,4) -4@-4(%%rsi,%%rcx,8) 8@$g_arr 8@$g_arr+8 -4@g_arr+4(%%rip) -4@8+g_arr(%%rip) 8@g_arr@GOTPCREL(%%rip) -1@3(%%rip))
		"jmp 1f\n\t"
		".byte 0xa6\n"                      /* at probe ip + 3: read by 1@3(%rip) */
		"1:\n\t"
		::: "rax", "rcx", "rsi", "memory");
}

static inline __attribute__((always_inline)) void multi_hit(int64_t a, int32_t b)
{
	DTRACE_PROBE2(hand, multi, a, b);
}

__attribute__((noinline)) void m1(int64_t x, int32_t y) { multi_hit(x, y); }
__attribute__((noinline)) void m2(int32_t y, int64_t x) { multi_hit(x, y); }
__attribute__((noinline)) void m3(void) { multi_hit(g_val, g_small); }
__attribute__((noinline)) void m4(const int64_t *p, const int32_t *q) { multi_hit(*p, *q); }
__attribute__((noinline)) void m5(int64_t x, int32_t y) { multi_hit(x, y); }
__attribute__((noinline)) void m6(void) { multi_hit(7, -1); }
__attribute__((noinline)) void m7(void) { multi_hit(g_val + 0, g_small); }

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	for (int r = 0; r < rounds; r++) {
		int64_t x = v_x;
		int32_t y = v_y;
		hand_regs();
		printf("regs %d %d %d %d %d %d %d %d %d %u %d %d %llu %lld\n",
		       0x77, (int8_t)0x88, 0x7788, 0x55667788, -1, 255, -128, 128, -32768,
		       4294934528u, -32768, -2, 18446744073709551614ULL,
		       (long long)(int64_t)0x8000000000000001ULL);
		hand_mem();
		printf("mem %d %d %d %d %llu %llu %d %d %llu %d\n", g_arr[2], g_arr[0], g_arr[3],
		       g_arr[5], (unsigned long long)(uintptr_t)g_arr,
		       (unsigned long long)(uintptr_t)&g_arr[2], g_arr[1], g_arr[2],
		       (unsigned long long)(uintptr_t)g_arr, (int8_t)0xa6);
		m1(x, y); printf("multi %lld %d\n", (long long)x, y);
		m2(y + 1, x + 1); printf("multi %lld %d\n", (long long)x + 1, y + 1);
		m3(); printf("multi %lld %d\n", (long long)g_val, g_small);
		m4(&x, &y); printf("multi %lld %d\n", (long long)x, y);
		m5(x - 2, y - 2); printf("multi %lld %d\n", (long long)x - 2, y - 2);
		m6(); printf("multi 7 -1\n");
		m7(); printf("multi %lld %d\n", (long long)g_val, g_small);
		g_val--;
		g_small++;
	}
	fflush(stdout);
	return 0;
}
