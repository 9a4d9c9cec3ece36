/*
 * probe_layout.h: the layout half of the ABI drift probe (tests/abi_drift.rs). The build
 * script writes the probe's main() (one line per integer macro of mpi.h) into $OUT_DIR/probe.c,
 * which includes this file for the sizes, field offsets, pointer constants and the size and
 * extent of every predefined datatype, as the C compiler sees them. One "NAME VALUE" per line.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LINE(name, value) printf("%s %lld\n", name, (long long)(value))
#define PAIR(T) struct { T value; int index; }
#define SIZE(dt, T) LINE("size " #dt, sizeof(T))
#define PAIR_SIZE(dt, T) LINE("size " #dt, sizeof(T) + sizeof(int)); LINE("extent " #dt, sizeof(PAIR(T)))

static void print_layout(void)
{
    LINE("sizeof MPI_Status", sizeof(MPI_Status));
    LINE("offsetof MPI_SOURCE", offsetof(MPI_Status, MPI_SOURCE));
    LINE("offsetof MPI_TAG", offsetof(MPI_Status, MPI_TAG));
    LINE("offsetof MPI_ERROR", offsetof(MPI_Status, MPI_ERROR));
    LINE("offsetof kestrel_count", offsetof(MPI_Status, kestrel_count));
    LINE("offsetof kestrel_cancelled", offsetof(MPI_Status, kestrel_cancelled));
    LINE("sizeof MPI_Comm", sizeof(MPI_Comm));
    LINE("sizeof MPI_Datatype", sizeof(MPI_Datatype));
    LINE("sizeof MPI_Op", sizeof(MPI_Op));
    LINE("sizeof MPI_Request", sizeof(MPI_Request));
    LINE("sizeof MPI_Errhandler", sizeof(MPI_Errhandler));
    LINE("pointer MPI_STATUS_IGNORE", (intptr_t)MPI_STATUS_IGNORE);
    LINE("pointer MPI_STATUSES_IGNORE", (intptr_t)MPI_STATUSES_IGNORE);
    LINE("pointer MPI_IN_PLACE", (intptr_t)MPI_IN_PLACE);
    LINE("pointer MPI_BOTTOM", (intptr_t)MPI_BOTTOM);
    SIZE(MPI_CHAR, char);
    SIZE(MPI_SIGNED_CHAR, signed char);
    SIZE(MPI_UNSIGNED_CHAR, unsigned char);
    SIZE(MPI_BYTE, unsigned char);
    SIZE(MPI_SHORT, short);
    SIZE(MPI_UNSIGNED_SHORT, unsigned short);
    SIZE(MPI_INT, int);
    SIZE(MPI_UNSIGNED, unsigned);
    SIZE(MPI_LONG, long);
    SIZE(MPI_UNSIGNED_LONG, unsigned long);
    SIZE(MPI_LONG_LONG_INT, long long);
    SIZE(MPI_UNSIGNED_LONG_LONG, unsigned long long);
    SIZE(MPI_FLOAT, float);
    SIZE(MPI_DOUBLE, double);
    SIZE(MPI_LONG_DOUBLE, long double);
    SIZE(MPI_C_BOOL, bool);
    SIZE(MPI_INT8_T, int8_t);
    SIZE(MPI_INT16_T, int16_t);
    SIZE(MPI_INT32_T, int32_t);
    SIZE(MPI_INT64_T, int64_t);
    SIZE(MPI_UINT8_T, uint8_t);
    SIZE(MPI_UINT16_T, uint16_t);
    SIZE(MPI_UINT32_T, uint32_t);
    SIZE(MPI_UINT64_T, uint64_t);
    PAIR_SIZE(MPI_2INT, int);
    PAIR_SIZE(MPI_FLOAT_INT, float);
    PAIR_SIZE(MPI_DOUBLE_INT, double);
    PAIR_SIZE(MPI_LONG_INT, long);
    PAIR_SIZE(MPI_SHORT_INT, short);
    PAIR_SIZE(MPI_LONG_DOUBLE_INT, long double);
}
