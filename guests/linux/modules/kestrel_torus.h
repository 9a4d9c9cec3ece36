/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kestrel_torus.h: the message API of kestrel_torus.ko, the driver of a Kestrel VM's torus DMA
 * group, for kestrel_bgnet.ko (and any other in-kernel user).
 *
 * A message is up to KESTREL_TORUS_MAX_MSG bytes. It travels as one memory-FIFO DMA message
 * to a node (X, Y, Z): the driver prepends the 12-byte torus link header below, and the DMA
 * engine cuts the whole into packets of 240 payload bytes whose software header carries the
 * byte offset (Put_Offset) and the source id `conn_id:8 | src_key:24`
 * (src_key = X << 16 | Y << 8 | Z). The receiving driver reassembles by source id and offset
 * and hands the message, without the link header, to the one attached client.
 * Framing as in docs/adr/0021-guest-drivers.md ("Torus framing"), after bgp-interconnect.md 2.4.
 *
 * The API is one exported constant table, kestrel_torus_api, so that a client can bind to it
 * with symbol_get() only when its device tree names a torus (and load without this module).
 */
#ifndef KESTREL_TORUS_H
#define KESTREL_TORUS_H

#include <linux/types.h>

#include "include/kestrel_bgp.h"

struct device_node;
struct sk_buff;
struct kestrel_torus;

/* Bytes of payload per torus packet (a full 256-byte packet minus its 16-byte header). */
#define KESTREL_TORUS_PKT_PAYLOAD KESTREL_BGP_DMA_PKT_MAX_PAYLOAD
/* Packets per message at most (kestrel_bgp.h: 39 keeps a message, and its reassembly buffer,
 * under 10 KiB, as Kittyhawk's TORUS_MAX_MTU did). */
#define KESTREL_TORUS_MAX_PKTS KESTREL_BGP_DMA_MSG_MAX_PKTS
/* Bytes of one message at most, link header included. */
#define KESTREL_TORUS_MAX_MSG (KESTREL_TORUS_MAX_PKTS * KESTREL_TORUS_PKT_PAYLOAD)


/* The torus link header, at byte 0 of every message, big-endian. */
struct kestrel_torus_link_hdr {
	__be32 dst_key;   /* network id of the receiving interface */
	__be32 len;       /* bytes of the message, this header included */
	__be16 lnk_proto; /* KESTREL_BGP_TORUS_LINK_PROTO_NET for Ethernet frames */
	__be16 opt;       /* 0 */
} __packed;

#define KESTREL_TORUS_LINK_HDR_LEN KESTREL_BGP_DMA_LINK_HDR_BYTES

/* What a client learns about the torus. */
struct kestrel_torus_info {
	u8 coords[3]; /* this node's X, Y, Z */
	u8 dims[3];   /* machine size: nodes per dimension; all 0 when the size is unknown */
	u32 src_key;  /* X << 16 | Y << 8 | Z */
};

/*
 * The one client of a torus device.
 * rx: a complete message arrived. skb->data is the payload after the link header, skb->len
 *     its length; the client owns skb. src_key is the sender's X << 16 | Y << 8 | Z.
 *     Called in hard-IRQ context.
 * tx_wake: a send failed with -EBUSY earlier and the injection FIFO has room again.
 *     Called in hard-IRQ context.
 */
struct kestrel_torus_client {
	void (*rx)(void *ctx, struct sk_buff *skb, u32 src_key, u32 dst_key, u16 lnk_proto);
	void (*tx_wake)(void *ctx);
	void *ctx;
};

struct kestrel_torus_api {
	/* The torus device of a device-tree node: ERR_PTR(-EPROBE_DEFER) while its driver has
	 * not probed it, ERR_PTR(-ENODEV) when the node is no torus. Takes a device reference. */
	struct kestrel_torus *(*get)(struct device_node *np);
	void (*put)(struct kestrel_torus *t);
	void (*info)(struct kestrel_torus *t, struct kestrel_torus_info *info);
	/* Attach the one client (-EBUSY if one is attached); detach waits for running callbacks. */
	int (*attach)(struct kestrel_torus *t, const struct kestrel_torus_client *c);
	void (*detach)(struct kestrel_torus *t);
	/*
	 * Send skb->data[0, skb->len) to (x, y, z) as one message with the given link header
	 * fields. On 0 the driver owns skb (it frees it once the DMA engine has read it). On an
	 * error the caller keeps skb unchanged: -EBUSY the injection FIFO is full (tx_wake
	 * follows), -EMSGSIZE too long, -ENOMEM no headroom could be made or mapping failed,
	 * -EINVAL (x, y, z) outside the machine, -ENODEV the device is going away.
	 * May be called with BHs or IRQs disabled.
	 */
	int (*send)(struct kestrel_torus *t, u8 x, u8 y, u8 z, u32 dst_key, u16 lnk_proto,
		    struct sk_buff *skb);
};

extern const struct kestrel_torus_api kestrel_torus_api;

#endif /* KESTREL_TORUS_H */
