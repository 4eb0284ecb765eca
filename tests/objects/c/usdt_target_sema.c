/* The semaphore-guarded probe of usdt_target.c: _SDT_HAS_SEMAPHORES changes
 * every note of a translation unit, so this probe lives in its own file.
 * tgt:guarded fires only while a tracer holds its semaphore non-zero. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>

__extension__ unsigned short tgt_guarded_semaphore
	__attribute__((unused)) __attribute__((section(".probes")));

__attribute__((noinline)) void guarded(int round)
{
	int on = *(volatile unsigned short *)&tgt_guarded_semaphore != 0;
	if (on)
		STAP_PROBE1(tgt, guarded, round);
	printf("guarded %d %d\n", on, round);
}
