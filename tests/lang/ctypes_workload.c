/* Workload for the C-definitions tests: one call of take(&s, &pair) with
 * known contents, so that a program casting arg0/arg1 to the same structs
 * (defined in the script) prints the same under bpftrace and pyebpf bt.
 * The layout mixes what C layout has to get right: padding, a nested and an
 * anonymous member, 1- and 2-dimensional arrays, bit fields across a byte
 * boundary and a signed one, a char array (a string), a pointer. */
#include <stdio.h>
#include <string.h>

struct ctw_inner { short a; long b; };

struct ctw_sample {
	char tag;
	int nums[4];
	int grid[2][3];
	struct ctw_inner in;
	union { unsigned int word; unsigned char bytes[4]; } u;
	unsigned int lo : 3, mid : 9, hi : 20;
	int neg : 5;
	char name[8];
	unsigned char raw[3];
	long *ptr;
};

struct ctw_pair { int m; int n; };

__attribute__((noinline)) long take(struct ctw_sample *s, struct ctw_pair *p)
{
	__asm__ volatile("" : : "r"(s), "r"(p) : "memory");
	return s->nums[0] + p->m;
}

int main(void)
{
	static long target = 77;
	struct ctw_sample s;
	struct ctw_pair p = { 2, 3 };
	memset(&s, 0, sizeof(s));
	s.tag = 'x';
	for (int i = 0; i < 4; i++)
		s.nums[i] = i + 1;
	for (int i = 0; i < 6; i++)
		s.grid[i / 3][i % 3] = 10 + i;
	s.in.a = -7;
	s.in.b = 1L << 40;
	s.u.word = 0x04030201;
	s.lo = 5;
	s.mid = 300;
	s.hi = 1000000;
	s.neg = -3;
	strcpy(s.name, "sample");
	s.raw[0] = 9; s.raw[1] = 8; s.raw[2] = 7;
	s.ptr = &target;
	printf("done %ld\n", take(&s, &p));
	return 0;
}
