/* rawloop: the system-call floor for the POSIX benchmark.
 *
 *   rawloop MODE ROOT LIST SECONDS [XFER]
 *
 * MODE  stat       fstatat(root, path, AT_SYMLINK_NOFOLLOW)      (peakbench getattr)
 *       read-open  openat + pread(XFER at a random offset) + close (peakbench read)
 *       read-fd    pread on descriptors opened before the loop     (fio psync)
 *       read-fd-state  read-fd, and each read also touches per-file state laid out as the
 *                  engine's (BENCHMARKS.md §2): the size from a table of 16-byte entries, a
 *                  16-byte path slot, and a locked increment (and, after the read, decrement)
 *                  of a count at the head of the path's own 48-byte allocation, as an Arc clone
 *                  and drop do: what those three lines cost a read on this machine
 *       read-fd-lines  read-fd-state with a plain load of that count instead of the locked
 *                  increment and decrement: the lines alone
 * ROOT  directory the paths in LIST are relative to (opened once, like peakbench's root)
 * LIST  one relative path per line
 *
 * Files are picked uniformly at random (splitmix64), offsets uniformly among the
 * multiples of ALIGN in [0, size - XFER], ALIGN being the largest power of two
 * up to min(XFER, 4096), like peakbench's random pattern (and fio, which aligns
 * to the block size). The loop runs for SECONDS
 * of wall time and prints one JSON line: ops, errors, cpu_s (its own user +
 * system time for the loop only, from getrusage), wall_s.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* splitmix64. Not xorshift64: taking its consecutive outputs modulo 4096 (the file)
 * and modulo 16 (the page) gave only 4,096 distinct (file, page) pairs out of
 * 65,536, a 16 MB working set that stays in the CPU's cache, which made the
 * read loop look ~2x cheaper per op than any tool reading the whole file set. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: rawloop stat|read-open|read-fd|read-fd-state|read-fd-lines ROOT LIST SECONDS [XFER]\n");
        return 2;
    }
    const char *mode = argv[1];
    double seconds = atof(argv[4]);
    size_t xfer = argc > 5 ? (size_t)atol(argv[5]) : 4096;
    int st = !strcmp(mode, "stat"), ro = !strcmp(mode, "read-open"), locked = !strcmp(mode, "read-fd-state");
    int state = locked || !strcmp(mode, "read-fd-lines"), rf = !strcmp(mode, "read-fd") || state;
    if (!(st || ro || rf)) {
        fprintf(stderr, "rawloop: unknown mode %s\n", mode);
        return 2;
    }
    int root = open(argv[2], O_RDONLY | O_DIRECTORY);
    FILE *list = fopen(argv[3], "r");
    if (root < 0 || !list) {
        perror("rawloop: open");
        return 1;
    }
    size_t n = 0, cap = 1024;
    char **paths = malloc(cap * sizeof *paths);
    off_t *sizes = malloc(cap * sizeof *sizes);
    int *fds = malloc(cap * sizeof *fds);
    char line[4096];
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        if (n == cap) {
            cap *= 2;
            paths = realloc(paths, cap * sizeof *paths);
            sizes = realloc(sizes, cap * sizeof *sizes);
            fds = realloc(fds, cap * sizeof *fds);
        }
        struct stat sb;
        if (fstatat(root, line, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            perror(line);
            return 1;
        }
        paths[n] = strdup(line);
        sizes[n] = sb.st_size;
        fds[n] = rf ? openat(root, line, O_RDONLY) : -1;
        if (rf && fds[n] < 0) {
            perror(line);
            return 1;
        }
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "rawloop: empty list\n");
        return 1;
    }
    /* The engine's per-file state for read-fd-state (see the usage above). */
    struct file_entry { off_t size; uint32_t parent; uint16_t generation; uint8_t origin, alive; } *file_table = NULL;
    struct path_slot { uint64_t *shared; size_t len; } *path_slots = NULL;
    if (state) {
        file_table = calloc(n, sizeof *file_table);
        path_slots = calloc(n, sizeof *path_slots);
        for (size_t i = 0; i < n; i++) {
            file_table[i].size = sizes[i];
            path_slots[i].shared = calloc(1, 48);
            path_slots[i].len = strlen(paths[i]);
        }
    }
    char *buf = aligned_alloc(4096, xfer < 4096 ? 4096 : (xfer + 4095) / 4096 * 4096);
    off_t align = 1;
    while (align * 2 <= (off_t)(xfer < 4096 ? xfer : 4096)) align *= 2;
    uint64_t ops = 0, errors = 0;
    double t0 = now(), c0 = cpu(), end = t0 + seconds, t = t0;
    while (t < end) {
        for (int k = 0; k < 1024; k++) {
            size_t i = next_random() % n;
            off_t size = state ? file_table[i].size : sizes[i];
            off_t span = size > (off_t)xfer ? size - (off_t)xfer : 0;
            off_t at = span ? (off_t)(next_random() % (uint64_t)(span / align + 1)) * align : 0;
            if (st) {
                struct stat sb;
                errors += fstatat(root, paths[i], &sb, AT_SYMLINK_NOFOLLOW) < 0;
            } else if (ro) {
                int fd = openat(root, paths[i], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                    errors++;
                    continue;
                }
                errors += pread(fd, buf, xfer, at) < 0;
                close(fd);
            } else if (locked) {
                uint64_t *shared = path_slots[i].shared;
                __atomic_fetch_add(shared, 1, __ATOMIC_RELAXED);
                errors += pread(fds[i], buf, xfer, at) < 0;
                __atomic_fetch_sub(shared, 1, __ATOMIC_RELEASE);
            } else if (state) {
                errors += *(volatile uint64_t *)path_slots[i].shared; /* 0: the line's load, not its value */
                errors += pread(fds[i], buf, xfer, at) < 0;
            } else {
                errors += pread(fds[i], buf, xfer, at) < 0;
            }
            ops++;
        }
        t = now();
    }
    double c1 = cpu();
    printf("{\"mode\": \"%s\", \"files\": %zu, \"ops\": %llu, \"errors\": %llu, \"cpu_s\": %.6f, \"wall_s\": %.6f}\n", mode, n,
           (unsigned long long)ops, (unsigned long long)errors, c1 - c0, t - t0);
    return 0;
}
