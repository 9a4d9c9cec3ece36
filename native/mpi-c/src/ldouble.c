/*
 * ldouble.c: the reductions on C's long double, MPI_LONG_DOUBLE and MPI_LONG_DOUBLE_INT, for
 * the Rust side of Kestrel's MPI library (src/reduce.rs), which has no type for it: on the
 * PowerPC 440 (Debian's powerpc-linux-gnu gcc) long double is IBM double-double, on an x86_64
 * host the x87 80-bit format. Each function computes inout[i] = in[i] op inout[i] for the
 * predefined operations MPI 3.1 section 5.9.2 allows on the type and returns MPI_SUCCESS, or
 * MPI_ERR_OP for any other operation. The buffers need no alignment (memcpy).
 */
#include <float.h>
#include <mpi.h>
#include <stddef.h>
#include <string.h>

/* Bytes of a long double that hold its value: the x87 format's 10 (its other bytes are
 * padding, which a store leaves as whatever was on the stack), every byte otherwise. */
#if LDBL_MANT_DIG == 64
#define LDOUBLE_VALUE_BYTES 10
#else
#define LDOUBLE_VALUE_BYTES sizeof(long double)
#endif

/* Stores `v` at `out` with its padding zeroed: results are the same bytes on every rank
 * and in every run, so they compare (and checksum) as bytes. */
static void store_ldouble(void *out, long double v)
{
    unsigned char b[sizeof v];
    memcpy(b, &v, sizeof v);
    memset(b + LDOUBLE_VALUE_BYTES, 0, sizeof v - LDOUBLE_VALUE_BYTES);
    memcpy(out, b, sizeof v);
}

struct ldouble_int {
    long double value;
    int index;
};

/* The C layout of the two types, which Rust cannot compute itself. */
const int kestrel_mpi_ldouble_layout[4] = {
    (int)sizeof(long double),
    (int)offsetof(struct { char c; long double v; }, v),
    (int)sizeof(struct ldouble_int),
    (int)offsetof(struct ldouble_int, index),
};

int kestrel_mpi_reduce_long_double(int op, void *inout, const void *in, int count)
{
    int i;
    long double a, b;
    if (op != MPI_MAX && op != MPI_MIN && op != MPI_SUM && op != MPI_PROD)
        return MPI_ERR_OP;
    for (i = 0; i < count; i++) {
        memcpy(&a, (char *)inout + (size_t)i * sizeof a, sizeof a);
        memcpy(&b, (const char *)in + (size_t)i * sizeof b, sizeof b);
        if (op == MPI_MAX)
            a = a > b ? a : b;
        else if (op == MPI_MIN)
            a = a < b ? a : b;
        else if (op == MPI_SUM)
            a = a + b;
        else
            a = a * b;
        store_ldouble((char *)inout + (size_t)i * sizeof a, a);
    }
    return MPI_SUCCESS;
}

int kestrel_mpi_reduce_long_double_int(int op, void *inout, const void *in, int count)
{
    int i;
    struct ldouble_int a, b;
    if (op != MPI_MAXLOC && op != MPI_MINLOC)
        return MPI_ERR_OP;
    for (i = 0; i < count; i++) {
        memcpy(&a, (char *)inout + (size_t)i * sizeof a, sizeof a);
        memcpy(&b, (const char *)in + (size_t)i * sizeof b, sizeof b);
        if (op == MPI_MAXLOC ? b.value > a.value : b.value < a.value) {
            a = b;
        } else if (b.value == a.value && b.index < a.index) {
            a.index = b.index;
        }
        store_ldouble(&a.value, a.value);
        memcpy((char *)inout + (size_t)i * sizeof a, &a, sizeof a);
    }
    return MPI_SUCCESS;
}

/* Conversions for the Rust tests, which cannot write a long double themselves. */
void kestrel_mpi_ldouble_from_double(double value, void *out)
{
    store_ldouble(out, (long double)value);
}

double kestrel_mpi_ldouble_to_double(const void *in)
{
    long double v;
    memcpy(&v, in, sizeof v);
    return (double)v;
}
