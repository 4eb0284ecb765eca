/* spawn: run a command and report its wall time, CPU time and peak RSS.
 *
 * usage: spawn OUTFILE CMD [ARG...]
 * Writes "wall_ns=W result_ns=P maxrss_kb=R utime_us=U stime_us=S status=X"
 * to OUTFILE and exits with the command's status.  W is the time from the
 * fork to the command's exit; P the time from the fork to the first line of
 * its standard output that starts with '@' (the printed result, as bpftrace
 * prints "@count: 1000"), -1 if none came.  The command's standard output
 * passes through a pipe to ours, unchanged.
 *
 * Why not fork from the harness: Linux keeps the highest RSS a process ever
 * had across exec (exec records the old address space's high-water mark),
 * so a child forked from a big Python harness reports the harness's RSS as
 * its own.  Forked from this small program, ru_maxrss is the tool's.
 */
#include <errno.h>
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
    int out[2];
    if (pipe(out) < 0) {
        perror("pipe");
        return 127;
    }
    struct timespec t0, t1, tr;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 127;
    }
    if (pid == 0) {
        close(out[0]);
        if (dup2(out[1], 1) < 0)
            _exit(127);
        close(out[1]);
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    close(out[1]);
    long long result = -1;
    int line_start = 1;
    char buf[65536];
    for (;;) {
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (line_start && buf[i] == '@' && result < 0) {
                clock_gettime(CLOCK_MONOTONIC, &tr);
                result = (tr.tv_sec - t0.tv_sec) * 1000000000LL + (tr.tv_nsec - t0.tv_nsec);
            }
            line_start = buf[i] == '\n';
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(1, buf + done, n - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += w;
        }
    }
    close(out[0]);
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
    fprintf(f, "wall_ns=%lld result_ns=%lld maxrss_kb=%ld utime_us=%ld stime_us=%ld status=%d\n",
            wall, result, ru.ru_maxrss, ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
            ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec, code);
    fclose(f);
    return code;
}
