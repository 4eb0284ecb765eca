/* usdt_forms.c: USDT probes (STAP_PROBEn, and DTRACE_PROBEn for forms:dtrace)
 * that pass known values through every argument
 * form gcc and clang emit on x86_64 (constants, registers and sub-registers,
 * stack and struct derefs, rip-relative globals, arrays indexed by a
 * variable (SIB), pointers, floats and doubles).
 *
 * Used by pyebpf's USDT tests:
 *   - the parser tests build it (gcc -O0/-O2, -no-pie, -fPIC -shared, clang)
 *     and check that every argument spec decodes with the size and sign
 *     listed in EXPECTED below (tests/usdt/test_usdt_cprog.py reads that
 *     table from this file: keep the format "probe: spec spec ...");
 *   - the tracing tests run it and compare the values a BPF program reads
 *     at each probe with the lines this program prints.
 *
 * Usage: usdt_forms [ROUNDS [DELAY_MS]]
 *   Fires every probe ROUNDS times (default 1), sleeping DELAY_MS between
 *   rounds.  If USDT_FORMS_WAIT is set in the environment, it first prints
 *   "ready <pid>" and waits for a line on standard input (so a tracer can
 *   attach).  Each round prints one line per probe:
 *       <probe> <value> <value> ...
 *   integers in decimal as the C type holds them, floating point with %.17g,
 *   pointers as 0x... .  The semaphore probe line is
 *       sema <enabled 0|1> <value> <value>
 *   and the probe only fires when its semaphore is non-zero.
 *
 * Built as a shared library (-DUSDT_FORMS_LIB -fPIC -shared) it exports
 * usdt_forms_round(int round) instead of main; usdt_forms_main.c drives it.
 *
 * EXPECTED (size and sign of each argument; "f" marks floating point; the
 * table is the contract the parser tests check):
 *   consts:     -1 1 -2 2 -4 4 -8 8
 *   params:     -1 1 -2 2 -4 4 -8 8
 *   globals:    -4 -8 -4 8 -4 2 -1 -8
 *   arrays:     -4 1 -8 -8 -2 4
 *   index:      -4 1 -2
 *   struct_ptr: -8 -4 -2 -1 8 8
 *   floats:     8f 4f 8f 8f 4f
 *   pointers:   8 8 8 8
 *   dtrace:     -4 2 -8
 *   many:       -1 1 -2 2 -4 4 -8 8 -4 -8 8 8f
 *   sema:       -4 8
 */
#include <sys/sdt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct item {
	int64_t a;
	int32_t b;
	int16_t c;
	int8_t d;
	uint64_t e;
	double f;
	float g;
};

/* globals: referenced as sym(%rip), sym+off(%rip), sym(,%idx,scale) ... */
int32_t g_counter = 7;
int64_t g_neg = -42;
uint16_t g_u16 = 60000;
int8_t g_i8 = -7;
int64_t g_i64 = -9000000000LL;
int32_t g_table[8] = { 10, -20, 30, -40, 50, -60, 70, -80 };
uint8_t g_bytes[16] = { 1, 2, 3, 250, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 255 };
int64_t g_longs[4] = { -1, 2, -3000000000LL, 4 };
int16_t g_shorts[6] = { -1, 2, -300, 4, -32768, 32767 };
uint32_t g_words[5] = { 1, 4000000000u, 3, 4, 5 };
struct item g_item = { -1234567890123LL, -99, -3, -4, 18000000000000000000ULL, 3.25, -0.5f };
static int32_t s_static_counter = -17;
double g_double = 2.5;
float g_float = -1.25f;
const char g_message[] = "hello usdt";

/* Values flow through volatiles so that the compiler cannot fold them into
 * constants where we want registers and memory operands.  Each probe sits in
 * its own non-inlined function and the caller prints the values, so the
 * probe's operands are not shared with a printf (which changes the forms the
 * compiler picks). */
static volatile int v_index = 3;
static volatile int v_index2 = 5;
static volatile int8_t v_i8 = -5;
static volatile uint8_t v_u8 = 250;
static volatile int16_t v_i16 = -300;
static volatile uint16_t v_u16 = 50000;
static volatile int32_t v_i32 = -70000;
static volatile uint32_t v_u32 = 3000000000u;
static volatile int64_t v_i64 = -5000000000LL;
static volatile uint64_t v_u64 = 18446744073709551614ULL;
static volatile double v_double = -2.75;
static volatile float v_float = 1.5f;

extern void forms_sema_fire(int32_t a, uint64_t b);
extern int forms_sema_enabled(void);

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

NOINLINE void forms_consts(void)
{
	STAP_PROBE8(forms, consts, (int8_t)-5, (uint8_t)250, (int16_t)-300,
		    (uint16_t)50000, (int32_t)-70000, (uint32_t)3000000000u,
		    (int64_t)-5000000000LL, (uint64_t)18446744073709551614ULL);
}

NOINLINE void forms_params(int8_t a, uint8_t b, int16_t c, uint16_t d,
			   int32_t e, uint32_t f, int64_t g, uint64_t h)
{
	STAP_PROBE8(forms, params, a, b, c, d, e, f, g, h);
}

NOINLINE void forms_globals(void)
{
	STAP_PROBE8(forms, globals, g_counter, g_neg, g_item.b, g_item.e,
		    s_static_counter, g_u16, g_i8, g_i64);
}

NOINLINE void forms_arrays(int i, int j)
{
	int64_t local[8];
	for (int k = 0; k < 8; k++)
		local[k] = (int64_t)(k + 1) * -1000;
	__asm__ volatile("" : : "r"(local) : "memory");
	STAP_PROBE6(forms, arrays, g_table[i], g_bytes[j], g_longs[i & 3], local[i],
		    g_shorts[j], g_words[i & 3]);
}

/* A lone indexed global: with -no-pie gcc addresses it absolutely,
 * sym(,%idx,scale) and sym(%reg). */
NOINLINE void forms_index(int i, int j)
{
	STAP_PROBE3(forms, index, g_table[i], g_bytes[j], g_shorts[j]);
}

NOINLINE void forms_struct_ptr(const struct item *p)
{
	STAP_PROBE6(forms, struct_ptr, p->a, p->b, p->c, p->d, p->e, p);
}

NOINLINE void forms_floats(double d, float f, const struct item *p)
{
	STAP_PROBE5(forms, floats, d, f, g_double, p->f, p->g);
}

NOINLINE void forms_pointers(const struct item *p)
{
	STAP_PROBE4(forms, pointers, &g_item, g_message, &g_table[2], p);
}

/* DTRACE_PROBEn: the DTrace-compatible spelling of the same macro. */
NOINLINE void forms_dtrace(int32_t e, uint16_t d, int64_t g)
{
	DTRACE_PROBE3(forms, dtrace, e, d, g);
}

NOINLINE void forms_many(int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e,
			 uint32_t f, int64_t g, uint64_t h, double x)
{
	STAP_PROBE12(forms, many, a, b, c, d, e, f, g, h, -1, -2LL,
		     (uint64_t)0xfedcba9876543210ULL, x);
}

#ifdef USDT_FORMS_LIB
__attribute__((visibility("default")))
#endif
void usdt_forms_round(int round)
{
	int i = v_index + (round & 0);
	int j = v_index2;
	int8_t a = v_i8;
	uint8_t b = v_u8;
	int16_t c = v_i16;
	uint16_t d = v_u16;
	int32_t e = v_i32;
	uint32_t f = v_u32;
	int64_t g = v_i64;
	uint64_t h = v_u64;
	double x = v_double;
	float y = v_float;
	const struct item *p = &g_item;

	forms_consts();
	printf("consts %d %u %d %u %d %u %lld %llu\n", -5, 250u, -300, 50000u, -70000,
	       3000000000u, -5000000000LL, 18446744073709551614ULL);

	forms_params(a, b, c, d, e, f, g, h);
	printf("params %d %u %d %u %d %u %lld %llu\n", a, b, c, d, e, f,
	       (long long)g, (unsigned long long)h);

	forms_globals();
	printf("globals %d %lld %d %llu %d %u %d %lld\n", g_counter, (long long)g_neg,
	       g_item.b, (unsigned long long)g_item.e, s_static_counter, g_u16, g_i8,
	       (long long)g_i64);

	forms_arrays(i, j);
	printf("arrays %d %u %lld %lld %d %u\n", g_table[i], g_bytes[j],
	       (long long)g_longs[i & 3], (long long)(i + 1) * -1000, g_shorts[j],
	       g_words[i & 3]);

	forms_index(i, j);
	printf("index %d %u %d\n", g_table[i], g_bytes[j], g_shorts[j]);

	forms_struct_ptr(p);
	printf("struct_ptr %lld %d %d %d %llu %p\n", (long long)p->a, p->b, p->c, p->d,
	       (unsigned long long)p->e, (const void *)p);

	forms_floats(x, y, p);
	printf("floats %.17g %.17g %.17g %.17g %.17g\n", x, (double)y, g_double, p->f,
	       (double)p->g);

	forms_pointers(p);
	printf("pointers %p %p %p %p\n", (void *)&g_item, (void *)g_message,
	       (void *)&g_table[2], (const void *)p);

	forms_dtrace(e, d, g);
	printf("dtrace %d %u %lld\n", e, d, (long long)g);

	forms_many((int8_t)-128, (uint8_t)255, (int16_t)-32768, (uint16_t)65535,
		   INT32_MIN, UINT32_MAX, INT64_MIN, UINT64_MAX, x);
	printf("many %d %u %d %u %d %u %lld %llu %d %lld %llu %.17g\n", -128, 255u, -32768,
	       65535u, INT32_MIN, UINT32_MAX, (long long)INT64_MIN,
	       (unsigned long long)UINT64_MAX, -1, -2LL, 0xfedcba9876543210ULL, x);

	{
		int enabled = forms_sema_enabled();
		printf("sema %d %d %llu\n", enabled, -123456, 9876543210ULL);
		forms_sema_fire(-123456, 9876543210ULL);
	}
	fflush(stdout);
}

#ifndef USDT_FORMS_LIB
int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	int delay_ms = argc > 2 ? atoi(argv[2]) : 0;
	if (getenv("USDT_FORMS_WAIT")) {
		char line[64];
		printf("ready %ld\n", (long)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
	}
	for (int r = 0; r < rounds; r++) {
		usdt_forms_round(r);
		if (delay_ms > 0 && r + 1 < rounds) {
			struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
#endif
