/*
 * p2p.c: blocking point to point with 8 ranks: ordering between a pair, wildcards and status
 * fields, MPI_Get_count, zero-length and multi-megabyte messages, MPI_Ssend, MPI_Sendrecv,
 * MPI_Probe and MPI_Iprobe.
 */
#include "common.h"

#define ORDERED 64
#define BIG (3 * 1024 * 1024 + 17) /* bytes: several megabytes and not a round size */

static unsigned char pattern(int from, int i) { return (unsigned char)(from * 31 + i * 7 + (i >> 11)); }

int main(int argc, char **argv)
{
    int i, r, value, partner, count;
    MPI_Status st;
    start(&argc, &argv);
    check(world_size == 8, "run with 8 ranks");
    partner = my_rank ^ 1;

    /* Ordering between a pair: same source, same tag arrive in send order (non-overtaking). */
    if (my_rank % 2 == 0) {
        for (i = 0; i < ORDERED; i++)
            MPI_Send(&i, 1, MPI_INT, partner, 5, MPI_COMM_WORLD);
    } else {
        int in_order = 1;
        for (i = 0; i < ORDERED; i++) {
            MPI_Recv(&value, 1, MPI_INT, partner, 5, MPI_COMM_WORLD, &st);
            in_order &= value == i;
        }
        check(in_order, "messages on one (source, tag) arrive in order");
        out("ordered: %d messages from %d in order: %s", ORDERED, partner, in_order ? "yes" : "no");
    }

    /* Selection by tag: tags 1, 2, 3 sent in that order, received 3, 1, 2. */
    if (my_rank % 2 == 0) {
        for (i = 1; i <= 3; i++) {
            value = 100 * my_rank + i;
            MPI_Send(&value, 1, MPI_INT, partner, i, MPI_COMM_WORLD);
        }
    } else {
        int want[3] = {3, 1, 2};
        for (i = 0; i < 3; i++) {
            MPI_Recv(&value, 1, MPI_INT, partner, want[i], MPI_COMM_WORLD, &st);
            check(value == 100 * partner + want[i], "receive by tag picks that tag's message");
            check(st.MPI_TAG == want[i] && st.MPI_SOURCE == partner, "status names tag and source");
            out("by tag %d: got %d", want[i], value);
        }
    }

    /* Wildcards: rank 0 receives one message from every other rank with ANY_SOURCE/ANY_TAG;
     * the status says who sent it and with which tag; MPI_Get_count says how many. */
    if (my_rank == 0) {
        int seen[8] = {0};
        int got[8];
        for (i = 1; i < world_size; i++) {
            int buf[16];
            MPI_Recv(buf, 16, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            r = st.MPI_SOURCE;
            check(r > 0 && r < world_size && !seen[r], "each source once");
            if (r > 0 && r < world_size) {
                seen[r] = 1;
                got[r] = count;
                check(st.MPI_TAG == 40 + r, "tag of the wildcard receive");
                check(buf[0] == r * r, "payload of the wildcard receive");
            }
        }
        for (r = 1; r < world_size; r++)
            out("wildcard: from %d count %d", r, seen[r] ? got[r] : -1);
    } else {
        int buf[16];
        for (i = 0; i < my_rank; i++)
            buf[i] = my_rank * my_rank;
        MPI_Send(buf, my_rank, MPI_INT, 0, 40 + my_rank, MPI_COMM_WORLD);
    }
    /* Rank 0 has every wildcard message before anyone sends the next phase's. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* ANY_SOURCE with a fixed tag, ANY_TAG with a fixed source. */
    if (my_rank % 2 == 1) {
        value = my_rank;
        MPI_Send(&value, 1, MPI_INT, partner, 77, MPI_COMM_WORLD);
        MPI_Send(&value, 1, MPI_INT, partner, 78, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &st);
        check(st.MPI_SOURCE == partner && st.MPI_TAG == 77 && value == partner, "ANY_SOURCE, tag 77");
        MPI_Recv(&value, 1, MPI_INT, partner, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        check(st.MPI_SOURCE == partner && st.MPI_TAG == 78, "source fixed, ANY_TAG");
        out("any_source tag 77 then any_tag: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
    }

    /* Zero-length messages: a receive of up to 4 ints gets count 0 and the buffer untouched. */
    if (my_rank % 2 == 0) {
        MPI_Send(NULL, 0, MPI_INT, partner, 9, MPI_COMM_WORLD);
        MPI_Ssend(NULL, 0, MPI_BYTE, partner, 10, MPI_COMM_WORLD);
    } else {
        int buf[4] = {-7, -7, -7, -7};
        MPI_Recv(buf, 4, MPI_INT, partner, 9, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        check(count == 0 && buf[0] == -7, "zero-length send");
        MPI_Recv(buf, 4, MPI_BYTE, partner, 10, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        check(count == 0 && buf[0] == -7, "zero-length ssend");
        out("zero-length: count %d, buffer untouched %s", count, buf[0] == -7 ? "yes" : "no");
    }

    /* Multi-megabyte messages both ways between the pair, checked byte by byte. */
    {
        unsigned char *sbuf = malloc(BIG), *rbuf = malloc(BIG);
        int bad = 0;
        for (i = 0; i < BIG; i++)
            sbuf[i] = pattern(my_rank, i);
        memset(rbuf, 0, BIG);
        if (my_rank % 2 == 0) {
            MPI_Send(sbuf, BIG, MPI_BYTE, partner, 11, MPI_COMM_WORLD);
            MPI_Recv(rbuf, BIG, MPI_BYTE, partner, 12, MPI_COMM_WORLD, &st);
        } else {
            MPI_Recv(rbuf, BIG, MPI_BYTE, partner, 11, MPI_COMM_WORLD, &st);
            MPI_Ssend(sbuf, BIG, MPI_BYTE, partner, 12, MPI_COMM_WORLD);
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        for (i = 0; i < BIG; i++)
            bad += rbuf[i] != pattern(partner, i);
        check(count == BIG && bad == 0, "multi-megabyte message intact");
        out("big: %d bytes from %d, %d bad", count, partner, bad);
        /* The same size as doubles through MPI_Sendrecv around the ring. */
        {
            int n = BIG / 8, right = (my_rank + 1) % world_size, left = (my_rank + world_size - 1) % world_size;
            double *sd = (double *)sbuf, *rd = (double *)rbuf;
            for (i = 0; i < n; i++)
                sd[i] = my_rank * 1000000.0 + i;
            MPI_Sendrecv(sd, n, MPI_DOUBLE, right, 13, rd, n, MPI_DOUBLE, left, 13, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            bad = 0;
            for (i = 0; i < n; i++)
                bad += rd[i] != left * 1000000.0 + i;
            check(count == n && bad == 0 && st.MPI_SOURCE == left, "sendrecv ring");
            out("sendrecv ring: %d doubles from %d, %d bad", count, st.MPI_SOURCE, bad);
        }
        free(sbuf);
        free(rbuf);
    }

    /* MPI_Probe tells the size before the receive; MPI_Iprobe eventually sees the message. */
    if (my_rank % 2 == 0) {
        char text[64];
        int len = snprintf(text, sizeof text, "hello from %d", my_rank);
        MPI_Send(text, len, MPI_CHAR, partner, 21, MPI_COMM_WORLD);
        MPI_Send(text, 3, MPI_CHAR, partner, 22, MPI_COMM_WORLD);
    } else {
        char text[64];
        int flag = 0;
        MPI_Probe(partner, 21, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_CHAR, &count);
        check(st.MPI_SOURCE == partner && st.MPI_TAG == 21, "probe status");
        MPI_Recv(text, count, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        text[count] = 0;
        out("probe: %d chars: %s", count, text);
        while (!flag)
            MPI_Iprobe(MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &flag, &st);
        MPI_Get_count(&st, MPI_CHAR, &count);
        check(st.MPI_SOURCE == partner && count == 3, "iprobe status");
        MPI_Recv(text, 3, MPI_CHAR, partner, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        out("iprobe: source %d count %d", st.MPI_SOURCE, count);
    }
    /* Iprobe with nothing pending says so. */
    {
        int flag = 1;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Iprobe(MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, &flag, &st);
        check(flag == 0, "iprobe of nothing");
    }

    return finish("p2p");
}
