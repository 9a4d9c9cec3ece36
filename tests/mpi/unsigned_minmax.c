/*
 * unsigned_minmax.c: MPI_MAX and MPI_MIN on every unsigned integer type with values that have
 * the top bit set, which a library comparing them as signed gets wrong. MPICH 4.0.2 (Debian
 * 12's) does (pmodels/mpich issue 6083), so the oracle expects this program to fail there;
 * its expected output, tests/mpi/expected/unsigned_minmax.out, is the MPI standard's answer.
 */
#include "common.h"
#include <stdint.h>

#define MINMAX(T, dt, name)                                                                       \
    do {                                                                                          \
        T top = (T)~(T)0, x = my_rank == 0 ? top : (T)(my_rank + 1), mx = 0, mn = 0;              \
        MPI_Allreduce(&x, &mx, 1, dt, MPI_MAX, MPI_COMM_WORLD);                                   \
        MPI_Allreduce(&x, &mn, 1, dt, MPI_MIN, MPI_COMM_WORLD);                                   \
        check(mx == top && mn == 2, "unsigned max and min");                                     \
        if (my_rank == 0)                                                                         \
            out("%s: max %s, min %llu", name, mx == top ? "all ones" : "wrong",                   \
                (unsigned long long)mn);                                                          \
    } while (0)

int main(int argc, char **argv)
{
    start(&argc, &argv);
    MINMAX(unsigned char, MPI_UNSIGNED_CHAR, "UNSIGNED_CHAR");
    MINMAX(unsigned short, MPI_UNSIGNED_SHORT, "UNSIGNED_SHORT");
    MINMAX(unsigned, MPI_UNSIGNED, "UNSIGNED");
    MINMAX(unsigned long, MPI_UNSIGNED_LONG, "UNSIGNED_LONG");
    MINMAX(unsigned long long, MPI_UNSIGNED_LONG_LONG, "UNSIGNED_LONG_LONG");
    MINMAX(uint8_t, MPI_UINT8_T, "UINT8_T");
    MINMAX(uint16_t, MPI_UINT16_T, "UINT16_T");
    MINMAX(uint32_t, MPI_UINT32_T, "UINT32_T");
    MINMAX(uint64_t, MPI_UINT64_T, "UINT64_T");
    return finish("unsigned_minmax");
}
