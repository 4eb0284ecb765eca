/* The USDT test target of the object-loader tests (gcc-built, sys/sdt.h):
 * probes with signed and unsigned arguments of every size, constants,
 * memory operands, globals (rip-relative at -O2), twelve arguments, one
 * probe at two sites whose argument specs differ, and a semaphore-guarded
 * probe (usdt_target_sema.c).  Each probe's
 * values are printed as "NAME v1 v2 ..." so a test can compare them with
 * what the BPF side read.
 *
 * Usage: usdt_target [ROUNDS] [wait]   ("wait": print "ready", read a line
 * from stdin, then run) */
#include <sys/sdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void guarded(int round);

struct item {
	long id;
	int weight;
	short level;
	unsigned char flags;
	signed char delta;
};

__attribute__((noinline)) void ints(int round)
{
	signed char sc = -5 - round;
	unsigned char uc = 250 + round;
	short ss = -1234 - round;
	unsigned short us = 50000 + round;
	int si = -100000 - round;
	unsigned int ui = 4000000000u + round;
	long sl = -5000000000000L - round;
	unsigned long ul = 0x8000000000000000ul + round;
	__asm__ volatile("" : "+r"(sc), "+r"(uc), "+r"(ss), "+r"(us), "+r"(si), "+r"(ui),
			 "+r"(sl), "+r"(ul));
	STAP_PROBE8(tgt, ints, sc, uc, ss, us, si, ui, sl, ul);
	printf("ints %d %u %d %u %d %u %ld %lu\n", sc, uc, ss, us, si, ui, sl, ul);
}

__attribute__((noinline)) void consts(void)
{
	STAP_PROBE4(tgt, consts, 42, -7, (unsigned short)50000, -5000000000L);
	printf("consts 42 -7 50000 -5000000000\n");
}

__attribute__((noinline)) void fields(const struct item *it)
{
	STAP_PROBE5(tgt, fields, it->id, it->weight, it->level, it->flags, it->delta);
	printf("fields %ld %d %d %u %d\n", it->id, it->weight, it->level, it->flags, it->delta);
}

long g_total = -77;
int g_small = 0;

__attribute__((noinline)) void bump(int round)
{
	g_total -= round;
	g_small = 3 * round + 1;
}

/* globals read where they live: sym(%rip) operands at -O2 */
__attribute__((noinline)) void globals(void)
{
	STAP_PROBE2(tgt, globals, g_total, g_small);
	printf("globals %ld %d\n", g_total, g_small);
}

__attribute__((noinline)) void twelve(long base)
{
	STAP_PROBE12(tgt, twelve, base, base + 1, base + 2, base + 3, base + 4, base + 5,
		     base + 6, base + 7, base + 8, base + 9, base + 10, base + 11);
	printf("twelve");
	for (int i = 0; i < 12; i++)
		printf(" %ld", base + i);
	printf("\n");
}

/* one probe, two sites: a long in a register, a short read from memory */
__attribute__((noinline)) void site_a(long v)
{
	STAP_PROBE2(tgt, site, v, 1);
	printf("site %ld 1\n", v);
}

__attribute__((noinline)) void site_b(const short *p)
{
	STAP_PROBE2(tgt, site, *p, 2);
	printf("site %d 2\n", *p);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		char line[16];
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	for (int r = 0; r < rounds; r++) {
		struct item it = {1000000007L * (r + 1), -300 - r, -12 - r, 200 + r, -3 - r};
		short sv = -30000 + r;
		ints(r);
		consts();
		fields(&it);
		bump(r);
		globals();
		twelve(-6 + 100 * r);
		site_a(7000000000L + r);
		site_b(&sv);
		guarded(r);
	}
	return 0;
}
