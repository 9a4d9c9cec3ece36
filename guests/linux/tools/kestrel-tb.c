/*
 * kestrel-tb: prints the PowerPC time base (TBU:TBL) as one decimal number and a newline.
 *
 * The guest's /init and scripts call it to mark points in a run. Under QEMU's
 * `-icount shift=0` the 400 MHz time base advances 0.4 ticks per guest instruction, so the
 * difference of two readings times 2.5 is the guest instructions in between, natively or in a VM.
 * The time base counts from machine start, so the first reading in /init measures the boot.
 *
 * Freestanding (no libc): no startup code runs before the reading, and the binary is tiny.
 * TBL and TBU are user-readable as SPR 268 and 269 (Book E; PPC440 user's manual, "Time Base").
 * Build: powerpc-linux-gnu-gcc -static -nostdlib -ffreestanding -O2 -o kestrel-tb kestrel-tb.c -lgcc
 */

#define SYS_exit 1
#define SYS_write 4

/* The 32-bit PowerPC Linux system call: number in r0, arguments in r3..r5, result in r3. */
static long syscall3(long nr, long a, long b, long c)
{
	register long r0 __asm__("r0") = nr;
	register long r3 __asm__("r3") = a;
	register long r4 __asm__("r4") = b;
	register long r5 __asm__("r5") = c;

	__asm__ volatile("sc"
			 : "+r"(r0), "+r"(r3), "+r"(r4), "+r"(r5)
			 :
			 : "r6", "r7", "r8", "r9", "r10", "r11", "r12", "cr0", "ctr", "xer",
			   "memory");
	return r3;
}

/* Reads TBU twice around TBL so that a carry from TBL into TBU between the reads is caught. */
static unsigned long long read_time_base(void)
{
	unsigned int upper, lower, again;

	do {
		__asm__ volatile("mfspr %0, 269" : "=r"(upper));
		__asm__ volatile("mfspr %0, 268" : "=r"(lower));
		__asm__ volatile("mfspr %0, 269" : "=r"(again));
	} while (upper != again);
	return ((unsigned long long)upper << 32) | lower;
}

void _start(void)
{
	unsigned long long tb = read_time_base();
	char buf[24];
	int i = sizeof(buf);

	buf[--i] = '\n';
	do {
		buf[--i] = (char)('0' + tb % 10);
		tb /= 10;
	} while (tb != 0);
	syscall3(SYS_write, 1, (long)&buf[i], (long)(sizeof(buf) - i));
	syscall3(SYS_exit, 0, 0, 0);
	for (;;)
		;
}
