/* lwktest: a static Linux program for the Kestrel Linux personality (docs/adr/0034).
 * It uses stdio, malloc, files, time and libm, and prints only what must be the same
 * on Kestrel, in a Linux VM and under qemu-ppc-static -cpu 440epb (no absolute times).
 * Build: powerpc-linux-gnu-gcc -static -mcpu=440fp -O2 -o lwktest lwktest.c -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

static double kahan_pi(int n) {
    double s = 0.0, c = 0.0;
    for (int k = 0; k < n; k++) {
        double y = (k % 2 ? -4.0 : 4.0) / (2.0 * k + 1.0) - c;
        double t = s + y;
        c = (t - s) - y;
        s = t;
    }
    return s;
}

int main(int argc, char **argv) {
    printf("argc %d, argv[0] ends in %s\n", argc, strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0]);

    /* malloc: many sizes, some large enough for mmap, checked contents */
    unsigned long sum = 0;
    for (int round = 0; round < 4; round++) {
        size_t n = (size_t)1 << (10 + 3 * round); /* 1 KiB .. 512 KiB */
        unsigned char *p = malloc(n);
        if (!p) { printf("malloc(%zu) failed\n", n); return 1; }
        for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7 + round);
        for (size_t i = 0; i < n; i += 97) sum += p[i];
        free(p);
    }
    printf("malloc checksum %lu\n", sum);

    /* libm and the FPU */
    printf("sqrt(2) = %.15f\n", sqrt(2.0));
    printf("exp(1) = %.15f, log(10) = %.15f\n", exp(1.0), log(10.0));
    printf("sin(0.5) = %.15f, cos(0.5) = %.15f, atan2(1,2) = %.15f\n", sin(0.5), cos(0.5), atan2(1.0, 2.0));
    printf("pow(1.5, 20.25) = %.10e\n", pow(1.5, 20.25));
    printf("pi (Leibniz, 100000 terms, Kahan) = %.12f\n", kahan_pi(100000));
    float f = 1.0f;
    for (int i = 0; i < 30; i++) f = f * 1.1f + 0.25f;
    printf("float recurrence = %.6e\n", (double)f);

    /* files: write, read back, seek, append, unlink */
    FILE *out = fopen("results.txt", "w");
    if (!out) { printf("fopen for writing failed\n"); return 1; }
    for (int i = 1; i <= 10; i++) fprintf(out, "row %2d %10.6f\n", i, sqrt((double)i));
    fclose(out);
    FILE *in = fopen("results.txt", "r");
    if (!in) { printf("fopen for reading failed\n"); return 1; }
    char line[64];
    int rows = 0;
    double total = 0;
    while (fgets(line, sizeof line, in)) {
        int r; double v;
        if (sscanf(line, "row %d %lf", &r, &v) == 2) { rows++; total += v; }
    }
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fclose(in);
    printf("file: %d rows, sum %.6f, %ld bytes\n", rows, total, size);
    out = fopen("results.txt", "a");
    fputs("end\n", out);
    fclose(out);
    in = fopen("results.txt", "r");
    fseek(in, -4, SEEK_END);
    printf("tail: %s", fgets(line, sizeof line, in));
    fclose(in);
    FILE *tmp = fopen("scratch.bin", "w");
    fputs("gone", tmp);
    fclose(tmp);
    printf("unlink scratch.bin: %d, reopen: %s\n", unlink("scratch.bin"), fopen("scratch.bin", "r") ? "found" : "not found");

    /* time: monotonic, and a short sleep that must take at least its time */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("time: monotonic advanced %s, slept at least 20 ms: %s, gettimeofday ok: %s\n",
           dt > 0 ? "yes" : "no", dt >= 0.020 ? "yes" : "no", tv.tv_usec < 1000000 ? "yes" : "no");

    /* stderr too */
    fprintf(stderr, "lwktest: done\n");
    printf("done\n");
    return 0;
}
