// Where does a kernel copy pay? Copies one file's bytes from offset IN to offset OUT of a new
// file, one of three ways, and prints the CPU and wall time of the copy:
//   cfr  copy_file_range in 16 MiB calls
//   map  write(2) from a read-only map of the input, in CHUNK-KiB pieces
//   pread  pread into a buffer of CHUNK KiB, then write it
// usage: alignment MODE IN OUT CHUNK_KIB INPUT OUTPUT        (benches/copy_limit/alignment.sh)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s cfr|map|pread IN OUT CHUNK_KIB INPUT OUTPUT\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long in = atol(argv[2]), out = atol(argv[3]), chunk = atol(argv[4]) << 10;
    int fi = open(argv[5], O_RDONLY);
    struct stat st;
    if (fi < 0 || fstat(fi, &st) != 0) { perror(argv[5]); return 1; }
    long n = st.st_size;
    unlink(argv[6]);
    sync();
    int fo = open(argv[6], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *buffer = aligned_alloc(4096, chunk);
    char *map = mmap(0, n, PROT_READ, MAP_SHARED, fi, 0);
    if (fo < 0 || !buffer || map == MAP_FAILED) { perror("setup"); return 1; }
    double c0 = cpu(), w0 = wall();
    while (in < n) {
        long k = chunk < n - in ? chunk : n - in;
        ssize_t r;
        if (!strcmp(mode, "cfr")) {
            loff_t a = in, b = out;
            r = copy_file_range(fi, &a, fo, &b, k, 0);
        } else if (!strcmp(mode, "pread")) {
            r = pread(fi, buffer, k, in);
            if (r > 0) r = pwrite(fo, buffer, r, out);
        } else {
            r = pwrite(fo, map + in, k, out);
        }
        if (r <= 0) { perror("copy"); return 1; }
        in += r;
        out += r;
    }
    printf("%-5s %6s -> %-6s %6ld KiB pieces  cpu %.3f s  wall %.3f s\n", mode, argv[2], argv[3],
           chunk >> 10, cpu() - c0, wall() - w0);
    return 0;
}
