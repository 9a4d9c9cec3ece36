/*
 * errors.c: the environment calls (MPI_Init_thread, MPI_Query_thread, MPI_Initialized,
 * MPI_Finalized, MPI_Wtime, MPI_Wtick, MPI_Get_processor_name, MPI_Get_version,
 * MPI_Type_size, MPI_Error_string, MPI_Error_class) and the error cases with
 * MPI_ERRORS_RETURN on MPI_COMM_WORLD: each prints the error class it got, by name. Last, the
 * table of which predefined operation accepts which predefined datatype.
 */
#include "common.h"
#include <stdbool.h>
#include <stdint.h>

struct named { const char *name; MPI_Datatype dt; int size; };

#define T(name, type) {#name, name, (int)sizeof(type)}
static const struct named types[] = {
    T(MPI_CHAR, char), T(MPI_SIGNED_CHAR, signed char), T(MPI_UNSIGNED_CHAR, unsigned char),
    T(MPI_BYTE, unsigned char), T(MPI_SHORT, short), T(MPI_UNSIGNED_SHORT, unsigned short),
    T(MPI_INT, int), T(MPI_UNSIGNED, unsigned), T(MPI_LONG, long),
    T(MPI_UNSIGNED_LONG, unsigned long), T(MPI_LONG_LONG, long long),
    T(MPI_UNSIGNED_LONG_LONG, unsigned long long), T(MPI_FLOAT, float), T(MPI_DOUBLE, double),
    T(MPI_LONG_DOUBLE, long double), T(MPI_C_BOOL, bool), T(MPI_INT8_T, int8_t),
    T(MPI_INT16_T, int16_t), T(MPI_INT32_T, int32_t), T(MPI_INT64_T, int64_t),
    T(MPI_UINT8_T, uint8_t), T(MPI_UINT16_T, uint16_t), T(MPI_UINT32_T, uint32_t),
    T(MPI_UINT64_T, uint64_t),
    /* A pair type's size is its data, value and index, without the struct's padding (its
     * extent is the struct's sizeof). */
    {"MPI_2INT", MPI_2INT, 2 * (int)sizeof(int)},
    {"MPI_FLOAT_INT", MPI_FLOAT_INT, (int)(sizeof(float) + sizeof(int))},
    {"MPI_DOUBLE_INT", MPI_DOUBLE_INT, (int)(sizeof(double) + sizeof(int))},
    {"MPI_LONG_INT", MPI_LONG_INT, (int)(sizeof(long) + sizeof(int))},
    {"MPI_SHORT_INT", MPI_SHORT_INT, (int)(sizeof(short) + sizeof(int))},
    {"MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, (int)(sizeof(long double) + sizeof(int))},
};
#define NTYPES ((int)(sizeof types / sizeof types[0]))

static const struct { const char *name; MPI_Op op; } ops[] = {
    {"MPI_MAX", MPI_MAX}, {"MPI_MIN", MPI_MIN}, {"MPI_SUM", MPI_SUM}, {"MPI_PROD", MPI_PROD},
    {"MPI_LAND", MPI_LAND}, {"MPI_BAND", MPI_BAND}, {"MPI_LOR", MPI_LOR}, {"MPI_BOR", MPI_BOR},
    {"MPI_LXOR", MPI_LXOR}, {"MPI_BXOR", MPI_BXOR}, {"MPI_MINLOC", MPI_MINLOC},
    {"MPI_MAXLOC", MPI_MAXLOC},
};

static void expect_class(int rc, int want, const char *what)
{
    int cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    else
        cls = MPI_SUCCESS;
    check(cls == want, what);
    out("%s: %s", what, err_class_name(rc));
}

int main(int argc, char **argv)
{
    int flag = -1, provided = -1, queried = -1, rc, i, j, v, len;
    int buf[16];
    MPI_Status st;

    MPI_Initialized(&flag);
    check(flag == 0, "MPI_Initialized before MPI_Init_thread is 0");
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Query_thread(&queried);
    check(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "provided is a thread level");
    check(queried == provided, "MPI_Query_thread answers what MPI_Init_thread provided");
    MPI_Initialized(&flag);
    check(flag == 1, "MPI_Initialized after init");
    MPI_Finalized(&flag);
    check(flag == 0, "MPI_Finalized before finalize");
    out("init_thread: provided is a level, query_thread agrees: %s", queried == provided ? "yes" : "no");

    {
        double t0 = MPI_Wtime(), t1, tick = MPI_Wtick();
        volatile double x = 0;
        for (i = 0; i < 100000; i++)
            x += i;
        t1 = MPI_Wtime();
        check(t1 >= t0 && tick > 0 && tick < 1, "wtime monotonic, wtick in (0, 1)");
        out("wtime monotonic and wtick in (0, 1): %s", t1 >= t0 && tick > 0 && tick < 1 ? "yes" : "no");
    }
    {
        char name[MPI_MAX_PROCESSOR_NAME];
        MPI_Get_processor_name(name, &len);
        check(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len, "processor name");
        out("processor name: length in range: %s", len > 0 && len < MPI_MAX_PROCESSOR_NAME ? "yes" : "no");
    }
    {
        int ver = -1, sub = -1;
        MPI_Get_version(&ver, &sub);
        check(ver == MPI_VERSION && sub == MPI_SUBVERSION, "version matches mpi.h");
        out("get_version matches mpi.h: %s", ver == MPI_VERSION && sub == MPI_SUBVERSION ? "yes" : "no");
    }
    {
        int bad = 0, size;
        for (i = 0; i < NTYPES; i++) {
            MPI_Type_size(types[i].dt, &size);
            if (size != types[i].size) {
                bad++;
                out("type_size %s: %d, sizeof %d", types[i].name, size, types[i].size);
            }
        }
        check(bad == 0, "MPI_Type_size is the C sizeof (of the members, for pairs)");
        out("type_size equals sizeof for %d types, %d differ", NTYPES, bad);
    }
    {
        int cls, bad = 0;
        char text[MPI_MAX_ERROR_STRING];
        int classes[] = {MPI_SUCCESS, MPI_ERR_BUFFER, MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_TAG,
                         MPI_ERR_COMM, MPI_ERR_RANK, MPI_ERR_ROOT, MPI_ERR_GROUP, MPI_ERR_OP,
                         MPI_ERR_ARG, MPI_ERR_UNKNOWN, MPI_ERR_TRUNCATE, MPI_ERR_OTHER,
                         MPI_ERR_INTERN, MPI_ERR_IN_STATUS, MPI_ERR_PENDING, MPI_ERR_REQUEST};
        for (i = 0; i < (int)(sizeof classes / sizeof classes[0]); i++) {
            MPI_Error_class(classes[i], &cls);
            len = -1;
            text[0] = 0;
            MPI_Error_string(classes[i], text, &len);
            bad += cls != classes[i] || len <= 0 || len >= MPI_MAX_ERROR_STRING || (int)strlen(text) != len;
        }
        check(bad == 0, "error classes are their own class and have a string");
        out("error_class/error_string on %d classes: %d bad", (int)(sizeof classes / sizeof classes[0]), bad);
    }

    /* The error cases. Every rank makes the collective ones; point to point ones by rank. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (my_rank == 0) {
        rc = MPI_Send(buf, 1, MPI_INT, world_size, 1, MPI_COMM_WORLD);
        expect_class(rc, MPI_ERR_RANK, "send to rank size");
        rc = MPI_Send(buf, 1, MPI_INT, -5, 1, MPI_COMM_WORLD);
        expect_class(rc, MPI_ERR_RANK, "send to rank -5");
        rc = MPI_Recv(buf, 1, MPI_INT, world_size + 3, 1, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_ERR_RANK, "receive from rank size+3");
        rc = MPI_Send(buf, -1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        expect_class(rc, MPI_ERR_COUNT, "send of count -1");
        rc = MPI_Recv(buf, -1, MPI_INT, 1, 1, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_ERR_COUNT, "receive of count -1");
        rc = MPI_Send(buf, 1, MPI_DATATYPE_NULL, 1, 1, MPI_COMM_WORLD);
        expect_class(rc, MPI_ERR_TYPE, "send of MPI_DATATYPE_NULL");
        rc = MPI_Send(buf, 1, MPI_INT, 1, -7, MPI_COMM_WORLD);
        expect_class(rc, MPI_ERR_TAG, "send with tag -7");
        rc = MPI_Send(buf, 1, MPI_INT, 1, 1, MPI_COMM_NULL);
        expect_class(rc, MPI_ERR_COMM, "send on MPI_COMM_NULL");
        {
            MPI_Request req;
            rc = MPI_Isend(buf, -3, MPI_INT, 1, 1, MPI_COMM_WORLD, &req);
            expect_class(rc, MPI_ERR_COUNT, "isend of count -3");
            rc = MPI_Irecv(buf, 1, MPI_INT, 99, 1, MPI_COMM_WORLD, &req);
            expect_class(rc, MPI_ERR_RANK, "irecv from rank 99");
        }
        /* Truncation: 10 ints into room for 5. */
        for (i = 0; i < 10; i++)
            buf[i] = i;
        MPI_Send(buf, 10, MPI_INT, 1, 50, MPI_COMM_WORLD);
        /* A 5-byte message read as MPI_INT: MPI_Get_count says MPI_UNDEFINED. */
        MPI_Send(buf, 5, MPI_BYTE, 1, 51, MPI_COMM_WORLD);
    } else if (my_rank == 1) {
        rc = MPI_Recv(buf, 5, MPI_INT, 0, 50, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_ERR_TRUNCATE, "receive of 10 ints into 5");
        rc = MPI_Recv(buf, 8, MPI_BYTE, 0, 51, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_SUCCESS, "receive of 5 bytes");
        MPI_Get_count(&st, MPI_INT, &v);
        check(v == MPI_UNDEFINED, "get_count of 5 bytes as int");
        out("get_count of 5 bytes as MPI_INT: %s", v == MPI_UNDEFINED ? "MPI_UNDEFINED" : "a number");
    }
    rc = MPI_Allreduce(buf, buf + 8, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_OP, "allreduce with MPI_OP_NULL");
    rc = MPI_Allreduce(buf, buf + 8, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_OP, "allreduce of MPI_BAND on MPI_DOUBLE");
    /* Not here, because MPICH 4.0.2 fails them: a reduction of MPI_DATATYPE_NULL answers
     * MPI_ERR_OP (Kestrel: MPI_ERR_TYPE), and a reduction of a negative count or an invalid
     * operation handle crashes it. native/mpi-c tests Kestrel's answers to those. */
    rc = MPI_Bcast(buf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_TYPE, "bcast of MPI_DATATYPE_NULL");
    rc = MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_COUNT, "bcast of count -1");
    rc = MPI_Gather(buf, -1, MPI_INT, buf + 8, 1, MPI_INT, 0, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_COUNT, "gather of count -1");
    rc = MPI_Bcast(buf, 1, MPI_INT, world_size, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_ROOT, "bcast from root size");
    rc = MPI_Reduce(buf, buf + 8, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD);
    expect_class(rc, MPI_ERR_ROOT, "reduce to root -1");
    rc = MPI_Barrier(MPI_COMM_NULL);
    expect_class(rc, MPI_ERR_COMM, "barrier on MPI_COMM_NULL");
    MPI_Barrier(MPI_COMM_WORLD);

    /* Which operation takes which datatype (MPI 3.1 section 5.9.2): MPI_Allreduce of one
     * element, the error class (or success) decides. Rank 0 prints the table. Not probed, where
     * MPICH 4.0.2 departs from the standard: MPI_CHAR (MPICH reduces it like an integer) and
     * the logical operations on floating types (MPICH takes MPI_LXOR on them and fails an
     * assertion on MPI_LAND and MPI_LOR). Kestrel rejects all of those with MPI_ERR_OP. */
    for (j = 0; j < (int)(sizeof ops / sizeof ops[0]); j++) {
        char line[1024];
        int n = snprintf(line, sizeof line, "%s accepts:", ops[j].name);
        for (i = 0; i < NTYPES; i++) {
            long double a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
            int logical = ops[j].op == MPI_LAND || ops[j].op == MPI_LOR || ops[j].op == MPI_LXOR;
            int floating = types[i].dt == MPI_FLOAT || types[i].dt == MPI_DOUBLE || types[i].dt == MPI_LONG_DOUBLE;
            if (types[i].dt == MPI_CHAR || (logical && floating))
                continue;
            rc = MPI_Allreduce(a, b, 1, types[i].dt, ops[j].op, MPI_COMM_WORLD);
            if (rc == MPI_SUCCESS)
                n += snprintf(line + n, sizeof line - (size_t)n, " %s", types[i].name + 4);
            else if (strcmp(err_class_name(rc), "MPI_ERR_OP") != 0)
                out("%s on %s: %s", ops[j].name, types[i].name, err_class_name(rc));
        }
        if (my_rank == 0)
            out("%s", line);
    }

    MPI_Finalized(&flag);
    check(flag == 0, "not finalized before MPI_Finalize");
    rc = finish("errors");
    MPI_Finalized(&flag);
    if (my_rank == 0)
        printf("after MPI_Finalize: MPI_Finalized %d\n", flag);
    return rc || flag != 1;
}
