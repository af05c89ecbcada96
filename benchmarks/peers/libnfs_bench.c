/* libnfs-bench SERVER EXPORT FILE OP DEPTH SECONDS [PORT]
 * OP: null | getattr | read4k. libnfs's raw asynchronous API on one context (one TCP
 * connection, one thread): DEPTH calls kept in flight, each completion issuing the next,
 * driven by poll() + rpc_service(). PORT: MOUNT and NFS there, no portmapper.
 * Prints one JSON line.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

struct nfs_fh { int len; char *val; }; /* libnfs 4.0's layout (libnfs-private.h) */

static struct rpc_context *rpc;
static nfs_fh3 fh3;
static const char *op;
static double deadline;
static long done_ops, errors, in_flight;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void issue(void);

static void cb(struct rpc_context *r, int status, void *data, void *priv) {
    (void)r; (void)priv;
    in_flight--;
    if (status != RPC_STATUS_SUCCESS) errors++;
    else if (strcmp(op, "getattr") == 0 && ((GETATTR3res *)data)->status != NFS3_OK) errors++;
    else if (strcmp(op, "read4k") == 0 && ((READ3res *)data)->status != NFS3_OK) errors++;
    done_ops++;
    if (now() < deadline) issue();
}

static void issue(void) {
    int rc;
    if (strcmp(op, "null") == 0) {
        rc = rpc_nfs3_null_async(rpc, cb, NULL);
    } else if (strcmp(op, "getattr") == 0) {
        GETATTR3args a;
        a.object = fh3;
        rc = rpc_nfs3_getattr_async(rpc, cb, &a, NULL);
    } else {
        READ3args a;
        a.file = fh3;
        a.offset = (done_ops % 256) * 4096;
        a.count = 4096;
        rc = rpc_nfs3_read_async(rpc, cb, &a, NULL);
    }
    if (rc != 0) { fprintf(stderr, "queue failed: %s\n", rpc_get_error(rpc)); exit(1); }
    in_flight++;
}

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) { fprintf(stderr, "usage: libnfs-bench SERVER EXPORT FILE OP DEPTH SECONDS [PORT]\n"); return 2; }
    op = argv[4];
    int depth = atoi(argv[5]);
    double seconds = atof(argv[6]);
    struct nfs_context *nfs = nfs_init_context();
    if (argc == 8) {
        char url[512];
        snprintf(url, sizeof url, "nfs://%s%s?nfsport=%s&mountport=%s", argv[1], argv[2], argv[7], argv[7]);
        struct nfs_url *u = nfs_parse_url_dir(nfs, url);
        if (u == NULL) { fprintf(stderr, "url: %s\n", nfs_get_error(nfs)); return 1; }
        nfs_destroy_url(u);
    }
    if (nfs_mount(nfs, argv[1], argv[2]) != 0) { fprintf(stderr, "mount: %s\n", nfs_get_error(nfs)); return 1; }
    struct nfsfh *f;
    char path[4096];
    snprintf(path, sizeof path, "/%s", argv[3]);
    if (nfs_open(nfs, path, O_RDONLY, &f) != 0) { fprintf(stderr, "open: %s\n", nfs_get_error(nfs)); return 1; }
    struct nfs_fh *h = nfs_get_fh(f);
    fh3.data.data_len = h->len;
    fh3.data.data_val = h->val;
    rpc = nfs_get_rpc_context(nfs);
    double t0 = now(), c0 = cpu();
    deadline = t0 + seconds;
    for (int i = 0; i < depth; i++) issue();
    while (in_flight > 0) {
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 100) < 0) { perror("poll"); return 1; }
        if (rpc_service(rpc, p.revents) < 0) { fprintf(stderr, "service: %s\n", rpc_get_error(rpc)); return 1; }
    }
    double wall = now() - t0, c = cpu() - c0;
    printf("{\"client\": \"libnfs\", \"op\": \"%s\", \"depth\": %d, \"ops\": %ld, \"errors\": %ld, \"seconds\": %f, \"cpu_s\": %f}\n",
           op, depth, done_ops, errors, wall, c);
    return 0;
}
