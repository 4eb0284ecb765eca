/* spawn: run a command and report its wall time, CPU time and peak RSS.
 *
 * usage: spawn OUTFILE CMD [ARG...]
 * Writes "wall_ns=W maxrss_kb=R utime_us=U stime_us=S status=X" to OUTFILE
 * and exits with the command's status.
 *
 * Why not fork from the harness: Linux keeps the highest RSS a process ever
 * had across exec (exec records the old address space's high-water mark),
 * so a child forked from a big Python harness reports the harness's RSS as
 * its own.  Forked from this small program, ru_maxrss is the tool's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawn OUTFILE CMD [ARG...]\n");
        return 127;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 127;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("wait4");
        return 127;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long wall = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 127;
    }
    fprintf(f, "wall_ns=%lld maxrss_kb=%ld utime_us=%ld stime_us=%ld status=%d\n", wall,
            ru.ru_maxrss, ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
            ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec, code);
    fclose(f);
    return code;
}
