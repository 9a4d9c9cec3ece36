/* ranktest: one rank of a Kestrel job (docs/adr/0034-linux-personality.md, `linux.job=`).
 * Each rank reads its rank and the job size from KESTREL_RANK / KESTREL_SIZE, does some
 * floating-point work that depends on its rank (a partial sum of the series for pi over
 * its share of the terms, and sqrt), sleeps a little so the ranks interleave, and prints
 * one line. With argument `crash=R`, rank R writes where nothing is mapped; `exit=R:C`
 * makes rank R exit with code C.
 * Build: powerpc-linux-gnu-gcc -static -mcpu=440fp -O2 -o ranktest ranktest.c -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    const char *r = getenv("KESTREL_RANK"), *n = getenv("KESTREL_SIZE");
    if (!r || !n) {
        fprintf(stderr, "ranktest: no KESTREL_RANK/KESTREL_SIZE: not run as a job\n");
        return 2;
    }
    int rank = atoi(r), size = atoi(n);
    int crash = -1, bad = -1, code = 0;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "crash=", 6))
            crash = atoi(argv[i] + 6);
        else if (!strncmp(argv[i], "exit=", 5))
            sscanf(argv[i] + 5, "%d:%d", &bad, &code);
    }
    printf("rank %d of %d starting\n", rank, size);
    fflush(stdout);
    /* This rank's share of the Leibniz series: terms k = rank, rank + size, ... */
    const int terms = 200000;
    double part = 0.0;
    for (int k = rank; k < terms; k += size)
        part += (k % 2 ? -4.0 : 4.0) / (2.0 * k + 1.0);
    struct timespec ts = {0, 20000000L * (rank + 1)};
    nanosleep(&ts, NULL);
    if (rank == crash) {
        printf("rank %d crashing on purpose\n", rank);
        fflush(stdout);
        *(volatile int *)0x20000000 = rank;
    }
    if (rank == bad)
        return code;
    printf("rank %d of %d: partial %.9f sqrt(rank+1) %.6f\n", rank, size, part, sqrt(rank + 1.0));
    return 0;
}
