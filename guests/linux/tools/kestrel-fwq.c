/*
 * kestrel-fwq: the fixed-work-quantum (FWQ) noise benchmark, as light-weight kernels are
 * measured (issue 19, `just bench noise`): the same quantum of work, N times, each timed with
 * the PowerPC time base. Any time a quantum takes beyond the fastest one is time the system
 * took from the program (interrupts, other threads, the VMM): its noise.
 *
 *   kestrel-fwq [QUANTA [WORK]]     (defaults 1000 and 20000)
 *
 * Output (the native Kestrel program kestrel-fwq, native/programs/fwq, prints the same):
 *   fwq: quanta N work W
 *   fwq: t T1 T2 ... T16      (time-base ticks of each quantum, 16 a line)
 *   fwq: done
 *
 * The work is W rounds of a linear congruential step (a multiply and an add), kept live
 * through a volatile sink: about 3 instructions a round with gcc -O2. Build (guests/linux/build.sh):
 * powerpc-linux-gnu-gcc -static -O2 -o kestrel-fwq kestrel-fwq.c
 */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;

/* TBL alone: a quantum is far shorter than TBL's wrap (about 10 s at 400 MHz). */
static unsigned tbl(void)
{
	unsigned v;

	__asm__ volatile("mfspr %0, 268" : "=r"(v));
	return v;
}

static void work(unsigned rounds)
{
	unsigned a = 1;

	for (unsigned i = 0; i < rounds; i++)
		a = a * 1664525u + 1013904223u;
	sink = a;
}

int main(int argc, char **argv)
{
	unsigned quanta = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1000;
	unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 20000;
	unsigned *t;

	if (quanta == 0 || quanta > 1000000 || rounds == 0) {
		fprintf(stderr, "kestrel-fwq: QUANTA 1..1000000 and WORK > 0, please\n");
		return 2;
	}
	t = malloc(quanta * sizeof *t);
	if (!t) {
		fprintf(stderr, "kestrel-fwq: no memory for %u samples\n", quanta);
		return 1;
	}
	work(rounds); /* warm the caches and the TLB */
	for (unsigned q = 0; q < quanta; q++) {
		unsigned t0 = tbl();

		work(rounds);
		t[q] = tbl() - t0;
	}
	printf("fwq: quanta %u work %u\n", quanta, rounds);
	for (unsigned q = 0; q < quanta; q += 16) {
		printf("fwq: t");
		for (unsigned i = q; i < q + 16 && i < quanta; i++)
			printf(" %u", t[i]);
		printf("\n");
	}
	printf("fwq: done\n");
	free(t);
	return 0;
}
