/*
 * common.h: the harness shared by the MPI C tests (tests/mpi, one program per file).
 *
 * Each rank writes its lines into a buffer with out() and records checks with check(); at the
 * end, finish() has rank 0 print every rank's lines in rank order, each prefixed "[r] ", and one
 * closing line "NAME: N passed, M failed" summed over the ranks. The output is thus the same
 * text on every run and on every MPI library that behaves alike (MPICH on the host, Kestrel's
 * under QEMU), which is what tests/unit/test_mpi_oracle.py compares. Nothing here prints a
 * handle value, an address, a time or a host name.
 *
 * Written against the MPI standard only, so it builds with MPICH's mpicc and with
 * scripts/kestrel-mpicc alike.
 */
#ifndef KESTREL_MPI_TEST_COMMON_H
#define KESTREL_MPI_TEST_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUT_CAP (64 * 1024)

static char out_buf[OUT_CAP];
static int out_len;
static int checks_passed;
static int checks_failed;
static int my_rank;
static int world_size;

/* Appends one line (the format is given without its newline) to this rank's output. */
static inline void out(const char *fmt, ...)
{
    va_list ap;
    int n;
    if (out_len >= OUT_CAP - 2)
        return;
    va_start(ap, fmt);
    n = vsnprintf(out_buf + out_len, (size_t)(OUT_CAP - 1 - out_len), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    out_len += n;
    if (out_len > OUT_CAP - 2)
        out_len = OUT_CAP - 2;
    out_buf[out_len++] = '\n';
    out_buf[out_len] = 0;
}

/* Records one check; a failure adds a line saying which. */
static inline void check_at(int ok, const char *what, int line)
{
    if (ok) {
        checks_passed++;
    } else {
        checks_failed++;
        out("FAIL line %d: %s", line, what);
    }
}
#define check(cond, what) check_at((cond) != 0, (what), __LINE__)

/* The name of an error class, so outputs compare by meaning, not by number. */
static inline const char *class_name(int cls)
{
    switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_TAG: return "MPI_ERR_TAG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_GROUP: return "MPI_ERR_GROUP";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_UNKNOWN: return "MPI_ERR_UNKNOWN";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    default: return "other-class";
    }
}

static inline const char *err_class_name(int code)
{
    int cls = -1;
    if (code == MPI_SUCCESS)
        return "MPI_SUCCESS";
    MPI_Error_class(code, &cls);
    return class_name(cls);
}

static inline void start(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
}

/* Rank 0 prints every rank's lines in rank order, then the summed verdict; returns the exit
 * status (0 when every check on every rank passed). Calls MPI_Finalize. */
static inline int finish(const char *name)
{
    int counts[2] = {checks_passed, checks_failed};
    int totals[2] = {0, 0};
    int r;
    if (my_rank == 0) {
        fputs("", stdout);
        for (r = 0; r < world_size; r++) {
            char *text = out_buf;
            int len = out_len;
            char *line;
            if (r > 0) {
                MPI_Recv(&len, 1, MPI_INT, r, 9999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                text = malloc((size_t)len + 1);
                MPI_Recv(text, len, MPI_CHAR, r, 9998, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                text[len] = 0;
            }
            for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
                printf("[%d] %s\n", r, line);
            if (r > 0)
                free(text);
        }
    } else {
        MPI_Send(&out_len, 1, MPI_INT, 0, 9999, MPI_COMM_WORLD);
        MPI_Send(out_buf, out_len, MPI_CHAR, 0, 9998, MPI_COMM_WORLD);
    }
    MPI_Reduce(counts, totals, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (my_rank == 0) {
        printf("%s: %d passed, %d failed\n", name, totals[0], totals[1]);
        fflush(stdout);
    }
    MPI_Bcast(totals, 2, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return totals[1] == 0 ? 0 : 1;
}

#endif
