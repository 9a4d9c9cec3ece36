/*
 * nonblocking.c: MPI_Isend/MPI_Irecv with 8 ranks, completed in any order: MPI_Wait in reverse
 * order of posting, MPI_Waitall, MPI_Waitany, MPI_Test and MPI_Testall polling loops, and
 * MPI_REQUEST_NULL handling.
 */
#include "common.h"

#define N 8

int main(int argc, char **argv)
{
    int i, r, idx, flag;
    MPI_Status st, sts[2 * N];
    MPI_Request req[2 * N];
    int sbuf[N][4], rbuf[N][4];
    start(&argc, &argv);
    check(world_size == N, "run with 8 ranks");

    /* All to all by hand: N receives then N sends posted; completed by MPI_Wait in reverse. */
    for (r = 0; r < N; r++) {
        MPI_Irecv(rbuf[r], 4, MPI_INT, r, 1, MPI_COMM_WORLD, &req[r]);
    }
    for (r = 0; r < N; r++) {
        for (i = 0; i < 4; i++)
            sbuf[r][i] = 1000 * my_rank + 10 * r + i;
        MPI_Isend(sbuf[r], 4, MPI_INT, r, 1, MPI_COMM_WORLD, &req[N + r]);
    }
    for (i = 2 * N - 1; i >= 0; i--) {
        MPI_Wait(&req[i], &st);
        check(req[i] == MPI_REQUEST_NULL, "wait sets the request to MPI_REQUEST_NULL");
        if (i < N)
            check(st.MPI_SOURCE == i && st.MPI_TAG == 1, "wait status of a receive");
    }
    {
        int bad = 0;
        for (r = 0; r < N; r++)
            for (i = 0; i < 4; i++)
                bad += rbuf[r][i] != 1000 * r + 10 * my_rank + i;
        check(bad == 0, "payloads after reverse-order wait");
        out("wait in reverse order: %d bad values", bad);
    }
    /* Waiting on a null request returns at once with an empty status. */
    {
        MPI_Request nul = MPI_REQUEST_NULL;
        st.MPI_SOURCE = 12345;
        MPI_Wait(&nul, &st);
        check(nul == MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
              "wait on MPI_REQUEST_NULL gives the empty status");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Waitall over receives with distinct tags posted in the opposite order of the sends. */
    for (r = 0; r < N; r++)
        MPI_Irecv(rbuf[r], 4, MPI_INT, MPI_ANY_SOURCE, 100 + r, MPI_COMM_WORLD, &req[r]);
    for (r = N - 1; r >= 0; r--) {
        for (i = 0; i < 4; i++)
            sbuf[r][i] = my_rank * 16 + r;
        MPI_Isend(sbuf[r], 4, MPI_INT, r, 100 + my_rank, MPI_COMM_WORLD, &req[N + r]);
    }
    MPI_Waitall(2 * N, req, sts);
    {
        int bad = 0;
        for (r = 0; r < N; r++) {
            bad += sts[r].MPI_SOURCE != r || sts[r].MPI_TAG != 100 + r;
            bad += rbuf[r][3] != r * 16 + my_rank;
            bad += req[r] != MPI_REQUEST_NULL || req[N + r] != MPI_REQUEST_NULL;
        }
        check(bad == 0, "waitall statuses and payloads");
        out("waitall: %d bad", bad);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Waitany: rank 0 collects one message from every other rank, sent in rank order after a
     * token passes down from rank 7, so the completion order is known: 7, 6, ..., 1. */
    if (my_rank == 0) {
        int order[N];
        for (r = 1; r < N; r++)
            MPI_Irecv(rbuf[r], 1, MPI_INT, r, 200, MPI_COMM_WORLD, &req[r - 1]);
        for (i = 0; i < N - 1; i++) {
            MPI_Waitany(N - 1, req, &idx, &st);
            order[i] = st.MPI_SOURCE;
            check(idx == st.MPI_SOURCE - 1 && rbuf[idx + 1][0] == st.MPI_SOURCE * 3, "waitany index and payload");
            check(req[idx] == MPI_REQUEST_NULL, "waitany nulls the completed request");
            if (i + 1 < N - 1) {
                int token = 1;
                /* Tell the next rank down that it may send. */
                MPI_Send(&token, 1, MPI_INT, st.MPI_SOURCE - 1, 201, MPI_COMM_WORLD);
            }
        }
        out("waitany order: %d %d %d %d %d %d %d", order[0], order[1], order[2], order[3], order[4], order[5], order[6]);
        MPI_Waitany(N - 1, req, &idx, &st);
        check(idx == MPI_UNDEFINED, "waitany with no active request gives MPI_UNDEFINED");
        out("waitany with none active: %s", idx == MPI_UNDEFINED ? "MPI_UNDEFINED" : "other");
    } else {
        int v = my_rank * 3, token;
        if (my_rank != N - 1)
            MPI_Recv(&token, 1, MPI_INT, 0, 201, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&v, 1, MPI_INT, 0, 200, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Test: a receive whose message is sent only after the receiver reports "not yet". */
    {
        int partner = my_rank ^ 1, v = -1, polls = 0, token = 0;
        if (my_rank % 2 == 0) {
            MPI_Irecv(&v, 1, MPI_INT, partner, 300, MPI_COMM_WORLD, &req[0]);
            MPI_Test(&req[0], &flag, &st);
            check(!flag, "test before the send: not complete");
            MPI_Send(&token, 1, MPI_INT, partner, 301, MPI_COMM_WORLD);
            do {
                MPI_Test(&req[0], &flag, &st);
                polls++;
            } while (!flag);
            check(v == partner * 5 && st.MPI_SOURCE == partner && req[0] == MPI_REQUEST_NULL, "test completes the receive");
            out("test: got %d from %d", v, st.MPI_SOURCE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, partner, 301, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            v = my_rank * 5;
            MPI_Send(&v, 1, MPI_INT, partner, 300, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Testall: flag stays 0 until every request is complete, then all are MPI_REQUEST_NULL. */
    {
        int left = (my_rank + N - 1) % N, right = (my_rank + 1) % N, a = -1, b = -1, x = my_rank, y = my_rank + 50;
        int polls = 0, token = 0;
        MPI_Irecv(&a, 1, MPI_INT, left, 400, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&b, 1, MPI_INT, right, 401, MPI_COMM_WORLD, &req[1]);
        MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE);
        check(!flag, "testall before any send");
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Isend(&x, 1, MPI_INT, right, 400, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(&y, 1, MPI_INT, left, 401, MPI_COMM_WORLD, &req[3]);
        (void)token;
        do {
            MPI_Testall(4, req, &flag, sts);
            polls++;
        } while (!flag);
        check(a == left && b == right + 50, "testall payloads");
        check(sts[0].MPI_SOURCE == left && sts[1].MPI_SOURCE == right, "testall statuses");
        check(req[0] == MPI_REQUEST_NULL && req[3] == MPI_REQUEST_NULL, "testall nulls the requests");
        out("testall: %d from %d, %d from %d", a, left, b, right);
    }

    return finish("nonblocking");
}
