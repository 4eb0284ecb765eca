/* Workload for the trace tests: calls with deterministic arguments, so that
 * `pyebpf trace` and bpftrace can be compared on the same run.
 *
 * Usage: workload [N [SLEEP_US]]
 *   for i in 0..N-1:
 *     work(i % 10, i * 37 % 5000)     -- count by arg0: N/10 each; hist of arg1
 *     greet(NAMES[i % 3], i)          -- a string argument
 *     USDT pyebpf_test:tick(i, i % 10, NAMES[i % 3])
 *     every 8th i: slow(SLEEP_US)    -- a function that takes time (latency)
 *     every 16th i: openat(AT_FDCWD, "/dev/null", O_RDONLY) + close
 * At the end it prints "total SUM".
 * Built with -O0 -g -fno-omit-frame-pointer so user stacks can be walked.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/sdt.h>

static const char *NAMES[] = {"alice", "bob", "carol"};

__attribute__((noinline)) long work(long a, long b)
{
	return a * 3 + b;
}

__attribute__((noinline)) int greet(const char *name, long n)
{
	return (int)(name[0] + n);
}

__attribute__((noinline)) long slow(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
	return us;
}

__attribute__((noinline)) long outer(long i)
{
	return work(i % 10, i * 37 % 5000);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long sleep_us = argc > 2 ? atol(argv[2]) : 100;
	long sum = 0;

	for (long i = 0; i < n; i++) {
		const char *name = NAMES[i % 3];
		long k = i % 10;
		sum += outer(i);
		sum += greet(name, i);
		DTRACE_PROBE3(pyebpf_test, tick, i, k, name);
		if (i % 8 == 0)
			sum += slow(sleep_us);
		if (i % 16 == 0) {
			int fd = openat(AT_FDCWD, "/dev/null", O_RDONLY);
			if (fd >= 0)
				close(fd);
		}
	}
	printf("total %ld\n", sum);
	return 0;
}
