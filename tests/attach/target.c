/* Traced program for tests/attach: runs commands read from stdin, one per line,
 * and answers on stdout, so a test can attach probes between commands.
 *
 *   add N ARG      call target_add(i, ARG) for i in 0..N-1
 *   mul N ARG      call target_mul(i, ARG) for i in 0..N-1
 *   getpid N       call getpid() (libc) N times
 *   open N PATH    open(PATH, O_RDONLY|O_CLOEXEC|O_DIRECTORY|O_NOCTTY) + close, N times
 *   spin MS        busy loop for MS milliseconds
 *   sema 0         answer the value of target_semaphore
 *
 * Each command answers "done SUM NS": the sum of the results and the time the
 * loop took in nanoseconds.  At start the program prints "ready PID".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef MOVED_TEXT
#define TEXT __attribute__((noinline, section(".moved_text")))
#else
#define TEXT __attribute__((noinline))
#endif

/* A USDT-style semaphore: a u16 in a writable, file-backed section that the
 * kernel increments while a probe with ref_ctr_offset on it is attached. */
volatile unsigned short target_semaphore __attribute__((section(".probes"))) = 0;

TEXT long target_add(long a, long b)
{
	return a + b;
}

TEXT long target_mul(long a, long b)
{
	long r = a * b;
	return r;
}

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

int main(void)
{
	char line[512];

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", path[400] = "";
		long n = 0, arg = 0, sum = 0, t0, i;

		if (sscanf(line, "%31s %ld %399s", cmd, &n, path) < 1)
			continue;
		arg = strtol(path, NULL, 0);
		t0 = now_ns();
		if (!strcmp(cmd, "add")) {
			for (i = 0; i < n; i++)
				sum += target_add(i, arg);
		} else if (!strcmp(cmd, "mul")) {
			for (i = 0; i < n; i++)
				sum += target_mul(i, arg);
		} else if (!strcmp(cmd, "getpid")) {
			for (i = 0; i < n; i++)
				sum += getpid();
		} else if (!strcmp(cmd, "open")) {
			for (i = 0; i < n; i++) {
				int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOCTTY);
				if (fd >= 0) {
					sum++;
					close(fd);
				}
			}
		} else if (!strcmp(cmd, "spin")) {
			long end = t0 + n * 1000000L;
			while (now_ns() < end)
				sum++;
		} else if (!strcmp(cmd, "sema")) {
			sum = target_semaphore;
		} else if (!strcmp(cmd, "exit")) {
			return 0;
		}
		printf("done %ld %ld\n", sum, now_ns() - t0);
	}
	return 0;
}
