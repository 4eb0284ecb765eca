/* usdt_forms_sema.c: the semaphore-guarded probe of usdt_forms.c.
 *
 * _SDT_HAS_SEMAPHORES changes how sys/sdt.h writes every note of a
 * translation unit, so the probe with a semaphore lives in its own file.
 * The probe fires only while a tracer holds the semaphore non-zero (the
 * kernel's uprobe ref_ctr, or a write to /proc/PID/mem).
 */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdint.h>

__extension__ unsigned short forms_sema_semaphore
	__attribute__((unused)) __attribute__((section(".probes")));

int forms_sema_enabled(void)
{
	return *(volatile unsigned short *)&forms_sema_semaphore != 0;
}

__attribute__((noinline)) void forms_sema_fire(int32_t a, uint64_t b)
{
	if (*(volatile unsigned short *)&forms_sema_semaphore)
		STAP_PROBE2(forms, sema, a, b);
}
