/* A probe hammer for tests/export: N getppid() system calls as fast as one
 * core makes them (each fires tracepoint:syscalls:sys_enter_getppid).
 * Usage: hammer [N]   (default 1,000,000) */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;

	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	return 0;
}
