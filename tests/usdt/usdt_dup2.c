/* see usdt_dup.c */
#include <stdint.h>

static int32_t s_dup = -6;

int32_t dup2_value(void)
{
	return s_dup++;
}
