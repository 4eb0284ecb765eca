/* usdt_dup.c / usdt_dup2.c: two files with a static variable of the same
 * name, s_dup, and a probe reading it as -4@s_dup(%rip): the note alone
 * cannot say which s_dup it means (libbpf/usdt#13). */
#include <sys/sdt.h>
#include <stdint.h>
#include <stdio.h>

static int32_t s_dup = 5;
extern int32_t dup2_value(void);

__attribute__((noinline)) void dup_fire(void)
{
	DTRACE_PROBE1(dup, read, s_dup);
}

int main(int argc, char **argv)
{
	(void)argv;
	s_dup += argc;                  /* 6 when run without arguments */
	dup_fire();
	printf("dup %d %d\n", s_dup, dup2_value());
	return 0;
}
