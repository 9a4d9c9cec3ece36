/* fabrictest: a Linux program making Kestrel calls (docs/adr/0034-linux-personality.md):
 * through libkestrel_kcall.a (native/linux/kcall, Rust, kestrel-user's `linux` feature) it
 * asks the root task for the fabric service kestrel-fabric, attaches an endpoint whose DMA
 * window and shared page are its own memory (pages kestrel-linux mapped to it), prints the
 * endpoint and its torus coordinates, and detaches it.
 * Build: scripts/build-kcall.sh, then
 *   scripts/kestrel-cc -O2 -o fabrictest fabrictest.c \
 *       -Ltarget/powerpc-unknown-linux-gnu/release -lkestrel_kcall */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int kestrel_lookup(const char *name, unsigned *tid);
int kestrel_fabric_attach(void *window, unsigned len, void *shared, unsigned *ep,
                          unsigned *x, unsigned *y, unsigned *z);
int kestrel_fabric_detach(unsigned ep);
unsigned kestrel_my_id(void);

#define WINDOW (64 * 1024)
static unsigned char window[WINDOW] __attribute__((aligned(WINDOW)));
static unsigned char shared[4096] __attribute__((aligned(4096)));

int main(void) {
    const char *r = getenv("KESTREL_RANK"), *n = getenv("KESTREL_SIZE");
    int rank = r ? atoi(r) : -1, size = n ? atoi(n) : -1;
    unsigned tid = 0, ep = 0, x = 0, y = 0, z = 0;
    int e = kestrel_lookup("kestrel-fabric", &tid);
    if (e) {
        printf("rank %d: no fabric service (%d)\n", rank, e);
        return 1;
    }
    e = kestrel_fabric_attach(window, WINDOW, shared, &ep, &x, &y, &z);
    if (e) {
        printf("rank %d: attach refused (%d)\n", rank, e);
        return 1;
    }
    printf("rank %d of %d: thread %#x, fabric service %#x, endpoint %u at (%u,%u,%u)\n",
           rank, size, kestrel_my_id(), tid, ep, x, y, z);
    fflush(stdout);
    /* The service exits after its last endpoint detaches: stay attached until the other
     * ranks (started at the same time) have surely attached. */
    struct timespec ts = {0, 300000000L};
    nanosleep(&ts, NULL);
    kestrel_fabric_detach(ep);
    return 0;
}
