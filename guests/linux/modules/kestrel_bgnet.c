// SPDX-License-Identifier: GPL-2.0
/*
 * kestrel_bgnet.c: Linux 6.1 Ethernet device over Kestrel's BG/P torus and collective
 * network (device tree compatible "kestrel,bgnet"), in the manner of Kittyhawk's bgnet
 * (bgp-interconnect.md 2.4; docs/adr/0021-guest-drivers.md, section "bgnet").
 *
 * Transport per frame, by destination MAC (module parameter `transport`):
 *   auto (default): a torus-style MAC, (mac[0] & 7) == 6, goes over the torus to
 *     X, Y, Z = mac[3], mac[4], mac[5]; any other unicast MAC goes point-to-point over the
 *     collective to node address mac[3] << 16 | mac[4] << 8 | mac[5]; broadcast and multicast
 *     go over the collective as a broadcast (not P2P, ALU none, tag 0) on class `tree-route`.
 *     So ARP requests cross the collective and the replies (and all unicast IP between VMs,
 *     whose MACs are torus style) cross the torus.
 *   torus: every unicast frame goes over the torus to mac[3..5]; broadcasts still go over the
 *     collective (over the torus, one copy per node, only when there is no collective).
 *   collective: everything goes over the collective; a torus-style MAC's node address is the
 *     node's rank X + SX * (Y + SY * Z) in a machine of SX x SY x SZ nodes (Kestrel's fabric
 *     numbers endpoint k as (k, 0, 0) with node address k, which this rule reproduces).
 * The torus path is kestrel_torus.ko's message API (framing in kestrel_torus.h); the
 * collective path is kestrel_coll.ko's packet API, framed here: every 256-byte packet starts
 * with a 16-byte link header and carries 240 bytes of the frame; the receiver reassembles by
 * (source node address, connection id). Both drivers are bound with symbol_get(), so this
 * module loads when only one of them is present.
 */
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/of.h>
#include <linux/of_net.h>
#include <linux/platform_device.h>
#include <linux/skbuff.h>

#include "include/kestrel_bgp.h"
#include "include/kestrel_coll.h"
#include "kestrel_torus.h"

#define DRV_NAME "kestrel_bgnet"

/* ---- module parameters ---- */

enum bgnet_transport { BGNET_AUTO, BGNET_TORUS, BGNET_COLLECTIVE };
static const char *const bgnet_transport_names[] = { "auto", "torus", "collective" };
static int bgnet_transport = BGNET_AUTO;

static int transport_set(const char *val, const struct kernel_param *kp)
{
	int i = sysfs_match_string(bgnet_transport_names, val);

	if (i < 0)
		return -EINVAL;
	WRITE_ONCE(bgnet_transport, i);
	return 0;
}

static int transport_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", bgnet_transport_names[READ_ONCE(bgnet_transport)]);
}

static const struct kernel_param_ops transport_ops = {
	.set = transport_set,
	.get = transport_get,
};
module_param_cb(transport, &transport_ops, NULL, 0644);
MODULE_PARM_DESC(transport, "path for frames: auto (by MAC, default), torus or collective");

static unsigned int coll_burst = KESTREL_BGP_COLL_FIFO_PACKETS;
module_param(coll_burst, uint, 0644);
MODULE_PARM_DESC(coll_burst, "collective packets sent back to back before a pause (default: one reception FIFO, 8)");

static unsigned int coll_gap_ms;
module_param(coll_gap_ms, uint, 0644);
MODULE_PARM_DESC(coll_gap_ms, "pause after coll_burst collective packets, ms (rounded up to jiffies; default 0: no pacing)");

static unsigned int mtu = ETH_DATA_LEN;
module_param(mtu, uint, 0444);
MODULE_PARM_DESC(mtu, "initial MTU (default 1500; `ip link set mtu` changes it later)");

/* ---- collective framing ---- */

/* The collective link header at the start of every packet's payload, big-endian. */
struct bgnet_coll_hdr {
	__be32 dst_key;	  /* network id */
	__be32 src_key;	  /* sender's collective node address */
	__be16 conn_id;	  /* per-sender frame number */
	u8 this_pkt;	  /* index of this packet in the frame */
	u8 total_pkt;	  /* packets of the frame */
	__be16 lnk_proto; /* KESTREL_BGP_TORUS_LINK_PROTO_NET */
	__be16 opt;	  /* option:4 | pad_head:4 | pad_tail:8 */
} __packed;

#define BGNET_COLL_HDR KESTREL_BGP_COLL_LINK_HDR_BYTES
#define BGNET_COLL_CHUNK (KESTREL_COLL_PAYLOAD_BYTES - BGNET_COLL_HDR)
/* Packets of one frame at most (the reassembly bitmap is 64 bits wide). */
#define BGNET_COLL_MAX_PKTS 64
#define BGNET_OPT_PAD_HEAD_SHIFT 8
#define BGNET_OPT_PAD_HEAD_MASK 0xf
#define BGNET_OPT_PAD_TAIL_MASK 0xff
#define BGNET_REASM_SLOTS 16
#define BGNET_REASM_TIMEOUT (HZ / 10)

static_assert(sizeof(struct bgnet_coll_hdr) == BGNET_COLL_HDR);
static_assert(sizeof(struct kestrel_torus_link_hdr) == KESTREL_TORUS_LINK_HDR_LEN);

struct bgnet_reasm {
	struct sk_buff *skb; /* NULL: slot free */
	u32 src_key;
	u16 conn_id;
	u8 total;
	u16 opt;
	u64 have;
	unsigned long started;
};

/* The collective driver's functions, bound at probe with symbol_get(). */
struct bgnet_coll_ops {
	typeof(&kestrel_coll_ready) ready;
	typeof(&kestrel_coll_send) send;
	typeof(&kestrel_coll_register_rx) register_rx;
	typeof(&kestrel_coll_unregister_rx) unregister_rx;
	typeof(&kestrel_coll_node_address) node_address;
};

struct bgnet {
	struct net_device *ndev;
	struct device *dev;
	u32 network_id;

	/* torus */
	const struct kestrel_torus_api *tapi; /* NULL: no torus */
	struct kestrel_torus *torus;
	struct kestrel_torus_info tinfo;

	/* collective */
	struct bgnet_coll_ops cops; /* cops.send NULL: no collective */
	bool coll_rx_registered;
	u32 route, channel, naddr;
	u16 conn_id;
	/* Pacing: packets sent in the window that ends at coll_window_end (jiffies). */
	unsigned int coll_sent;
	unsigned long coll_window_end;
	struct timer_list coll_timer;
	struct bgnet_reasm reasm[BGNET_REASM_SLOTS]; /* touched by the coll rx callback only */

	/* Counters, each written from one context only (xmit, torus IRQ, collective thread). */
	unsigned long tx_packets, tx_bytes, tx_dropped, tx_errors, tx_torus, tx_coll;
	unsigned long rx_t_packets, rx_t_bytes, rx_t_dropped;
	unsigned long rx_c_packets, rx_c_bytes, rx_c_dropped, rx_c_errors;
};

/* ---- addressing ---- */

static bool bgnet_is_torus_mac(const u8 *mac)
{
	return (mac[0] & 7) == KESTREL_BGP_TORUS_MAC_TORUS_KIND;
}

/* Collective node address of a unicast MAC. */
static u32 bgnet_mac_to_naddr(struct bgnet *bg, const u8 *mac)
{
	const u8 *d = bg->tinfo.dims;

	if (!bgnet_is_torus_mac(mac))
		return (u32)mac[3] << 16 | (u32)mac[4] << 8 | mac[5];
	/* Rank of (X, Y, Z); without a known machine size only X counts. */
	if (d[0])
		return mac[3] + d[0] * (mac[4] + d[1] * mac[5]);
	return mac[3];
}

/* ---- receive ---- */

static void bgnet_deliver(struct bgnet *bg, struct sk_buff *skb)
{
	skb->protocol = eth_type_trans(skb, bg->ndev);
	netif_rx(skb);
}

static void bgnet_torus_rx(void *ctx, struct sk_buff *skb, u32 src_key, u32 dst_key,
			   u16 proto)
{
	struct bgnet *bg = ctx;

	if (dst_key != bg->network_id || proto != KESTREL_BGP_TORUS_LINK_PROTO_NET ||
	    skb->len < ETH_HLEN || !netif_running(bg->ndev)) {
		bg->rx_t_dropped++;
		dev_kfree_skb_irq(skb);
		return;
	}
	bg->rx_t_packets++;
	bg->rx_t_bytes += skb->len;
	bgnet_deliver(bg, skb);
}

static void bgnet_torus_wake(void *ctx)
{
	struct bgnet *bg = ctx;

	netif_wake_queue(bg->ndev);
}

static void bgnet_reasm_drop(struct bgnet_reasm *r)
{
	kfree_skb(r->skb);
	r->skb = NULL;
}

/* The reassembly slot of (src_key, conn_id), or a fresh one. */
static struct bgnet_reasm *bgnet_reasm_find(struct bgnet *bg, u32 src_key, u16 conn_id)
{
	struct bgnet_reasm *free = NULL, *oldest = NULL;
	unsigned int i;

	for (i = 0; i < BGNET_REASM_SLOTS; i++) {
		struct bgnet_reasm *r = &bg->reasm[i];

		if (!r->skb) {
			if (!free)
				free = r;
			continue;
		}
		if (r->src_key == src_key && r->conn_id == conn_id)
			return r;
		if (time_after(jiffies, r->started + BGNET_REASM_TIMEOUT)) {
			bg->rx_c_dropped++;
			bgnet_reasm_drop(r);
			if (!free)
				free = r;
			continue;
		}
		if (!oldest || time_before(r->started, oldest->started))
			oldest = r;
	}
	if (!free) {
		bg->rx_c_dropped++;
		bgnet_reasm_drop(oldest);
		free = oldest;
	}
	free->src_key = src_key;
	free->conn_id = conn_id;
	free->total = 0;
	free->have = 0;
	free->started = jiffies;
	return free;
}

/* One collective packet (kestrel_coll's receive callback; calls never overlap). */
static void bgnet_coll_rx(u32 header, const void *payload, void *ctx)
{
	struct bgnet *bg = ctx;
	const struct bgnet_coll_hdr *h = payload;
	u32 src_key = be32_to_cpu(h->src_key);
	u16 conn_id = be16_to_cpu(h->conn_id);
	u16 opt = be16_to_cpu(h->opt);
	unsigned int pad_head, pad_tail, len;
	struct bgnet_reasm *r;
	struct sk_buff *skb;

	if (be32_to_cpu(h->dst_key) != bg->network_id ||
	    be16_to_cpu(h->lnk_proto) != KESTREL_BGP_TORUS_LINK_PROTO_NET)
		return; /* another network or protocol on this class: not ours */
	if (src_key == bg->naddr)
		return; /* our own broadcast, back from the class route */
	if (!h->total_pkt || h->total_pkt > BGNET_COLL_MAX_PKTS || h->this_pkt >= h->total_pkt) {
		bg->rx_c_errors++;
		return;
	}
	if (!netif_running(bg->ndev)) {
		bg->rx_c_dropped++;
		return;
	}

	r = bgnet_reasm_find(bg, src_key, conn_id);
	if (!r->skb) {
		/* 2 bytes put the IP header after the 14-byte Ethernet header on 4 bytes. */
		r->skb = netdev_alloc_skb(bg->ndev, h->total_pkt * BGNET_COLL_CHUNK + 2);
		if (!r->skb) {
			bg->rx_c_dropped++;
			return;
		}
		skb_reserve(r->skb, 2);
		r->total = h->total_pkt;
		r->opt = opt;
	} else if (r->total != h->total_pkt || r->opt != opt) {
		bg->rx_c_errors++;
		bgnet_reasm_drop(r);
		return;
	}
	memcpy(r->skb->data + h->this_pkt * BGNET_COLL_CHUNK, (const u8 *)payload + BGNET_COLL_HDR,
	       BGNET_COLL_CHUNK);
	r->have |= 1ull << h->this_pkt;
	if (r->have != GENMASK_ULL(r->total - 1, 0))
		return;

	skb = r->skb;
	r->skb = NULL;
	pad_head = (r->opt >> BGNET_OPT_PAD_HEAD_SHIFT) & BGNET_OPT_PAD_HEAD_MASK;
	pad_tail = r->opt & BGNET_OPT_PAD_TAIL_MASK;
	len = r->total * BGNET_COLL_CHUNK;
	if (pad_head + pad_tail + ETH_HLEN > len) {
		bg->rx_c_errors++;
		kfree_skb(skb);
		return;
	}
	skb_put(skb, len - pad_tail);
	skb_pull(skb, pad_head);
	bg->rx_c_packets++;
	bg->rx_c_bytes += skb->len;
	bgnet_deliver(bg, skb);
}

/* ---- transmit ---- */

/* Send the frame in skb over the collective with packet header `header`. */
static int bgnet_coll_send(struct bgnet *bg, u32 header, const struct sk_buff *skb)
{
	u32 buf[KESTREL_COLL_PAYLOAD_BYTES / 4];
	struct bgnet_coll_hdr *h = (void *)buf;
	unsigned int npkts = DIV_ROUND_UP(skb->len, BGNET_COLL_CHUNK), i;
	unsigned int pad_tail = npkts * BGNET_COLL_CHUNK - skb->len;
	int ret;

	if (npkts > BGNET_COLL_MAX_PKTS)
		return -EMSGSIZE;
	bg->conn_id++;
	h->dst_key = cpu_to_be32(bg->network_id);
	h->src_key = cpu_to_be32(bg->naddr);
	h->conn_id = cpu_to_be16(bg->conn_id);
	h->total_pkt = npkts;
	h->lnk_proto = cpu_to_be16(KESTREL_BGP_TORUS_LINK_PROTO_NET);
	h->opt = cpu_to_be16(pad_tail); /* option 0, pad_head 0 */
	for (i = 0; i < npkts; i++) {
		unsigned int off = i * BGNET_COLL_CHUNK;
		unsigned int n = min_t(unsigned int, BGNET_COLL_CHUNK, skb->len - off);
		u8 *data = (u8 *)buf + BGNET_COLL_HDR;

		h->this_pkt = i;
		ret = skb_copy_bits(skb, off, data, n);
		if (ret)
			return ret;
		memset(data + n, 0, BGNET_COLL_CHUNK - n);
		ret = bg->cops.send(bg->channel, header, buf);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Collective pacing. The fabric drops a packet that finds the receiver's reception FIFO
 * (8 packets) full, where BG/P's links would hold it back, and a receiving VM drains its
 * FIFO only when it runs. So bgnet sends at most coll_burst packets per coll_gap_ms and
 * stops the queue in between: the sending VM idles and the receiver gets the CPU.
 */
static void bgnet_coll_window(struct bgnet *bg)
{
	if (time_after_eq(jiffies, bg->coll_window_end)) {
		bg->coll_sent = 0;
		bg->coll_window_end = jiffies + msecs_to_jiffies(READ_ONCE(coll_gap_ms));
	}
}

static void bgnet_coll_pace(struct bgnet *bg, unsigned int npkts)
{
	unsigned int next = DIV_ROUND_UP(bg->ndev->mtu + ETH_HLEN, BGNET_COLL_CHUNK);

	if (!READ_ONCE(coll_gap_ms))
		return;
	bg->coll_sent += npkts;
	if (bg->coll_sent + next > READ_ONCE(coll_burst)) {
		netif_stop_queue(bg->ndev);
		mod_timer(&bg->coll_timer, bg->coll_window_end);
	}
}

static void bgnet_coll_timer(struct timer_list *tm)
{
	struct bgnet *bg = from_timer(bg, tm, coll_timer);

	netif_wake_queue(bg->ndev);
}

/* Send over the torus; the torus driver owns skb on success. */
static netdev_tx_t bgnet_torus_xmit(struct bgnet *bg, struct sk_buff *skb, const u8 *dst)
{
	unsigned int len = skb->len;
	int ret;

	ret = bg->tapi->send(bg->torus, dst[3], dst[4], dst[5], bg->network_id,
			     KESTREL_BGP_TORUS_LINK_PROTO_NET, skb);
	if (ret == -EBUSY) {
		/* Stop first, then retry once: a wake between the two cannot be lost. */
		netif_stop_queue(bg->ndev);
		ret = bg->tapi->send(bg->torus, dst[3], dst[4], dst[5], bg->network_id,
				     KESTREL_BGP_TORUS_LINK_PROTO_NET, skb);
		if (ret == -EBUSY)
			return NETDEV_TX_BUSY;
		netif_wake_queue(bg->ndev);
	}
	if (ret) {
		bg->tx_errors++;
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
	bg->tx_packets++;
	bg->tx_bytes += len;
	bg->tx_torus++;
	return NETDEV_TX_OK;
}

/* A broadcast without a collective: one torus copy to every other node of the machine. */
static void bgnet_torus_flood(struct bgnet *bg, struct sk_buff *skb)
{
	const u8 *d = bg->tinfo.dims, *me = bg->tinfo.coords;
	unsigned int x, y, z;

	if (!d[0]) {
		bg->tx_dropped++;
		return;
	}
	for (z = 0; z < d[2]; z++)
		for (y = 0; y < d[1]; y++)
			for (x = 0; x < d[0]; x++) {
				struct sk_buff *copy;

				if (x == me[0] && y == me[1] && z == me[2])
					continue;
				copy = skb_copy(skb, GFP_ATOMIC);
				if (!copy) {
					bg->tx_dropped++;
					continue;
				}
				if (bg->tapi->send(bg->torus, x, y, z, bg->network_id,
						   KESTREL_BGP_TORUS_LINK_PROTO_NET, copy)) {
					bg->tx_dropped++;
					kfree_skb(copy);
				}
			}
}

static netdev_tx_t bgnet_xmit(struct sk_buff *skb, struct net_device *ndev)
{
	struct bgnet *bg = netdev_priv(ndev);
	int mode = READ_ONCE(bgnet_transport);
	bool coll = bg->cops.send, torus = bg->tapi;
	u8 dst[ETH_ALEN];
	u32 header;
	int ret;

	if (skb->len < ETH_HLEN) {
		bg->tx_errors++;
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
	ether_addr_copy(dst, skb->data);

	if (is_multicast_ether_addr(dst)) {
		if (!coll) {
			if (torus)
				bgnet_torus_flood(bg, skb);
			else
				bg->tx_dropped++;
			dev_kfree_skb_any(skb);
			return NETDEV_TX_OK;
		}
		header = kestrel_coll_header_bcast(bg->route, 0);
	} else if (torus && (mode == BGNET_TORUS ||
			     (mode == BGNET_AUTO && bgnet_is_torus_mac(dst)))) {
		return bgnet_torus_xmit(bg, skb, dst);
	} else if (coll && mode != BGNET_TORUS) {
		header = kestrel_coll_header_p2p(bg->route, bgnet_mac_to_naddr(bg, dst));
	} else {
		/* The forced path's device is missing. */
		bg->tx_dropped++;
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}

	bgnet_coll_window(bg);
	ret = bgnet_coll_send(bg, header, skb);
	bgnet_coll_pace(bg, DIV_ROUND_UP(skb->len, BGNET_COLL_CHUNK));
	if (ret) {
		/* -EBUSY: the injection FIFO stayed full; the receiver drops the partial frame. */
		bg->tx_errors++;
	} else {
		bg->tx_packets++;
		bg->tx_bytes += skb->len;
		bg->tx_coll++;
	}
	dev_consume_skb_any(skb);
	return NETDEV_TX_OK;
}

/* ---- net_device ---- */

static int bgnet_open(struct net_device *ndev)
{
	netif_start_queue(ndev);
	return 0;
}

static int bgnet_stop(struct net_device *ndev)
{
	netif_stop_queue(ndev);
	return 0;
}

static void bgnet_get_stats64(struct net_device *ndev, struct rtnl_link_stats64 *s)
{
	struct bgnet *bg = netdev_priv(ndev);

	s->tx_packets = READ_ONCE(bg->tx_packets);
	s->tx_bytes = READ_ONCE(bg->tx_bytes);
	s->tx_dropped = READ_ONCE(bg->tx_dropped);
	s->tx_errors = READ_ONCE(bg->tx_errors);
	s->rx_packets = READ_ONCE(bg->rx_t_packets) + READ_ONCE(bg->rx_c_packets);
	s->rx_bytes = READ_ONCE(bg->rx_t_bytes) + READ_ONCE(bg->rx_c_bytes);
	s->rx_dropped = READ_ONCE(bg->rx_t_dropped) + READ_ONCE(bg->rx_c_dropped);
	s->rx_errors = READ_ONCE(bg->rx_c_errors);
}

static const struct net_device_ops bgnet_netdev_ops = {
	.ndo_open = bgnet_open,
	.ndo_stop = bgnet_stop,
	.ndo_start_xmit = bgnet_xmit,
	.ndo_get_stats64 = bgnet_get_stats64,
	.ndo_set_mac_address = eth_mac_addr,
	.ndo_validate_addr = eth_validate_addr,
};

static void bgnet_get_drvinfo(struct net_device *ndev, struct ethtool_drvinfo *info)
{
	strscpy(info->driver, DRV_NAME, sizeof(info->driver));
}

static const struct ethtool_ops bgnet_ethtool_ops = {
	.get_drvinfo = bgnet_get_drvinfo,
	.get_link = ethtool_op_get_link,
};

/* Per-path counters, for tests that check which path a transfer took. */
static ssize_t paths_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct bgnet *bg = netdev_priv(to_net_dev(dev));

	return sysfs_emit(buf,
			  "tx_torus %lu\ntx_coll %lu\nrx_torus %lu\nrx_coll %lu\n"
			  "rx_torus_dropped %lu\nrx_coll_dropped %lu\nrx_coll_errors %lu\n",
			  bg->tx_torus, bg->tx_coll, bg->rx_t_packets, bg->rx_c_packets,
			  bg->rx_t_dropped, bg->rx_c_dropped, bg->rx_c_errors);
}
static DEVICE_ATTR_RO(paths);

static struct attribute *bgnet_attrs[] = {
	&dev_attr_paths.attr,
	NULL,
};
static const struct attribute_group bgnet_attr_group = {
	.name = "bgnet",
	.attrs = bgnet_attrs,
};

/* ---- binding to the torus and collective drivers ---- */

static void bgnet_put_coll(struct bgnet *bg)
{
	if (bg->cops.ready)
		symbol_put(kestrel_coll_ready);
	if (bg->cops.send)
		symbol_put(kestrel_coll_send);
	if (bg->cops.register_rx)
		symbol_put(kestrel_coll_register_rx);
	if (bg->cops.unregister_rx)
		symbol_put(kestrel_coll_unregister_rx);
	if (bg->cops.node_address)
		symbol_put(kestrel_coll_node_address);
	memset(&bg->cops, 0, sizeof(bg->cops));
}

/* 0 with bg->cops filled, 0 with no collective (cops.send NULL), or -EPROBE_DEFER. */
static int bgnet_get_coll(struct bgnet *bg, struct device_node *np)
{
	struct device_node *cnp = of_parse_phandle(np, "collective-device", 0);
	int ret;

	if (!cnp)
		return 0;
	of_node_put(cnp);
	bg->cops.ready = symbol_get(kestrel_coll_ready);
	bg->cops.send = symbol_get(kestrel_coll_send);
	bg->cops.register_rx = symbol_get(kestrel_coll_register_rx);
	bg->cops.unregister_rx = symbol_get(kestrel_coll_unregister_rx);
	bg->cops.node_address = symbol_get(kestrel_coll_node_address);
	if (!bg->cops.ready || !bg->cops.send || !bg->cops.register_rx ||
	    !bg->cops.unregister_rx || !bg->cops.node_address) {
		dev_warn(bg->dev, "kestrel_coll is not loaded: no collective path\n");
		bgnet_put_coll(bg);
		return 0;
	}
	ret = bg->cops.ready();
	if (ret) {
		bgnet_put_coll(bg);
		return ret;
	}
	bg->naddr = bg->cops.node_address();
	return 0;
}

static void bgnet_put_torus(struct bgnet *bg)
{
	if (bg->torus)
		bg->tapi->put(bg->torus);
	if (bg->tapi)
		symbol_put(kestrel_torus_api);
	bg->torus = NULL;
	bg->tapi = NULL;
}

static int bgnet_get_torus(struct bgnet *bg, struct device_node *np)
{
	struct device_node *tnp = of_parse_phandle(np, "torus-device", 0);
	struct kestrel_torus *t;

	if (!tnp)
		return 0;
	bg->tapi = symbol_get(kestrel_torus_api);
	if (!bg->tapi) {
		of_node_put(tnp);
		dev_warn(bg->dev, "kestrel_torus is not loaded: no torus path\n");
		return 0;
	}
	t = bg->tapi->get(tnp);
	of_node_put(tnp);
	if (IS_ERR(t)) {
		int ret = PTR_ERR(t);

		bgnet_put_torus(bg);
		if (ret == -EPROBE_DEFER)
			return ret;
		dev_warn(bg->dev, "torus-device is no torus (%d)\n", ret);
		return 0;
	}
	bg->torus = t;
	bg->tapi->info(t, &bg->tinfo);
	return 0;
}

static void bgnet_unbind(struct bgnet *bg)
{
	unsigned int i;

	if (bg->torus)
		bg->tapi->detach(bg->torus);
	if (bg->coll_rx_registered)
		bg->cops.unregister_rx(bg->channel);
	bg->coll_rx_registered = false;
	for (i = 0; i < BGNET_REASM_SLOTS; i++)
		if (bg->reasm[i].skb)
			bgnet_reasm_drop(&bg->reasm[i]);
	bgnet_put_torus(bg);
	bgnet_put_coll(bg);
}

static int bgnet_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	struct device_node *np = dev->of_node;
	struct net_device *ndev;
	struct bgnet *bg;
	u8 mac[ETH_ALEN];
	unsigned int max_mtu = ETH_MAX_MTU;
	int ret;

	ndev = alloc_etherdev(sizeof(*bg));
	if (!ndev)
		return -ENOMEM;
	SET_NETDEV_DEV(ndev, dev);
	bg = netdev_priv(ndev);
	bg->ndev = ndev;
	bg->dev = dev;
	timer_setup(&bg->coll_timer, bgnet_coll_timer, 0);
	bg->coll_window_end = jiffies; /* jiffies start near the wrap: never 0 */
	platform_set_drvdata(pdev, bg);

	if (of_property_read_u32(np, "tree-route", &bg->route))
		bg->route = 0;
	if (of_property_read_u32(np, "tree-channel", &bg->channel))
		bg->channel = 0;
	if (of_property_read_u32(np, "network-id", &bg->network_id))
		bg->network_id = 0;
	if (bg->route > KESTREL_BGP_COLL_HDR_CLASS_MASK || bg->channel >= KESTREL_COLL_VCS) {
		ret = dev_err_probe(dev, -EINVAL, "bad tree-route %u or tree-channel %u\n",
				    bg->route, bg->channel);
		goto err_free;
	}

	ret = bgnet_get_torus(bg, np);
	if (ret)
		goto err_free;
	ret = bgnet_get_coll(bg, np);
	if (ret)
		goto err_unbind;
	if (!bg->tapi && !bg->cops.send) {
		ret = dev_err_probe(dev, -ENODEV, "neither a torus nor a collective to use\n");
		goto err_unbind;
	}

	if (of_get_mac_address(np, mac)) {
		if (!bg->tapi) {
			ret = dev_err_probe(dev, -EINVAL, "no local-mac-address\n");
			goto err_unbind;
		}
		/* The torus-style address of this node: 06:00:00:X:Y:Z. */
		mac[0] = KESTREL_BGP_TORUS_MAC_TORUS_KIND;
		mac[1] = 0;
		mac[2] = 0;
		memcpy(&mac[3], bg->tinfo.coords, 3);
	}
	eth_hw_addr_set(ndev, mac);

	if (bg->tapi)
		max_mtu = KESTREL_TORUS_MAX_MSG - KESTREL_TORUS_LINK_HDR_LEN - ETH_HLEN;
	if (bg->cops.send)
		max_mtu = min_t(unsigned int, max_mtu,
				BGNET_COLL_MAX_PKTS * BGNET_COLL_CHUNK - ETH_HLEN);
	ndev->min_mtu = ETH_MIN_MTU;
	ndev->max_mtu = max_mtu;
	ndev->mtu = clamp_t(unsigned int, mtu, ETH_MIN_MTU, max_mtu);
	ndev->needed_headroom = ALIGN(KESTREL_TORUS_LINK_HDR_LEN, 4);
	ndev->netdev_ops = &bgnet_netdev_ops;
	ndev->ethtool_ops = &bgnet_ethtool_ops;
	ndev->sysfs_groups[0] = &bgnet_attr_group;

	ret = register_netdev(ndev);
	if (ret)
		goto err_unbind;

	if (bg->tapi) {
		struct kestrel_torus_client c = {
			.rx = bgnet_torus_rx,
			.tx_wake = bgnet_torus_wake,
			.ctx = bg,
		};

		ret = bg->tapi->attach(bg->torus, &c);
		if (ret) {
			dev_err(dev, "torus already has a client (%d)\n", ret);
			goto err_unregister;
		}
	}
	if (bg->cops.send) {
		ret = bg->cops.register_rx(bg->channel, bgnet_coll_rx, bg);
		if (ret) {
			dev_err(dev, "collective VC%u already has a receiver (%d)\n", bg->channel,
				ret);
			goto err_unregister;
		}
		bg->coll_rx_registered = true;
	}

	netdev_info(ndev, "bgnet %pM: torus %s (%u,%u,%u), collective %s (node %u, route %u, VC%u), MTU %u, transport %s\n",
		    ndev->dev_addr, bg->tapi ? "yes" : "no", bg->tinfo.coords[0],
		    bg->tinfo.coords[1], bg->tinfo.coords[2], bg->cops.send ? "yes" : "no",
		    bg->naddr, bg->route, bg->channel, ndev->mtu,
		    bgnet_transport_names[READ_ONCE(bgnet_transport)]);
	if (bg->tapi && bg->cops.send && bgnet_mac_to_naddr(bg, ndev->dev_addr) != bg->naddr)
		netdev_warn(ndev, "node address %u is not the rank of (%u,%u,%u): transport=collective cannot reach torus-style MACs\n",
			    bg->naddr, bg->tinfo.coords[0], bg->tinfo.coords[1],
			    bg->tinfo.coords[2]);
	return 0;

err_unregister:
	unregister_netdev(ndev);
	del_timer_sync(&bg->coll_timer);
err_unbind:
	bgnet_unbind(bg);
err_free:
	free_netdev(ndev);
	return ret;
}

static int bgnet_remove(struct platform_device *pdev)
{
	struct bgnet *bg = platform_get_drvdata(pdev);
	struct net_device *ndev = bg->ndev;

	unregister_netdev(ndev);
	del_timer_sync(&bg->coll_timer);
	bgnet_unbind(bg);
	free_netdev(ndev);
	return 0;
}

static const struct of_device_id bgnet_of_match[] = {
	{ .compatible = "kestrel,bgnet" },
	{},
};
MODULE_DEVICE_TABLE(of, bgnet_of_match);

static struct platform_driver bgnet_driver = {
	.probe = bgnet_probe,
	.remove = bgnet_remove,
	.driver = {
		.name = DRV_NAME,
		.of_match_table = bgnet_of_match,
	},
};
module_platform_driver(bgnet_driver);

MODULE_DESCRIPTION("Kestrel bgnet: Ethernet over the BG/P torus and collective network");
MODULE_LICENSE("GPL");
