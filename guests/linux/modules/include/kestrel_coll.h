/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kestrel_coll.h: the kernel API of kestrel_coll.ko, Kestrel's BG/P collective (tree) network
 * driver, for other guest modules (kestrel_bgnet.ko).
 *
 * One collective device per guest (the device tree node `kestrel,bgp-collective`), two virtual
 * channels (VC0, VC1). A packet is one 32-bit header word and 256 bytes of payload
 * (KESTREL_BGP_COLL_PAYLOAD_BYTES); the header layout is bgp-interconnect.md 2.2 and its
 * numbers are kestrel_bgp.h's KESTREL_BGP_COLL_HDR_*. The helpers below build the two kinds
 * of header a client needs.
 *
 * Receiving: the driver enables the reception interrupts (the per-VC "header with the IRQ bit
 * arrived" lines and the reception-watermark exception) and, on any of them, drains the VC's
 * reception FIFO completely, calling the VC's registered callback once per packet. So a packet
 * is delivered promptly when its header has KESTREL_BGP_COLL_HDR_IRQ set (both helpers set it),
 * and at the latest with the next interrupt otherwise.
 *
 * Symbols are EXPORT_SYMBOL_GPL; build the client in the same Kbuild (guests/linux/modules)
 * so modpost resolves them, and load kestrel_coll.ko before the client (/init does).
 */
#ifndef KESTREL_COLL_H
#define KESTREL_COLL_H

#include <linux/types.h>

#include "kestrel_bgp.h"

/* Number of virtual channels; valid `vc` arguments are 0 and 1. */
#define KESTREL_COLL_VCS KESTREL_BGP_COLL_VCS
/* Payload bytes of every packet (the whole payload is always sent and received). */
#define KESTREL_COLL_PAYLOAD_BYTES KESTREL_BGP_COLL_PAYLOAD_BYTES

/*
 * Receive callback: one call per received packet on the VC it was registered for. `payload`
 * points at the 256 received bytes (4-byte aligned, valid only during the call). Called from
 * the driver's threaded interrupt handler (process context, no locks of the caller held; it
 * may call netif_rx() and the like but should not sleep for long: it delays the VC's next
 * packets). Calls for one VC never overlap.
 */
typedef void (*kestrel_coll_rx_fn)(u32 header, const void *payload, void *ctx);

/*
 * kestrel_coll_ready: 0 when the collective device has been probed (the API below works),
 * -EPROBE_DEFER otherwise (e.g. the BIC driver is not loaded yet). A client's probe should
 * return this value when it is not 0.
 */
int kestrel_coll_ready(void);

/*
 * kestrel_coll_send: inject one packet on `vc`: the header word to HI, then the 256 bytes of
 * `payload` (any alignment) to DI as 16 quads of 4 x 32-bit stores. Any context (it takes a
 * spinlock with interrupts off). Returns 0; -EBUSY when the VC's injection FIFO stayed full
 * for KESTREL_COLL_SEND_SPIN_US (nothing was written: drop or retry later); -ENODEV without
 * a device; -EINVAL for a bad `vc`.
 */
int kestrel_coll_send(int vc, u32 header, const void *payload);
#define KESTREL_COLL_SEND_SPIN_US 100

/*
 * kestrel_coll_register_rx: make `rx(header, payload, ctx)` the receiver of every packet that
 * arrives on `vc` (one receiver per VC). Packets that arrive while no receiver is registered
 * are read and dropped (counted). Returns 0, -EBUSY if `vc` already has a receiver, -EINVAL
 * for a bad `vc` or a NULL `rx`, -ENODEV without a device.
 */
int kestrel_coll_register_rx(int vc, kestrel_coll_rx_fn rx, void *ctx);

/*
 * kestrel_coll_unregister_rx: remove `vc`'s receiver. When it returns, no call of the old
 * callback is running or will start (it waits for a running one). May sleep.
 */
void kestrel_coll_unregister_rx(int vc);

/* kestrel_coll_node_address: this node's 24-bit collective node address (NADDR DCR). */
u32 kestrel_coll_node_address(void);

/*
 * Header of a point-to-point packet on class route `route` (0..15) to the node with node
 * address `dest` (24 bits); the receiver gets an interrupt.
 */
static inline u32 kestrel_coll_header_p2p(u32 route, u32 dest)
{
	return ((route & KESTREL_BGP_COLL_HDR_CLASS_MASK) << KESTREL_BGP_COLL_HDR_CLASS_SHIFT) |
	       KESTREL_BGP_COLL_HDR_P2P | KESTREL_BGP_COLL_HDR_IRQ |
	       ((dest & KESTREL_BGP_COLL_HDR_P2P_ADDR_MASK) << KESTREL_BGP_COLL_HDR_P2P_ADDR_SHIFT);
}

/*
 * Header of a broadcast packet (not point-to-point, ALU opcode none) on class route `route`
 * with tag `tag` (14 bits); every node the class route reaches receives it, with an interrupt.
 */
static inline u32 kestrel_coll_header_bcast(u32 route, u32 tag)
{
	return ((route & KESTREL_BGP_COLL_HDR_CLASS_MASK) << KESTREL_BGP_COLL_HDR_CLASS_SHIFT) |
	       KESTREL_BGP_COLL_HDR_IRQ |
	       (KESTREL_BGP_COLL_OP_NONE << KESTREL_BGP_COLL_HDR_OP_SHIFT) |
	       ((tag & KESTREL_BGP_COLL_HDR_TAG_MASK) << KESTREL_BGP_COLL_HDR_TAG_SHIFT);
}

#endif /* KESTREL_COLL_H */
