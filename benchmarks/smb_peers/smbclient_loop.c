/* libsmbclient load peer for benchmarks/smb_client_cpu.py: one synchronous loop (the
 * library has one request in flight per context) doing one op after another for SECONDS;
 * prints {"client", "op", "ops", "ops_per_s"} as JSON. libsmbclient has no echo call.
 *
 *   smbclient_loop HOST PORT SHARE USER PASSWORD getattr|read4k SECONDS
 */
#include <errno.h>
#include <fcntl.h>
#include <libsmbclient.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *user, *password;

static void auth(const char *server, const char *share, char *workgroup, int wglen, char *username, int unlen,
                 char *pw, int pwlen) {
    (void)server, (void)share, (void)workgroup, (void)wglen;
    snprintf(username, unlen, "%s", user);
    snprintf(pw, pwlen, "%s", password);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: smbclient_loop HOST PORT SHARE USER PASSWORD getattr|read4k SECONDS\n");
        return 2;
    }
    user = argv[4], password = argv[5];
    const char *op = argv[6];
    double seconds = atof(argv[7]);
    SMBCCTX *ctx = smbc_new_context();
    smbc_setFunctionAuthData(ctx, auth);
    smbc_setPort(ctx, atoi(argv[2]));
    if (!smbc_init_context(ctx)) {
        perror("smbc_init_context");
        return 1;
    }
    smbc_set_context(ctx);
    char url[1024];
    snprintf(url, sizeof url, "smb://%s/%s/probe.dat", argv[1], argv[3]);
    int fd = smbc_open(url, O_RDONLY, 0);
    if (fd < 0) {
        perror("smbc_open");
        return 1;
    }
    char buf[4096];
    struct stat st;
    long ops = 0;
    double start = now(), end = start + seconds;
    int read4k = strcmp(op, "read4k") == 0;
    while (now() < end) {
        int ok = read4k ? (smbc_lseek(fd, 0, SEEK_SET) == 0 && smbc_read(fd, buf, sizeof buf) == sizeof buf)
                        : smbc_stat(url, &st) == 0;
        if (!ok) {
            fprintf(stderr, "%s failed: %s\n", op, strerror(errno));
            return 1;
        }
        ops++;
    }
    double took = now() - start;
    printf("{\"client\": \"libsmbclient\", \"op\": \"%s\", \"ops\": %ld, \"ops_per_s\": %.1f}\n", op, ops, ops / took);
    return 0;
}
