/* Workload for the bpftrace-language tests: deterministic calls, so that the
 * same program run by `pyebpf bt` and by bpftrace on it prints the same.
 *
 * Usage: btworkload [N [SLEEP_US [fork]]]
 *   fork: the work runs in a child process (forked, then exec'ed again: its
 *         own address layout), the first one waits for it -- the traced
 *         process is not the one -c started
 *   for i in 0..N-1:
 *     USDT btw:request(host, hostlen, path, pathlen)
 *         host  HOSTS[i % 3] ("alpha.example", "beta", "gamma.test"), hostlen its length
 *         path  PATHS[i % 4] ("/index.html", NULL, "/api/v1/items", "/x"), pathlen
 *               its length (0 for NULL): every 4th request has no path
 *     USDT btw:delta(i, d, small)   d = (int)(i % 7) - 3 (-3..3, a -4@ int spec),
 *                                   small = (short)(-(i % 5)) (-4..0, a -2@ spec)
 *     USDT btw:gated(i)           only while the probe is attached (a semaphore)
 *     compute(i % 10, i * 37 % 5000)                 -- plain entry/return probes
 *     lock_a(): pthread_mutex_trylock on a held lock -> fails (EBUSY), every 2nd i
 *     lock_b(): the same through another call stack, every 5th i
 *     every 8th i: nap(SLEEP_US << 2 * ((i / 8) % 3))  -- known latencies:
 *                   SLEEP_US, 4x, 16x in turn (far apart: log2 buckets
 *                   stay the same on a loaded machine)
 * At the end it prints "done SUM".
 * Built with -O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread:
 * the USDT arguments are in registers (delta's d is -4@%esi or the like) and
 * user stacks can be walked.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <sys/wait.h>
#include <unistd.h>

/* the probes' semaphores: the kernel raises one while its probe is attached;
 * btw:gated fires only then */
#define BTW_SEMAPHORE(name) \
	unsigned short btw_##name##_semaphore __attribute__((unused, section(".probes")))
BTW_SEMAPHORE(request);
BTW_SEMAPHORE(delta);
BTW_SEMAPHORE(gated);

static const char *HOSTS[] = {"alpha.example", "beta", "gamma.test"};
static const char *PATHS[] = {"/index.html", NULL, "/api/v1/items", "/x"};
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) long compute(long a, long b)
{
	return a * 3 + b;
}

__attribute__((noinline)) int try_take(void)
{
	int rc = pthread_mutex_trylock(&held);
	if (rc == 0)
		pthread_mutex_unlock(&held);
	return rc;
}

__attribute__((noinline)) int lock_a(void)
{
	return try_take() != 0;
}

__attribute__((noinline)) int lock_b_inner(void)
{
	return pthread_mutex_trylock(&held) != 0;
}

__attribute__((noinline)) int lock_b(void)
{
	return lock_b_inner();
}

__attribute__((noinline)) long nap(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
	return us;
}

__attribute__((noinline)) void request(long i)
{
	const char *host = HOSTS[i % 3];
	const char *path = PATHS[i % 4];
	long hostlen = (long)strlen(host);
	long pathlen = path ? (long)strlen(path) : 0;
	DTRACE_PROBE4(btw, request, host, hostlen, path, pathlen);
}

__attribute__((noinline)) void delta(long i)
{
	int d = (int)(i % 7) - 3;
	short small = (short)(-(i % 5));
	DTRACE_PROBE3(btw, delta, i, d, small);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	long sleep_us = argc > 2 ? atol(argv[2]) : 1000;
	long sum = 0;

	if (argc > 3 && strcmp(argv[3], "fork") == 0) {
		pid_t child = fork();
		if (child == 0) {
			char *args[] = {argv[0], argv[1], argv[2], NULL};
			execv("/proc/self/exe", args);
			_exit(127);
		}
		if (child > 0) {
			int status;
			waitpid(child, &status, 0);
			return 0;
		}
	}
	pthread_mutex_lock(&held);          /* every trylock below fails */
	for (long i = 0; i < n; i++) {
		request(i);
		delta(i);
		if (__builtin_expect(btw_gated_semaphore, 0))
			DTRACE_PROBE1(btw, gated, i);
		sum += compute(i % 10, i * 37 % 5000);
		if (i % 2 == 0)
			sum += lock_a();
		if (i % 5 == 0)
			sum += lock_b();
		if (i % 8 == 0)
			sum += nap(sleep_us << 2 * ((i / 8) % 3));
	}
	pthread_mutex_unlock(&held);
	printf("done %ld\n", sum);
	return 0;
}
