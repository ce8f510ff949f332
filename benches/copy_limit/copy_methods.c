// Ways to copy two files into one, for benches/copy_limit/run.sh: is there a way to write
// the axis0 scenario's output faster than `cat`, which copies inside the kernel?
//   copy_methods METHOD OUT IN1 IN2   (each input's first 128 bytes are skipped, as a .npy
//   header; the output starts with 128 zero bytes)
// METHOD: cfr (copy_file_range, one call per input, as tjoin), splice (through a 1 MiB pipe),
// rw (pread/pwrite through a 1 MiB buffer), cfr2 (copy_file_range, one thread per input),
// mmap2 (one thread per input, memcpy into the mapped output, 8 MiB windows).
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER 128
#define WINDOW (8L << 20)

static int out;
static const char *method;

struct part {
    const char *path;
    off_t at;
};

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static off_t data_len(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) fail(path);
    return st.st_size - HEADER;
}

static void copy_part(const struct part *p) {
    int in = open(p->path, O_RDONLY);
    if (in < 0) fail(p->path);
    off_t len = data_len(p->path);
    if (!strcmp(method, "cfr") || !strcmp(method, "cfr2")) {
        loff_t from = HEADER, to = p->at;
        for (off_t left = len; left > 0;) {
            ssize_t n = copy_file_range(in, &from, out, &to, left, 0);
            if (n <= 0) fail("copy_file_range");
            left -= n;
        }
    } else if (!strcmp(method, "splice")) {
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) fail("pipe");
        fcntl(pipe_fds[1], F_SETPIPE_SZ, 1 << 20);
        loff_t from = HEADER, to = p->at;
        for (off_t left = len; left > 0;) {
            ssize_t n = splice(in, &from, pipe_fds[1], NULL, left < (1 << 20) ? left : (1 << 20), 0);
            if (n <= 0) fail("splice in");
            for (ssize_t m = n; m > 0;) {
                ssize_t k = splice(pipe_fds[0], NULL, out, &to, m, 0);
                if (k <= 0) fail("splice out");
                m -= k;
            }
            left -= n;
        }
        close(pipe_fds[0]);
        close(pipe_fds[1]);
    } else if (!strcmp(method, "rw")) {
        static char buffer[1 << 20];
        for (off_t done = 0; done < len;) {
            ssize_t n = pread(in, buffer, sizeof buffer, HEADER + done);
            if (n <= 0) fail("pread");
            if (pwrite(out, buffer, n, p->at + done) != n) fail("pwrite");
            done += n;
        }
    } else if (!strcmp(method, "mmap2")) {
        for (off_t done = 0; done < len; done += WINDOW) {
            size_t n = len - done < WINDOW ? len - done : WINDOW;
            off_t to = p->at + done, to_page = to & ~4095L, from = HEADER + done,
                  from_page = from & ~4095L;
            char *dst = mmap(0, n + (to - to_page), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_POPULATE, out, to_page);
            char *src = mmap(0, n + (from - from_page), PROT_READ, MAP_PRIVATE | MAP_POPULATE,
                             in, from_page);
            if (dst == MAP_FAILED || src == MAP_FAILED) fail("mmap");
            memcpy(dst + (to - to_page), src + (from - from_page), n);
            munmap(src, n + (from - from_page));
            munmap(dst, n + (to - to_page));
        }
    } else {
        fprintf(stderr, "unknown method %s\n", method);
        exit(2);
    }
    close(in);
}

static void *copy_thread(void *p) {
    copy_part(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: copy_methods METHOD OUT IN1 IN2\n");
        return 2;
    }
    method = argv[1];
    out = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (out < 0) fail(argv[2]);
    char header[HEADER] = {0};
    if (pwrite(out, header, HEADER, 0) != HEADER) fail("pwrite");
    struct part parts[2] = {{argv[3], HEADER}, {argv[4], HEADER + data_len(argv[3])}};
    if (!strcmp(method, "cfr2") || !strcmp(method, "mmap2")) {
        if (ftruncate(out, parts[1].at + data_len(argv[4])) != 0) fail("ftruncate");
        pthread_t threads[2];
        for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, copy_thread, &parts[i]);
        for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    } else {
        for (int i = 0; i < 2; i++) copy_part(&parts[i]);
    }
    return close(out) != 0;
}
