/*
 * collectives.c: MPI_Barrier separation, MPI_Bcast, MPI_Gather, MPI_Scatter, MPI_Allgather and
 * MPI_Alltoall from every root, with MPI_IN_PLACE where MPI allows it, and the same on
 * communicators made by MPI_Comm_dup and MPI_Comm_split (then MPI_Comm_free).
 */
#include "common.h"

#define N 8

/* Barrier separation: a message sent after the barrier by every rank must not be visible to a
 * rank before it entered the barrier. Rank r sends to r+1 after the barrier; the receiver
 * checks with MPI_Iprobe before the barrier that nothing has come, and receives after. */
static void barrier_separation(MPI_Comm comm, const char *label)
{
    int rank, size, flag = 1, v, rounds, early = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (rounds = 0; rounds < 5; rounds++) {
        MPI_Iprobe(MPI_ANY_SOURCE, 600 + rounds, comm, &flag, MPI_STATUS_IGNORE);
        early += flag;
        MPI_Barrier(comm);
        v = rank * 10 + rounds;
        MPI_Send(&v, 1, MPI_INT, (rank + 1) % size, 600 + rounds, comm);
        MPI_Recv(&v, 1, MPI_INT, (rank + size - 1) % size, 600 + rounds, comm, MPI_STATUS_IGNORE);
        check(v == ((rank + size - 1) % size) * 10 + rounds, "barrier round payload");
    }
    check(early == 0, "nothing arrives before the barrier that precedes its send");
    out("%s barrier: 5 rounds, %d early messages", label, early);
}

static void collectives_on(MPI_Comm comm, const char *label)
{
    int rank, size, root, i, j, bad;
    int a[N * 4], b[N * 4];
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    barrier_separation(comm, label);

    bad = 0;
    for (root = 0; root < size; root++) {
        for (i = 0; i < 5; i++)
            a[i] = rank == root ? root * 100 + i : -1;
        MPI_Bcast(a, 5, MPI_INT, root, comm);
        for (i = 0; i < 5; i++)
            bad += a[i] != root * 100 + i;
    }
    check(bad == 0, "bcast from every root");
    out("%s bcast: every root, %d bad", label, bad);

    bad = 0;
    for (root = 0; root < size; root++) {
        a[0] = rank * 2 + root;
        a[1] = rank * 2 + root + 1;
        for (i = 0; i < 2 * size; i++)
            b[i] = -1;
        MPI_Gather(a, 2, MPI_INT, b, 2, MPI_INT, root, comm);
        if (rank == root)
            for (i = 0; i < size; i++)
                bad += b[2 * i] != i * 2 + root || b[2 * i + 1] != i * 2 + root + 1;
        /* In place at the root: its own block is already in the receive buffer. */
        for (i = 0; i < 2 * size; i++)
            b[i] = rank == root && i / 2 == root ? 7000 + i : -1;
        MPI_Gather(rank == root ? MPI_IN_PLACE : a, 2, MPI_INT, b, 2, MPI_INT, root, comm);
        if (rank == root)
            for (i = 0; i < size; i++)
                bad += b[2 * i] != (i == root ? 7000 + 2 * i : i * 2 + root);
    }
    check(bad == 0, "gather to every root");
    out("%s gather: every root, %d bad", label, bad);

    bad = 0;
    for (root = 0; root < size; root++) {
        if (rank == root)
            for (i = 0; i < 3 * size; i++)
                a[i] = root * 1000 + i;
        b[0] = b[1] = b[2] = -1;
        MPI_Scatter(a, 3, MPI_INT, b, 3, MPI_INT, root, comm);
        for (i = 0; i < 3; i++)
            bad += b[i] != root * 1000 + rank * 3 + i;
    }
    check(bad == 0, "scatter from every root");
    out("%s scatter: every root, %d bad", label, bad);

    bad = 0;
    a[0] = rank * rank;
    for (i = 0; i < size; i++)
        b[i] = -1;
    MPI_Allgather(a, 1, MPI_INT, b, 1, MPI_INT, comm);
    for (i = 0; i < size; i++)
        bad += b[i] != i * i;
    for (i = 0; i < size; i++)
        b[i] = i == rank ? rank + 500 : -1;
    MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, b, 1, MPI_INT, comm);
    for (i = 0; i < size; i++)
        bad += b[i] != i + 500;
    check(bad == 0, "allgather");
    out("%s allgather: %d %d ... %d, %d bad", label, b[0], b[1], b[size - 1], bad);

    bad = 0;
    for (i = 0; i < size; i++)
        for (j = 0; j < 2; j++)
            a[2 * i + j] = rank * 100 + i * 10 + j;
    MPI_Alltoall(a, 2, MPI_INT, b, 2, MPI_INT, comm);
    for (i = 0; i < size; i++)
        for (j = 0; j < 2; j++)
            bad += b[2 * i + j] != i * 100 + rank * 10 + j;
    check(bad == 0, "alltoall");
    out("%s alltoall: %d bad", label, bad);

    /* Bcast of a large buffer (the collective's long-message path). */
    {
        int n = 256 * 1024, *big = malloc((size_t)n * sizeof *big);
        for (i = 0; i < n; i++)
            big[i] = rank == 0 ? i ^ 0x5a5a : 0;
        MPI_Bcast(big, n, MPI_INT, 0, comm);
        bad = 0;
        for (i = 0; i < n; i++)
            bad += big[i] != (i ^ 0x5a5a);
        check(bad == 0, "large bcast");
        out("%s bcast 1 MiB: %d bad", label, bad);
        free(big);
    }
}

int main(int argc, char **argv)
{
    MPI_Comm dup, half, none;
    int rank, size, v, sum;
    start(&argc, &argv);
    check(world_size == N, "run with 8 ranks");

    collectives_on(MPI_COMM_WORLD, "world");

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_rank(dup, &rank);
    MPI_Comm_size(dup, &size);
    check(rank == my_rank && size == N, "dup keeps ranks");
    /* A message on the dup is not received on world: same tag, different communicator. */
    if (my_rank == 0) {
        v = 1;
        MPI_Send(&v, 1, MPI_INT, 1, 5, dup);
        v = 2;
        MPI_Send(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
    } else if (my_rank == 1) {
        MPI_Recv(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(v == 2, "world receive gets world's message");
        MPI_Recv(&v, 1, MPI_INT, 0, 5, dup, MPI_STATUS_IGNORE);
        check(v == 1, "dup receive gets dup's message");
        out("dup: contexts kept apart");
    }
    collectives_on(dup, "dup");
    MPI_Comm_free(&dup);
    check(dup == MPI_COMM_NULL, "free sets MPI_COMM_NULL");

    /* Split by parity, ordered by descending world rank within each half. */
    MPI_Comm_split(MPI_COMM_WORLD, my_rank % 2, -my_rank, &half);
    MPI_Comm_rank(half, &rank);
    MPI_Comm_size(half, &size);
    check(size == N / 2 && rank == (N - 1 - my_rank) / 2, "split rank order follows the key");
    out("split: color %d rank %d of %d", my_rank % 2, rank, size);
    v = my_rank;
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, half);
    check(sum == (my_rank % 2 ? 1 + 3 + 5 + 7 : 0 + 2 + 4 + 6), "allreduce on the half");
    out("split: sum over my half %d", sum);
    collectives_on(half, my_rank % 2 ? "odd" : "even");
    MPI_Comm_free(&half);

    /* MPI_UNDEFINED as color gives MPI_COMM_NULL. */
    MPI_Comm_split(MPI_COMM_WORLD, my_rank < 2 ? 0 : MPI_UNDEFINED, 0, &none);
    check((my_rank < 2) == (none != MPI_COMM_NULL), "split with MPI_UNDEFINED");
    if (none != MPI_COMM_NULL) {
        MPI_Comm_size(none, &size);
        out("split undefined: in a communicator of %d", size);
        MPI_Comm_free(&none);
    } else {
        out("split undefined: MPI_COMM_NULL");
    }

    return finish("collectives");
}
