/*
 * deadlock.c: every rank waits in MPI_Recv for a message that nobody sends. Kestrel's library
 * notices that no rank makes progress (KESTREL_MPI_DEADLOCK_SECONDS, set here to 5 before
 * MPI_Init; rank r waits r seconds longer, so rank 0 speaks first) and, under the default
 * MPI_ERRORS_ARE_FATAL, ends the job with one line naming the rank and the call it waits in.
 * Kestrel only: MPICH would wait forever (tests/framework/mpioracle.py leaves it out).
 */
#define _POSIX_C_SOURCE 200112L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, v;
    setenv("KESTREL_MPI_DEADLOCK_SECONDS", "5", 1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("deadlock: every rank receives what nobody sends\n");
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("deadlock: rank %d was not stopped\n", rank);
    MPI_Finalize();
    return 0;
}
