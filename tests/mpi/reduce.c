/*
 * reduce.c: MPI_Reduce and MPI_Allreduce for every predefined operation on every C type it is
 * defined for (MPI 3.1 section 5.9.2), each element checked against the serial result computed
 * here, plus MPI_IN_PLACE and every root. The values are small integers so that sums and
 * products are exact in every type and in every order the library may combine them.
 *
 * Unsigned types get no negative values here: MPICH 4.0.2 (Debian 12's) compares unsigned
 * integers as signed in MPI_MAX and MPI_MIN (pmodels/mpich issue 6083), and this program's
 * output is what the two libraries must agree on. unsigned_minmax.c tests the high-bit values.
 */
#include "common.h"
#include <stdbool.h>
#include <stdint.h>

/* SERIAL's PROD line is compiled for C_BOOL too (which only runs the logical operations). */
#pragma GCC diagnostic ignored "-Wint-in-bool-context"

#define N 8
#define COUNT 5

/* Rank r's element i for each kind of operation. */
static int v_arith(int r, int i) { return (r + i) % 4 == 0 ? 2 : ((r + i) % 4 == 1 ? -1 : (r * 3 + i) % 4); }
/* 0 is false, 1 and 2 true; element 0 is true everywhere, element 1 false everywhere. */
static int v_logic(int r, int i) { return i == 0 ? 1 + r % 2 : i == 1 ? 0 : (r * 5 + i) % 3; }
/* Bit 6 is set everywhere, so MPI_BAND has something to keep. */
static int v_bits(int r, int i) { return (1 << ((r + i) % 6)) | r | 0x40; }

enum kind { ARITH, LOGIC, BITS };

static const char *op_name(MPI_Op op)
{
    if (op == MPI_MAX) return "MAX";
    if (op == MPI_MIN) return "MIN";
    if (op == MPI_SUM) return "SUM";
    if (op == MPI_PROD) return "PROD";
    if (op == MPI_LAND) return "LAND";
    if (op == MPI_LOR) return "LOR";
    if (op == MPI_LXOR) return "LXOR";
    if (op == MPI_BAND) return "BAND";
    if (op == MPI_BOR) return "BOR";
    if (op == MPI_BXOR) return "BXOR";
    return "?";
}

/* Tests one (type, op) pair: allreduce, reduce to a root that moves with the op, and allreduce
 * in place; prints rank 0's result. T is the C type, PR how to print one element (as long long
 * or double). */
#define SERIAL(T, SIGNED_, op, kind, i, acc)                                                              \
    do {                                                                                          \
        int r_;                                                                                   \
        for (r_ = 0; r_ < N; r_++) {                                                              \
            T x_ = (T)value_of(kind, r_, i, SIGNED_);                                                         \
            if (r_ == 0) { acc = x_; continue; }                                                  \
            if (op == MPI_MAX) acc = acc > x_ ? acc : x_;                                         \
            else if (op == MPI_MIN) acc = acc < x_ ? acc : x_;                                    \
            else if (op == MPI_SUM) acc = (T)(acc + x_);                                          \
            else if (op == MPI_PROD) acc = (T)(acc * x_);                                         \
            else if (op == MPI_LAND) acc = (T)(acc && x_);                                        \
            else if (op == MPI_LOR) acc = (T)(acc || x_);                                         \
            else if (op == MPI_LXOR) acc = (T)(!acc != !x_);                                      \
            else acc = bitop(op, acc, x_);                                                        \
        }                                                                                         \
    } while (0)

static int value_of(enum kind k, int r, int i, int is_signed)
{
    int v = k == ARITH ? v_arith(r, i) : k == LOGIC ? v_logic(r, i) : v_bits(r, i);
    return v < 0 && !is_signed ? 3 : v;
}

#define DEFINE_TEST(fn, T, SIGNED_, PRINT_T, FMT)                                                  \
    static void fn(const char *tname, MPI_Datatype dt, MPI_Op op, enum kind k, int root)          \
    {                                                                                             \
        T in[COUNT], outv[COUNT], red[COUNT], inplace[COUNT], want[COUNT];                        \
        int i, bad = 0;                                                                           \
        char line[256];                                                                           \
        int len;                                                                                  \
        for (i = 0; i < COUNT; i++) {                                                             \
            in[i] = (T)value_of(k, my_rank, i, SIGNED_);                                                      \
            inplace[i] = in[i];                                                                   \
            outv[i] = red[i] = (T)99;                                                             \
            SERIAL(T, SIGNED_, op, k, i, want[i]);                                                         \
        }                                                                                         \
        MPI_Allreduce(in, outv, COUNT, dt, op, MPI_COMM_WORLD);                                   \
        MPI_Reduce(in, red, COUNT, dt, op, root, MPI_COMM_WORLD);                                 \
        MPI_Allreduce(MPI_IN_PLACE, inplace, COUNT, dt, op, MPI_COMM_WORLD);                      \
        for (i = 0; i < COUNT; i++) {                                                             \
            bad += outv[i] != want[i];                                                            \
            bad += inplace[i] != want[i];                                                         \
            if (my_rank == root)                                                                  \
                bad += red[i] != want[i];                                                         \
            else                                                                                  \
                bad += red[i] != (T)99; /* non-roots' receive buffers are not written */          \
            bad += in[i] != (T)value_of(k, my_rank, i, SIGNED_);                                              \
        }                                                                                         \
        check(bad == 0, "reduction matches the serial result");                                   \
        if (bad)                                                                                  \
            out("%s %s: %d bad", op_name(op), tname, bad);                                        \
        if (my_rank == 0) {                                                                       \
            len = snprintf(line, sizeof line, "%s %s root %d:", op_name(op), tname, root);        \
            for (i = 0; i < COUNT; i++)                                                           \
                len += snprintf(line + len, sizeof line - (size_t)len, " " FMT, (PRINT_T)outv[i]); \
            out("%s", line);                                                                      \
        }                                                                                         \
    }

/* Bitwise operations exist only for integers; for floating types this is never called. */
static long long bitop(MPI_Op op, long long a, long long b)
{
    return op == MPI_BAND ? (a & b) : op == MPI_BOR ? (a | b) : (a ^ b);
}
static double bitop_d(MPI_Op op, double a, double b) { (void)op; (void)b; return a; }

DEFINE_TEST(t_schar, signed char, 1, long long, "%lld")
DEFINE_TEST(t_uchar, unsigned char, 0, long long, "%lld")
DEFINE_TEST(t_short, short, 1, long long, "%lld")
DEFINE_TEST(t_ushort, unsigned short, 0, long long, "%lld")
DEFINE_TEST(t_int, int, 1, long long, "%lld")
DEFINE_TEST(t_uint, unsigned, 0, long long, "%lld")
DEFINE_TEST(t_long, long, 1, long long, "%lld")
DEFINE_TEST(t_ulong, unsigned long, 0, long long, "%lld")
DEFINE_TEST(t_llong, long long, 1, long long, "%lld")
DEFINE_TEST(t_ullong, unsigned long long, 0, long long, "%lld")
DEFINE_TEST(t_i8, int8_t, 1, long long, "%lld")
DEFINE_TEST(t_i16, int16_t, 1, long long, "%lld")
DEFINE_TEST(t_i32, int32_t, 1, long long, "%lld")
DEFINE_TEST(t_i64, int64_t, 1, long long, "%lld")
DEFINE_TEST(t_u8, uint8_t, 0, long long, "%lld")
DEFINE_TEST(t_u16, uint16_t, 0, long long, "%lld")
DEFINE_TEST(t_u32, uint32_t, 0, long long, "%lld")
DEFINE_TEST(t_u64, uint64_t, 0, long long, "%lld")
DEFINE_TEST(t_bool, bool, 0, long long, "%lld")
DEFINE_TEST(t_byte, unsigned char, 0, long long, "%lld")
#undef bitop
#define bitop bitop_d
DEFINE_TEST(t_float, float, 1, double, "%g")
DEFINE_TEST(t_double, double, 1, double, "%g")
DEFINE_TEST(t_ldouble, long double, 1, double, "%g")
#undef bitop

typedef void (*test_fn)(const char *, MPI_Datatype, MPI_Op, enum kind, int);

static const MPI_Op arith_ops[] = {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD};
static const MPI_Op logic_ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
static const MPI_Op bit_ops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};

static int root_turn;

static void run_ops(test_fn fn, const char *name, MPI_Datatype dt, const MPI_Op *ops, int nops, enum kind k)
{
    int i;
    for (i = 0; i < nops; i++)
        fn(name, dt, ops[i], k, root_turn++ % N);
}

/* An integer type takes arithmetic, logical and bitwise operations. */
static void integer(test_fn fn, const char *name, MPI_Datatype dt)
{
    run_ops(fn, name, dt, arith_ops, 4, ARITH);
    run_ops(fn, name, dt, logic_ops, 3, LOGIC);
    run_ops(fn, name, dt, bit_ops, 3, BITS);
}

/* MAXLOC and MINLOC on the pair types: value (r * 3) % 5 - 2 has ties, which go to the lower
 * index; the index is the rank. */
#define DEFINE_PAIR(fn, VT, PRINT_T, FMT)                                                         \
    static void fn(const char *tname, MPI_Datatype dt, MPI_Op op, int root)                       \
    {                                                                                             \
        struct { VT value; int index; } in[COUNT], res[COUNT], red[COUNT], want[COUNT];          \
        int i, r, bad = 0, len;                                                                   \
        char line[256];                                                                           \
        for (i = 0; i < COUNT; i++) {                                                             \
            in[i].value = (VT)(((my_rank + i) * 3) % 5 - 2);                                      \
            in[i].index = my_rank * 10 + i;                                                       \
            red[i].value = (VT)99;                                                                \
            red[i].index = 99;                                                                    \
            for (r = 0; r < N; r++) {                                                             \
                VT v = (VT)(((r + i) * 3) % 5 - 2);                                               \
                int better = op == MPI_MAXLOC ? v > want[i].value : v < want[i].value;           \
                if (r == 0 || better || (v == want[i].value && r * 10 + i < want[i].index)) {     \
                    want[i].value = v;                                                            \
                    want[i].index = r * 10 + i;                                                   \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        MPI_Allreduce(in, res, COUNT, dt, op, MPI_COMM_WORLD);                                    \
        MPI_Reduce(in, red, COUNT, dt, op, root, MPI_COMM_WORLD);                                 \
        for (i = 0; i < COUNT; i++) {                                                             \
            bad += res[i].value != want[i].value || res[i].index != want[i].index;                \
            if (my_rank == root)                                                                  \
                bad += red[i].value != want[i].value || red[i].index != want[i].index;            \
        }                                                                                         \
        check(bad == 0, "loc reduction matches the serial result");                               \
        if (bad)                                                                                  \
            out("%s %s: %d bad", op == MPI_MAXLOC ? "MAXLOC" : "MINLOC", tname, bad);             \
        if (my_rank == 0) {                                                                       \
            len = snprintf(line, sizeof line, "%s %s root %d:", op == MPI_MAXLOC ? "MAXLOC" : "MINLOC", tname, root); \
            for (i = 0; i < COUNT; i++)                                                           \
                len += snprintf(line + len, sizeof line - (size_t)len, " (" FMT ",%d)",           \
                                (PRINT_T)res[i].value, res[i].index);                             \
            out("%s", line);                                                                      \
        }                                                                                         \
    }

DEFINE_PAIR(p_2int, int, long long, "%lld")
DEFINE_PAIR(p_float_int, float, double, "%g")
DEFINE_PAIR(p_double_int, double, double, "%g")
DEFINE_PAIR(p_long_int, long, long long, "%lld")
DEFINE_PAIR(p_short_int, short, long long, "%lld")
DEFINE_PAIR(p_ldouble_int, long double, double, "%g")

int main(int argc, char **argv)
{
    start(&argc, &argv);
    check(world_size == N, "run with 8 ranks");

    integer(t_schar, "SIGNED_CHAR", MPI_SIGNED_CHAR);
    integer(t_uchar, "UNSIGNED_CHAR", MPI_UNSIGNED_CHAR);
    integer(t_short, "SHORT", MPI_SHORT);
    integer(t_ushort, "UNSIGNED_SHORT", MPI_UNSIGNED_SHORT);
    integer(t_int, "INT", MPI_INT);
    integer(t_uint, "UNSIGNED", MPI_UNSIGNED);
    integer(t_long, "LONG", MPI_LONG);
    integer(t_ulong, "UNSIGNED_LONG", MPI_UNSIGNED_LONG);
    integer(t_llong, "LONG_LONG", MPI_LONG_LONG);
    integer(t_ullong, "UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG);
    integer(t_i8, "INT8_T", MPI_INT8_T);
    integer(t_i16, "INT16_T", MPI_INT16_T);
    integer(t_i32, "INT32_T", MPI_INT32_T);
    integer(t_i64, "INT64_T", MPI_INT64_T);
    integer(t_u8, "UINT8_T", MPI_UINT8_T);
    integer(t_u16, "UINT16_T", MPI_UINT16_T);
    integer(t_u32, "UINT32_T", MPI_UINT32_T);
    integer(t_u64, "UINT64_T", MPI_UINT64_T);
    run_ops(t_bool, "C_BOOL", MPI_C_BOOL, logic_ops, 3, LOGIC);
    run_ops(t_byte, "BYTE", MPI_BYTE, bit_ops, 3, BITS);
    run_ops(t_float, "FLOAT", MPI_FLOAT, arith_ops, 4, ARITH);
    run_ops(t_double, "DOUBLE", MPI_DOUBLE, arith_ops, 4, ARITH);
    run_ops(t_ldouble, "LONG_DOUBLE", MPI_LONG_DOUBLE, arith_ops, 4, ARITH);

    {
        int i;
        for (i = 0; i < 2; i++) {
            MPI_Op op = i ? MPI_MINLOC : MPI_MAXLOC;
            p_2int("2INT", MPI_2INT, op, root_turn++ % N);
            p_float_int("FLOAT_INT", MPI_FLOAT_INT, op, root_turn++ % N);
            p_double_int("DOUBLE_INT", MPI_DOUBLE_INT, op, root_turn++ % N);
            p_long_int("LONG_INT", MPI_LONG_INT, op, root_turn++ % N);
            p_short_int("SHORT_INT", MPI_SHORT_INT, op, root_turn++ % N);
            p_ldouble_int("LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, op, root_turn++ % N);
        }
    }

    return finish("reduce");
}
