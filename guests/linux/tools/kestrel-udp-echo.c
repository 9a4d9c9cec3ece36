/*
 * kestrel-udp-echo: sends one UDP datagram to an echo service and checks the answer byte for
 * byte (scripts/fabric-echo-test.py: the guest reaching the native kestrel-echo over bgnet).
 *
 *   kestrel-udp-echo ADDRESS PORT BYTES SEED   datagram of BYTES bytes from a xorshift32 stream
 *   kestrel-udp-echo ADDRESS PORT quit          the datagram KESTREL-ECHO-QUIT (ends kestrel-echo)
 *
 * Sends up to 5 times (1 s apart) until an answer from ADDRESS:PORT arrives; prints
 * "udp-echo: N bytes echoed by ADDRESS:PORT, ok" and exits 0 when it equals what was sent,
 * else a line saying what went wrong and exits 1.
 * Build: powerpc-linux-gnu-gcc -static -O2 -o kestrel-udp-echo kestrel-udp-echo.c
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char quit[] = "KESTREL-ECHO-QUIT";

int main(int argc, char **argv)
{
	static unsigned char out[65536], in[65536];
	struct sockaddr_in to = { .sin_family = AF_INET }, from;
	struct timeval tv = { .tv_sec = 1 };
	size_t n;
	int s, i;

	if (argc < 4 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "usage: %s ADDRESS PORT BYTES SEED | ADDRESS PORT quit\n", argv[0]);
		return 2;
	}
	to.sin_port = htons((unsigned short)atoi(argv[2]));
	if (strcmp(argv[3], "quit") == 0) {
		n = sizeof(quit) - 1;
		memcpy(out, quit, n);
	} else {
		unsigned int x = argc > 4 ? (unsigned int)strtoul(argv[4], NULL, 0) : 1;

		n = (size_t)strtoul(argv[3], NULL, 0);
		if (n > sizeof(out) || x == 0) {
			fprintf(stderr, "udp-echo: BYTES at most %zu, SEED not 0\n", sizeof(out));
			return 2;
		}
		for (size_t k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			out[k] = (unsigned char)x;
		}
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		perror("udp-echo: socket");
		return 1;
	}
	for (i = 0; i < 5; i++) {
		socklen_t fl = sizeof(from);
		ssize_t r;

		if (sendto(s, out, n, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)n) {
			perror("udp-echo: sendto");
			return 1;
		}
		r = recvfrom(s, in, sizeof(in), 0, (struct sockaddr *)&from, &fl);
		if (r < 0)
			continue;
		if (from.sin_addr.s_addr != to.sin_addr.s_addr || from.sin_port != to.sin_port)
			continue;
		if ((size_t)r == n && memcmp(in, out, n) == 0) {
			printf("udp-echo: %zu bytes echoed by %s:%s, ok\n", n, argv[1], argv[2]);
			return 0;
		}
		printf("udp-echo: %zd bytes came back for %zu sent, WRONG\n", r, n);
		return 1;
	}
	printf("udp-echo: no answer from %s:%s after %d tries\n", argv[1], argv[2], i);
	return 1;
}
