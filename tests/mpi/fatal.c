/*
 * fatal.c: under the default error handler, MPI_ERRORS_ARE_FATAL, an erroneous call (a send to
 * a rank that does not exist) ends the whole job: the launcher exits non-zero, promptly, and no
 * rank reaches the line after it. Rank 0's first line is printed and flushed before.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        printf("fatal: rank 0 sends to rank %d under MPI_ERRORS_ARE_FATAL\n", size);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_Send(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("fatal: rank %d was not stopped\n", rank);
    MPI_Finalize();
    return 0;
}
