/*
 * abort.c: MPI_Abort from one rank ends every rank, while the others wait in a receive that
 * nothing will match. The launcher must exit non-zero, promptly; rank 0's line, printed and
 * flushed before the barrier, must be in the output. No rank reaches MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, v;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("abort: rank 3 will call MPI_Abort with code 7\n");
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 3)
        MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("abort: rank %d was not stopped\n", rank);
    MPI_Finalize();
    return 0;
}
