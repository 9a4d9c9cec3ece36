// SPDX-License-Identifier: GPL-2.0
/*
 * kestrel_torus.c: Linux 6.1 driver for the torus DMA group of a Kestrel VM
 * (device tree compatible "kestrel,bgp-torus").
 *
 * The VM owns one DMA group of the BG/P torus DMA engine (bgp-interconnect.md 2.3); the VMM
 * models it in front of Kestrel's fabric, which is the node's interconnect. This driver uses
 * one injection FIFO, one injection counter and one reception FIFO of that group to move
 * messages of up to KESTREL_TORUS_MAX_MSG bytes between nodes as memory-FIFO packets, and
 * offers them to one client (kestrel_bgnet.ko) through kestrel_torus.h.
 *
 * Sending: a 32-byte descriptor per message in the injection FIFO (DMA-able kernel memory).
 * The injection counter's BASE is 0, so a descriptor's base_offset is the physical address
 * of the message; before moving TAIL the driver adds the message length to the counter
 * (INCREMENT), and the counter's hit-zero interrupt tells it to free the sent buffers up to
 * the FIFO's HEAD.
 * Receiving: a ring of 256-byte slots (16-byte packet header + 240 bytes of payload) that the
 * engine fills; the reception FIFO's threshold interrupt makes the driver walk the slots from
 * HEAD to TAIL, reassemble messages by source id and Put_Offset, and give the slots back by
 * writing HEAD.
 *
 * Every register number, bit and field comes from kestrel_bgp.h (generated from Kestrel's
 * bgp/ crate). Registers of the group page are reached with MMIO, the DMA and torus
 * DCRs (all >= 1024) with mfdcrx/mtdcrx, which Kestrel's VMM emulates. All FIFO addresses
 * are guest-physical addresses >> 4; the VMM translates them.
 */
#include <linux/bitmap.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/irq.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/of.h>
#include <linux/of_platform.h>
#include <linux/platform_device.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include <asm/dcr-native.h>

#include "include/kestrel_bgp.h"
#include "kestrel_torus.h"

#define DRV_NAME "kestrel_torus"

/* The driver's choice of resources inside its group (any would do; these are Kittyhawk's
 * kernel choices, bgp-interconnect.md 2.3). */
#define KT_INJ_FIFO 31
#define KT_INJ_COUNTER 63
#define KT_RCV_FIFO 7
/* The PID the driver sends with; every PID of the node maps to KT_RCV_FIFO anyway. */
#define KT_PID 3
/* The hit-zero interrupt line (of four) the injection counter's subgroup is routed to, and
 * the reception FIFO interrupt type (of four) whose threshold interrupt is used. */
#define KT_INJ_HITZERO_LINE 0
#define KT_RCV_TYPE 0

#define KT_TX_ENTRIES 256 /* descriptors in the injection FIFO */
#define KT_RX_ENTRIES 512 /* full-size slots the reception FIFO holds */
#define KT_DESC_BYTES KESTREL_BGP_DMA_DESC_BYTES
/* A reception slot is one packet: 16-byte header and payload, padded to 32-byte chunks
 * (the header's Chunks field + 1); a full-size one carries 240 bytes of payload. */
#define KT_SLOT_HDR KESTREL_BGP_DMA_PKT_HDR_BYTES
#define KT_SLOT_BYTES (KESTREL_BGP_DMA_PKT_HDR_BYTES + KESTREL_BGP_DMA_PKT_MAX_PAYLOAD)
#define KT_RX_QUADS (KT_RX_ENTRIES * KT_SLOT_BYTES / 16)
#define KT_REASM_SLOTS 16
/* A partial message older than this is dropped (Kittyhawk's collective used 100 ms). */
#define KT_REASM_TIMEOUT (HZ / 10)

struct kt_reasm {
	struct sk_buff *skb; /* NULL: slot free */
	u32 src_id;
	u32 total;	 /* message length; KESTREL_TORUS_MAX_MSG until packet 0 arrived */
	u64 have;	 /* bit i: packet i (offset 240 * i) arrived */
	unsigned long started;
};

struct kestrel_torus {
	struct device *dev;
	void __iomem *regs;
	unsigned int dcr_torus; /* first torus DCR (0xC80) */
	unsigned int dcr_dma;	/* first DMA DCR (0xD00) */
	u32 group;		/* the DMA group the VM sees (3 in a Kestrel VM) */
	struct kestrel_torus_info info;
	bool up;

	/* injection */
	spinlock_t tx_lock;
	__be32 *tx_ring; /* KT_TX_ENTRIES descriptors of 8 words */
	dma_addr_t tx_phys;
	u32 tx_start; /* tx_phys >> 4 */
	struct sk_buff *tx_skb[KT_TX_ENTRIES];
	dma_addr_t tx_map[KT_TX_ENTRIES];
	unsigned int tx_tail; /* next free descriptor */
	unsigned int tx_done; /* oldest descriptor not yet reclaimed */
	bool tx_stopped;      /* a send saw a full FIFO: wake the client on reclaim */
	u8 conn_id;

	/* reception */
	spinlock_t rx_lock;
	u8 *rx_ring; /* KT_RX_QUADS quads of packet slots */
	dma_addr_t rx_phys;
	u32 rx_start; /* rx_phys >> 4 */
	unsigned int rx_head; /* in quads from rx_start */
	u8 rx_bounce[KT_SLOT_BYTES]; /* a slot the ring's END cuts in two, made whole */
	struct kt_reasm reasm[KT_REASM_SLOTS];

	/* the client, read under rx_lock / tx_lock in the callbacks' paths */
	spinlock_t client_lock;
	struct kestrel_torus_client client;
	bool has_client;

	/* statistics, for the log and sysfs */
	unsigned long tx_msgs, tx_busy, rx_msgs, rx_pkts, rx_drops, rx_bad, irq_errors;
};

/* ---- register access ---- */

static u32 kt_rd(struct kestrel_torus *t, u32 off)
{
	return ioread32be(t->regs + off);
}

static void kt_wr(struct kestrel_torus *t, u32 off, u32 val)
{
	iowrite32be(val, t->regs + off);
}

static u32 kt_dma_dcr_rd(struct kestrel_torus *t, u32 off)
{
	return mfdcrx(t->dcr_dma + off);
}

static void kt_dma_dcr_wr(struct kestrel_torus *t, u32 off, u32 val)
{
	mtdcrx(t->dcr_dma + off, val);
}

static void kt_dma_dcr_set(struct kestrel_torus *t, u32 off, u32 bits)
{
	kt_dma_dcr_wr(t, off, kt_dma_dcr_rd(t, off) | bits);
}

static void kt_dma_dcr_clear(struct kestrel_torus *t, u32 off, u32 bits)
{
	kt_dma_dcr_wr(t, off, kt_dma_dcr_rd(t, off) & ~bits);
}

/* Bit of a 32-bit word for index i, MSB first, as every BG/P bit vector. */
static u32 kt_bit(unsigned int i)
{
	return 0x80000000u >> (i % 32);
}

static u32 kt_inj_fifo(unsigned int f, u32 reg)
{
	return KESTREL_BGP_DMA_INJ_FIFO + f * KESTREL_BGP_DMA_FIFO_STRIDE + reg;
}

static u32 kt_rcv_fifo(unsigned int f, u32 reg)
{
	return KESTREL_BGP_DMA_RCV_FIFO + f * KESTREL_BGP_DMA_FIFO_STRIDE + reg;
}

static u32 kt_inj_ctr(unsigned int c, u32 reg)
{
	return KESTREL_BGP_DMA_INJ_CTR + c * KESTREL_BGP_DMA_FIFO_STRIDE + reg;
}

/* Reception FIFO index across groups (bit g*8+f of the reception bit vectors). */
static unsigned int kt_rcv_index(struct kestrel_torus *t)
{
	return t->group * KESTREL_BGP_DMA_RCV_FIFOS + KT_RCV_FIFO;
}

/* ---- injection ---- */

static void kt_fill_desc(struct kestrel_torus *t, __be32 *d, dma_addr_t addr, u32 len, u8 x,
			 u8 y, u8 z)
{
	u32 hw0, hw1;
	u32 counter_id = t->group * KESTREL_BGP_DMA_COUNTERS + KT_INJ_COUNTER;

	/* Hardware header: skip the checksum, full 240-byte packets (Chunks = 7), PID bits,
	 * memory FIFO (Dm = 0), dynamic routing on VC 0, hints 0 (the engine routes). */
	hw0 = KESTREL_BGP_DMA_HW_SK |
	      (KESTREL_BGP_DMA_HW_CHUNKS_MASK << KESTREL_BGP_DMA_HW_CHUNKS_SHIFT) |
	      (((KT_PID >> 1) & 1) ? KESTREL_BGP_DMA_HW_PID0 : 0) |
	      ((KT_PID & 1) ? KESTREL_BGP_DMA_HW_PID1 : 0) |
	      KESTREL_BGP_DMA_HW_DYNAMIC |
	      ((u32)x & KESTREL_BGP_DMA_HW_X_MASK);
	hw1 = ((u32)y << KESTREL_BGP_DMA_HW_Y_SHIFT) | ((u32)z << KESTREL_BGP_DMA_HW_Z_SHIFT);

	d[0] = cpu_to_be32(0);
	d[1] = cpu_to_be32(counter_id);
	d[2] = cpu_to_be32((u32)addr);
	d[3] = cpu_to_be32(len);
	d[4] = cpu_to_be32(hw0);
	d[5] = cpu_to_be32(hw1);
	d[6] = cpu_to_be32(0); /* Put_Offset of the first packet; the engine adds 240 a packet */
	d[7] = cpu_to_be32(((u32)t->conn_id << 24) | t->info.src_key);
}

/* Free the descriptors the engine has consumed (up to HEAD). Caller holds tx_lock. */
static void kt_reclaim_locked(struct kestrel_torus *t)
{
	u32 head = kt_rd(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_HEAD));
	u32 quads = head - t->tx_start;
	unsigned int idx = quads / (KT_DESC_BYTES / 16);

	if (head < t->tx_start || idx >= KT_TX_ENTRIES || quads % (KT_DESC_BYTES / 16)) {
		dev_err_ratelimited(t->dev, "injection HEAD %#x outside the FIFO\n", head);
		t->irq_errors++;
		return;
	}
	while (t->tx_done != idx) {
		unsigned int i = t->tx_done;

		if (t->tx_skb[i]) {
			dma_unmap_single(t->dev, t->tx_map[i], t->tx_skb[i]->len, DMA_TO_DEVICE);
			dev_consume_skb_any(t->tx_skb[i]);
			t->tx_skb[i] = NULL;
		}
		t->tx_done = (i + 1) % KT_TX_ENTRIES;
	}
}

static int kt_send(struct kestrel_torus *t, u8 x, u8 y, u8 z, u32 dst_key, u16 lnk_proto,
		   struct sk_buff *skb)
{
	struct kestrel_torus_link_hdr *hdr;
	unsigned long flags;
	unsigned int i;
	dma_addr_t addr;
	u32 len;

	if (skb->len + KESTREL_TORUS_LINK_HDR_LEN > KESTREL_TORUS_MAX_MSG)
		return -EMSGSIZE;
	if (t->info.dims[0] &&
	    (x >= t->info.dims[0] || y >= t->info.dims[1] || z >= t->info.dims[2]))
		return -EINVAL;
	if (skb_linearize(skb) || skb_cow_head(skb, KESTREL_TORUS_LINK_HDR_LEN))
		return -ENOMEM;

	spin_lock_irqsave(&t->tx_lock, flags);
	if (!t->up) {
		spin_unlock_irqrestore(&t->tx_lock, flags);
		return -ENODEV;
	}
	if ((t->tx_tail + 1) % KT_TX_ENTRIES == t->tx_done) {
		kt_reclaim_locked(t);
		if ((t->tx_tail + 1) % KT_TX_ENTRIES == t->tx_done) {
			t->tx_stopped = true;
			t->tx_busy++;
			spin_unlock_irqrestore(&t->tx_lock, flags);
			return -EBUSY;
		}
	}

	hdr = skb_push(skb, KESTREL_TORUS_LINK_HDR_LEN);
	len = skb->len;
	hdr->dst_key = cpu_to_be32(dst_key);
	hdr->len = cpu_to_be32(len);
	hdr->lnk_proto = cpu_to_be16(lnk_proto);
	hdr->opt = 0;

	addr = dma_map_single(t->dev, skb->data, len, DMA_TO_DEVICE);
	if (dma_mapping_error(t->dev, addr)) {
		skb_pull(skb, KESTREL_TORUS_LINK_HDR_LEN);
		spin_unlock_irqrestore(&t->tx_lock, flags);
		return -ENOMEM;
	}

	i = t->tx_tail;
	t->conn_id++;
	kt_fill_desc(t, &t->tx_ring[i * (KT_DESC_BYTES / 4)], addr, len, x, y, z);
	t->tx_skb[i] = skb;
	t->tx_map[i] = addr;
	t->tx_tail = (i + 1) % KT_TX_ENTRIES;
	t->tx_msgs++;
	/* Descriptor visible before the engine is told about it. */
	wmb();
	kt_wr(t, kt_inj_ctr(KT_INJ_COUNTER, KESTREL_BGP_DMA_CTR_INCREMENT),
	      len);
	kt_wr(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_TAIL),
	      t->tx_start + t->tx_tail * (KT_DESC_BYTES / 16));
	spin_unlock_irqrestore(&t->tx_lock, flags);
	return 0;
}

static irqreturn_t kt_tx_irq(int irq, void *data)
{
	struct kestrel_torus *t = data;
	u32 word = KT_INJ_COUNTER / 32, bit = kt_bit(KT_INJ_COUNTER);
	bool wake = false;
	u32 hit;

	hit = kt_rd(t, KESTREL_BGP_DMA_INJ_CTR_HIT_ZERO + 4 * word);
	if (!(hit & bit))
		return IRQ_NONE;
	kt_wr(t, KESTREL_BGP_DMA_INJ_CTR_CLEAR_HIT_ZERO + 4 * word, bit);

	spin_lock(&t->tx_lock);
	kt_reclaim_locked(t);
	if (t->tx_stopped && (t->tx_tail + 1) % KT_TX_ENTRIES != t->tx_done) {
		t->tx_stopped = false;
		wake = true;
	}
	spin_unlock(&t->tx_lock);

	if (wake) {
		spin_lock(&t->client_lock);
		if (t->has_client && t->client.tx_wake)
			t->client.tx_wake(t->client.ctx);
		spin_unlock(&t->client_lock);
	}
	return IRQ_HANDLED;
}

/* ---- reception ---- */

static void kt_reasm_free(struct kt_reasm *r)
{
	dev_kfree_skb_irq(r->skb);
	r->skb = NULL;
}

/* The reassembly slot for src_id, or a new one (dropping stale or the oldest partial
 * message if all are in use). Caller holds rx_lock. */
static struct kt_reasm *kt_reasm_find(struct kestrel_torus *t, u32 src_id)
{
	struct kt_reasm *free = NULL, *oldest = NULL;
	unsigned int i;

	for (i = 0; i < KT_REASM_SLOTS; i++) {
		struct kt_reasm *r = &t->reasm[i];

		if (!r->skb) {
			if (!free)
				free = r;
			continue;
		}
		if (r->src_id == src_id)
			return r;
		if (time_after(jiffies, r->started + KT_REASM_TIMEOUT)) {
			t->rx_drops++;
			kt_reasm_free(r);
			if (!free)
				free = r;
			continue;
		}
		if (!oldest || time_before(r->started, oldest->started))
			oldest = r;
	}
	if (!free) {
		t->rx_drops++;
		kt_reasm_free(oldest);
		free = oldest;
	}
	free->skb = NULL;
	free->src_id = src_id;
	free->total = 0;
	free->have = 0;
	free->started = jiffies;
	return free;
}

static void kt_deliver(struct kestrel_torus *t, struct sk_buff *skb, u32 src_id)
{
	struct kestrel_torus_link_hdr *hdr = (void *)skb->data;
	u32 dst_key = be32_to_cpu(hdr->dst_key);
	u16 proto = be16_to_cpu(hdr->lnk_proto);

	skb_pull(skb, KESTREL_TORUS_LINK_HDR_LEN);
	t->rx_msgs++;
	spin_lock(&t->client_lock);
	if (t->has_client) {
		t->client.rx(t->client.ctx, skb, src_id & 0xffffff, dst_key, proto);
		skb = NULL;
	}
	spin_unlock(&t->client_lock);
	if (skb) {
		t->rx_drops++;
		dev_kfree_skb_irq(skb);
	}
}

/* One received packet: the slot's 16-byte header and `room` bytes of payload. */
static void kt_rx_packet(struct kestrel_torus *t, const u8 *slot, unsigned int room)
{
	const __be32 *w = (const __be32 *)slot;
	const u8 *payload = slot + KT_SLOT_HDR;
	u32 offset = be32_to_cpu(w[2]);
	u32 src_id = be32_to_cpu(w[3]);
	unsigned int pkt = offset / KESTREL_TORUS_PKT_PAYLOAD, npkts;
	struct kt_reasm *r;
	u32 n;

	t->rx_pkts++;
	if (offset % KESTREL_TORUS_PKT_PAYLOAD || pkt >= KESTREL_TORUS_MAX_PKTS) {
		t->rx_bad++;
		return;
	}
	r = kt_reasm_find(t, src_id);
	if (!r->skb) {
		u32 total = KESTREL_TORUS_MAX_MSG;

		if (offset == 0 && room >= KESTREL_TORUS_LINK_HDR_LEN)
			total = be32_to_cpu(((const struct kestrel_torus_link_hdr *)payload)->len);
		if (total < KESTREL_TORUS_LINK_HDR_LEN || total > KESTREL_TORUS_MAX_MSG) {
			t->rx_bad++;
			return;
		}
		/* 2 bytes ahead of the 12-byte link header put the IP header of a frame on a
		 * 4-byte boundary. */
		r->skb = __dev_alloc_skb(total + 2, GFP_ATOMIC);
		if (!r->skb) {
			t->rx_drops++;
			return;
		}
		skb_reserve(r->skb, 2);
		r->total = total;
	} else if (offset == 0 && room >= KESTREL_TORUS_LINK_HDR_LEN) {
		u32 total = be32_to_cpu(((const struct kestrel_torus_link_hdr *)payload)->len);

		/* The buffer was sized for the longest message; now the length is known. */
		if (total < KESTREL_TORUS_LINK_HDR_LEN || total > r->total) {
			t->rx_bad++;
			kt_reasm_free(r);
			return;
		}
		r->total = total;
	}
	if (offset >= r->total) {
		t->rx_bad++;
		kt_reasm_free(r);
		return;
	}
	n = min_t(u32, KESTREL_TORUS_PKT_PAYLOAD, r->total - offset);
	if (n > room && offset && !(r->have & 1)) {
		/* Length not known yet: a short packet is the message's last. */
		n = room;
	} else if (n > room) {
		t->rx_bad++;
		kt_reasm_free(r);
		return;
	}
	memcpy(r->skb->data + offset, payload, n);
	r->have |= 1ull << pkt;

	npkts = DIV_ROUND_UP(r->total, KESTREL_TORUS_PKT_PAYLOAD);
	/* Complete only once packet 0 (the length) and every packet below npkts are in; a
	 * packet above npkts (possible only before packet 0 arrived) makes the message bad. */
	if (r->total == KESTREL_TORUS_MAX_MSG && !(r->have & 1))
		return;
	if (r->have >> npkts) {
		t->rx_bad++;
		kt_reasm_free(r);
		return;
	}
	if (r->have == GENMASK_ULL(npkts - 1, 0)) {
		struct sk_buff *skb = r->skb;

		r->skb = NULL;
		skb_put(skb, r->total);
		kt_deliver(t, skb, src_id);
	}
}

static irqreturn_t kt_rx_irq(int irq, void *data)
{
	struct kestrel_torus *t = data;
	unsigned int ri = kt_rcv_index(t), tq, used;
	u32 word = ri / 32, bit = kt_bit(ri);
	u32 tail;

	/* Clear the threshold latch before reading TAIL: a packet landing after the read raises
	 * it again. */
	kt_wr(t, KESTREL_BGP_DMA_RCV_THRESHOLD_CLEAR + 4 * word, bit);

	spin_lock(&t->rx_lock);
	tail = kt_rd(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_TAIL));
	tq = tail - t->rx_start;
	if (tail < t->rx_start || tq >= KT_RX_QUADS) {
		spin_unlock(&t->rx_lock);
		dev_err_ratelimited(t->dev, "reception TAIL %#x outside the FIFO\n", tail);
		t->irq_errors++;
		return IRQ_HANDLED;
	}
	if (t->rx_head == tq) {
		spin_unlock(&t->rx_lock);
		return IRQ_NONE;
	}
	used = (tq + KT_RX_QUADS - t->rx_head) % KT_RX_QUADS;
	while (used) {
		const u8 *slot = t->rx_ring + t->rx_head * 16;
		u32 hw0 = be32_to_cpup((const __be32 *)slot);
		unsigned int quads = ((hw0 >> KESTREL_BGP_DMA_HW_CHUNKS_SHIFT &
				       KESTREL_BGP_DMA_HW_CHUNKS_MASK) + 1) *
				     (KESTREL_BGP_DMA_CHUNK_BYTES / 16);
		unsigned int to_end = KT_RX_QUADS - t->rx_head;

		if (quads > used) {
			/* A header whose size overruns TAIL: nothing after it can be trusted. */
			t->rx_bad++;
			dev_err_ratelimited(t->dev, "reception slot of %u quads overruns TAIL\n",
					    quads);
			t->rx_head = tq;
			break;
		}
		if (quads > to_end) {
			/* The engine wrapped this slot at END: the rest is at START. */
			memcpy(t->rx_bounce, slot, to_end * 16);
			memcpy(t->rx_bounce + to_end * 16, t->rx_ring, (quads - to_end) * 16);
			slot = t->rx_bounce;
		}
		kt_rx_packet(t, slot, quads * 16 - KT_SLOT_HDR);
		t->rx_head = (t->rx_head + quads) % KT_RX_QUADS;
		used -= quads;
	}
	kt_wr(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_HEAD), t->rx_start + t->rx_head);
	spin_unlock(&t->rx_lock);
	return IRQ_HANDLED;
}

/* The DMA fatal-error line: a range-check violation or a bad descriptor of this VM's. */
static irqreturn_t kt_fatal_irq(int irq, void *data)
{
	struct kestrel_torus *t = data;
	u32 status = kt_dma_dcr_rd(t, KESTREL_BGP_DMA_DCR_FATAL_STATUS);
	u32 bad = kt_dma_dcr_rd(t, KESTREL_BGP_DMA_DCR_BAD_ADDRESS);

	t->irq_errors++;
	dev_err(t->dev, "DMA fatal error: status %#x, bad address %#llx; those errors now masked\n",
		status, (unsigned long long)bad << 4);
	/* The line stays up while status & enable is not zero and the status has no clear:
	 * mask what was seen, so one error is reported once rather than storming. */
	kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_FATAL_ENABLE, status);
	if (!status)
		disable_irq_nosync(irq);
	return IRQ_HANDLED;
}

/* Any other line of the node's DMA interrupts: an error the engine reports. */
static irqreturn_t kt_error_irq(int irq, void *data)
{
	struct kestrel_torus *t = data;

	t->irq_errors++;
	dev_err(t->dev, "DMA error interrupt (BIC %lu); masking it\n",
		irqd_to_hwirq(irq_get_irq_data(irq)));
	/* A level source the driver cannot clear would storm: mask it for good. */
	disable_irq_nosync(irq);
	return IRQ_HANDLED;
}

/* ---- setup ---- */

static void kt_program(struct kestrel_torus *t)
{
	unsigned int ri = kt_rcv_index(t);
	u32 cword = KT_INJ_COUNTER / 32, cbit = kt_bit(KT_INJ_COUNTER);
	u8 map = (t->group << 3) | KT_RCV_FIFO;
	unsigned int pid;
	u32 dirs;

	/* The DMA engine uses DMA (not the torus FIFOs), and all its units run. */
	kt_dma_dcr_wr(t, KESTREL_BGP_DMA_DCR_BASE_CONTROL, KESTREL_BGP_DMA_BASE_CONTROL_USE_DMA);

	/* The range-check windows stay as the VMM's reset leaves them: window 0 of both
	 * directions covers the VM's memory. */

	/* Injection FIFO: off while it is set up. */
	kt_wr(t, KESTREL_BGP_DMA_INJ_DEACTIVATE, kt_bit(KT_INJ_FIFO));
	kt_wr(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_START), t->tx_start);
	kt_wr(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_END),
	      t->tx_start + KT_TX_ENTRIES * KT_DESC_BYTES / 16);
	kt_wr(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_HEAD), t->tx_start);
	kt_wr(t, kt_inj_fifo(KT_INJ_FIFO, KESTREL_BGP_DMA_FIFO_TAIL), t->tx_start);

	/* Injection counter: base 0 (descriptors carry physical addresses), count 0. */
	kt_wr(t, KESTREL_BGP_DMA_INJ_CTR_DISABLE + 4 * cword, cbit);
	kt_wr(t, kt_inj_ctr(KT_INJ_COUNTER, KESTREL_BGP_DMA_CTR_BASE), 0);
	kt_wr(t, kt_inj_ctr(KT_INJ_COUNTER, KESTREL_BGP_DMA_CTR_COUNT), 0);
	kt_wr(t, KESTREL_BGP_DMA_INJ_CTR_CLEAR_HIT_ZERO + 4 * cword, cbit);
	kt_wr(t, KESTREL_BGP_DMA_INJ_CTR_ENABLE + 4 * cword, cbit);

	/* Reception FIFO. */
	kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_ENABLE, kt_bit(ri));
	kt_wr(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_START), t->rx_start);
	kt_wr(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_END),
	      t->rx_start + KT_RX_QUADS);
	kt_wr(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_HEAD), t->rx_start);
	kt_wr(t, kt_rcv_fifo(KT_RCV_FIFO, KESTREL_BGP_DMA_FIFO_TAIL), t->rx_start);
	t->rx_head = 0;

	/* Every PID and arrival direction of this node lands in the driver's reception FIFO. */
	dirs = (u32)map << 24 | (u32)map << 16 | (u32)map << 8 | map;
	for (pid = 0; pid < KESTREL_BGP_DMA_PIDS; pid++) {
		kt_dma_dcr_wr(t, KESTREL_BGP_DMA_DCR_RCV_MAP + 2 * (pid), dirs);
		kt_dma_dcr_wr(t, KESTREL_BGP_DMA_DCR_RCV_MAP + 2 * (pid) + 1, dirs);
	}
	/* Type 0 FIFO with threshold 0: the threshold latches (and interrupts) as soon as
	 * the FIFO holds more than 0 quads, i.e. on every packet. */
	kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_TYPE, kt_bit(ri));
	kt_dma_dcr_wr(t, KESTREL_BGP_DMA_DCR_RCV_THRESHOLD0, 0);
	kt_wr(t, KESTREL_BGP_DMA_RCV_THRESHOLD_CLEAR + 4 * (ri / 32), kt_bit(ri));
	kt_dma_dcr_set(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_ENABLE, kt_bit(ri));

	/* Injection FIFO: enable and activate. (The injection FIFO -> torus FIFO map DCRs are
	 * left alone: Kestrel's fabric has no torus FIFOs to choose among.) */
	kt_dma_dcr_set(t, KESTREL_BGP_DMA_DCR_INJ_FIFO_ENABLE + t->group, kt_bit(KT_INJ_FIFO));
	kt_wr(t, KESTREL_BGP_DMA_INJ_ACTIVATE, kt_bit(KT_INJ_FIFO));
}

static void kt_enable_irqs(struct kestrel_torus *t, bool on)
{
	unsigned int ri = kt_rcv_index(t);
	unsigned int sub = (t->group * KESTREL_BGP_DMA_COUNTERS + KT_INJ_COUNTER) / 8;

	if (on) {
		kt_dma_dcr_set(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_IRQ_EN + KT_RCV_TYPE, kt_bit(ri));
		kt_dma_dcr_set(t, KESTREL_BGP_DMA_DCR_INJ_CTR_IRQ_EN + KT_INJ_HITZERO_LINE,
			       kt_bit(sub));
	} else {
		kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_IRQ_EN + KT_RCV_TYPE,
				 kt_bit(ri));
		kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_INJ_CTR_IRQ_EN + KT_INJ_HITZERO_LINE,
				 kt_bit(sub));
	}
}

static void kt_quiesce(struct kestrel_torus *t)
{
	unsigned int ri = kt_rcv_index(t);

	kt_enable_irqs(t, false);
	kt_wr(t, KESTREL_BGP_DMA_INJ_DEACTIVATE, kt_bit(KT_INJ_FIFO));
	kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_INJ_FIFO_ENABLE + t->group, kt_bit(KT_INJ_FIFO));
	kt_dma_dcr_clear(t, KESTREL_BGP_DMA_DCR_RCV_FIFO_ENABLE, kt_bit(ri));
	kt_wr(t, KESTREL_BGP_DMA_INJ_CTR_DISABLE + 4 * (KT_INJ_COUNTER / 32),
	      kt_bit(KT_INJ_COUNTER));
}

static int kt_request_irqs(struct platform_device *pdev, struct kestrel_torus *t)
{
	int n = platform_irq_count(pdev), i, found = 0;

	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		irq_handler_t handler = kt_error_irq;
		const char *name = DRV_NAME " error";
		unsigned long hw;
		int virq, ret;

		virq = platform_get_irq(pdev, i);
		if (virq < 0)
			return virq;
		hw = irqd_to_hwirq(irq_get_irq_data(virq));
		if (hw == KESTREL_BGP_DMA_IRQ_RCV_FIFO_THRESHOLD + KT_RCV_TYPE) {
			handler = kt_rx_irq;
			name = DRV_NAME " rx";
			found |= 1;
		} else if (hw == KESTREL_BGP_DMA_IRQ_INJ_CTR_ZERO + KT_INJ_HITZERO_LINE) {
			handler = kt_tx_irq;
			name = DRV_NAME " tx";
			found |= 2;
		} else if (hw == KESTREL_BGP_DMA_IRQ_FATAL) {
			handler = kt_fatal_irq;
			name = DRV_NAME " fatal";
		}
		ret = devm_request_irq(&pdev->dev, virq, handler, 0, name, t);
		if (ret)
			return dev_err_probe(&pdev->dev, ret, "IRQ %d (BIC %lu)\n", virq, hw);
	}
	if (found != 3) {
		dev_err(&pdev->dev, "interrupts lack the reception threshold or hit-zero line\n");
		return -EINVAL;
	}
	return 0;
}

static ssize_t stats_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct kestrel_torus *t = dev_get_drvdata(dev);

	return sysfs_emit(buf,
			  "tx_msgs %lu\ntx_busy %lu\nrx_msgs %lu\nrx_pkts %lu\nrx_drops %lu\n"
			  "rx_bad %lu\nirq_errors %lu\n",
			  t->tx_msgs, t->tx_busy, t->rx_msgs, t->rx_pkts, t->rx_drops, t->rx_bad,
			  t->irq_errors);
}
static DEVICE_ATTR_RO(stats);

static int kt_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	struct device_node *np = dev->of_node;
	struct kestrel_torus *t;
	u32 coords[3], dcr[4], size;
	int ret, i;

	t = devm_kzalloc(dev, sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	t->dev = dev;
	spin_lock_init(&t->tx_lock);
	spin_lock_init(&t->rx_lock);
	spin_lock_init(&t->client_lock);

	t->regs = devm_platform_ioremap_resource(pdev, 0);
	if (IS_ERR(t->regs))
		return PTR_ERR(t->regs);
	ret = of_property_read_u32_array(np, "kestrel,coordinates", coords, 3);
	if (ret)
		return dev_err_probe(dev, ret, "no kestrel,coordinates\n");
	ret = of_property_read_u32(np, "kestrel,dma-group", &t->group);
	if (ret || t->group >= KESTREL_BGP_DMA_GROUPS)
		return dev_err_probe(dev, -EINVAL, "bad or missing kestrel,dma-group\n");
	/* dcr-reg = <torus base, count, DMA base, count>; the header's bases otherwise. */
	if (of_property_read_u32_array(np, "dcr-reg", dcr, 4) == 0) {
		t->dcr_torus = dcr[0];
		t->dcr_dma = dcr[2];
	} else {
		t->dcr_torus = KESTREL_BGP_TORUS_DCR_BASE;
		t->dcr_dma = KESTREL_BGP_DMA_DCR_BASE;
	}
	for (i = 0; i < 3; i++) {
		if (coords[i] > 0xff)
			return dev_err_probe(dev, -EINVAL, "coordinate %u > 255\n", coords[i]);
		t->info.coords[i] = coords[i];
	}
	t->info.src_key = coords[0] << 16 | coords[1] << 8 | coords[2];
	/* Machine size DCR: nodes - 1 per dimension, one byte each (X, Y, Z from the top). */
	size = mfdcrx(t->dcr_torus + KESTREL_BGP_TORUS_DCR_SIZE);
	t->info.dims[0] = ((size >> KESTREL_BGP_TORUS_COORD_X_SHIFT) & 0xff) + 1;
	t->info.dims[1] = ((size >> KESTREL_BGP_TORUS_COORD_Y_SHIFT) & 0xff) + 1;
	t->info.dims[2] = ((size >> KESTREL_BGP_TORUS_COORD_Z_SHIFT) & 0xff) + 1;
	for (i = 0; i < 3; i++) {
		if (t->info.coords[i] >= t->info.dims[i]) {
			dev_warn(dev, "coordinates (%u,%u,%u) outside machine size DCR %#x: size unknown\n",
				 coords[0], coords[1], coords[2], size);
			memset(t->info.dims, 0, sizeof(t->info.dims));
			break;
		}
	}

	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(32));
	if (ret)
		return dev_err_probe(dev, ret, "no 32-bit DMA\n");
	t->tx_ring = dmam_alloc_coherent(dev, KT_TX_ENTRIES * KT_DESC_BYTES, &t->tx_phys,
					 GFP_KERNEL);
	t->rx_ring = dmam_alloc_coherent(dev, KT_RX_QUADS * 16, &t->rx_phys,
					 GFP_KERNEL);
	if (!t->tx_ring || !t->rx_ring)
		return -ENOMEM;
	if ((t->tx_phys | t->rx_phys) & 0xf)
		return dev_err_probe(dev, -EINVAL, "FIFO memory not 16-byte aligned\n");
	t->tx_start = t->tx_phys >> 4;
	t->rx_start = t->rx_phys >> 4;

	platform_set_drvdata(pdev, t);
	kt_program(t);
	ret = kt_request_irqs(pdev, t);
	if (ret) {
		kt_quiesce(t);
		return ret;
	}
	t->up = true;
	kt_enable_irqs(t, true);
	ret = device_create_file(dev, &dev_attr_stats);
	if (ret)
		dev_warn(dev, "no stats file (%d)\n", ret);

	dev_info(dev, "torus node (%u,%u,%u) of %ux%ux%u, DMA group %u, %u-entry injection and %u-slot reception FIFO\n",
		 coords[0], coords[1], coords[2], t->info.dims[0], t->info.dims[1],
		 t->info.dims[2], t->group, KT_TX_ENTRIES, KT_RX_ENTRIES);
	return 0;
}

static int kt_remove(struct platform_device *pdev)
{
	struct kestrel_torus *t = platform_get_drvdata(pdev);
	unsigned long flags;
	unsigned int i;

	device_remove_file(&pdev->dev, &dev_attr_stats);
	spin_lock_irqsave(&t->tx_lock, flags);
	t->up = false;
	spin_unlock_irqrestore(&t->tx_lock, flags);
	kt_quiesce(t);
	/* devm frees the IRQs after this returns; keep them from running on freed buffers. */
	for (i = 0; i < (unsigned int)platform_irq_count(pdev); i++) {
		int virq = platform_get_irq(pdev, i);

		if (virq > 0)
			disable_irq(virq);
	}
	for (i = 0; i < KT_TX_ENTRIES; i++) {
		if (t->tx_skb[i]) {
			dma_unmap_single(t->dev, t->tx_map[i], t->tx_skb[i]->len, DMA_TO_DEVICE);
			dev_kfree_skb_any(t->tx_skb[i]);
			t->tx_skb[i] = NULL;
		}
	}
	for (i = 0; i < KT_REASM_SLOTS; i++)
		if (t->reasm[i].skb)
			dev_kfree_skb_any(t->reasm[i].skb);
	dev_info(&pdev->dev, "removed: %lu messages sent, %lu received, %lu dropped\n",
		 t->tx_msgs, t->rx_msgs, t->rx_drops);
	return 0;
}

/* ---- the API of kestrel_torus.h ---- */

static const struct of_device_id kt_of_match[] = {
	{ .compatible = "kestrel,bgp-torus" },
	{},
};
MODULE_DEVICE_TABLE(of, kt_of_match);

static struct platform_driver kt_driver;

static struct kestrel_torus *kt_get(struct device_node *np)
{
	struct platform_device *pdev;
	struct kestrel_torus *t;

	if (!np || !of_match_node(kt_of_match, np))
		return ERR_PTR(-ENODEV);
	pdev = of_find_device_by_node(np);
	if (!pdev)
		return ERR_PTR(-EPROBE_DEFER);
	device_lock(&pdev->dev);
	t = pdev->dev.driver == &kt_driver.driver ? platform_get_drvdata(pdev) : NULL;
	device_unlock(&pdev->dev);
	if (!t) {
		put_device(&pdev->dev);
		return ERR_PTR(-EPROBE_DEFER);
	}
	return t;
}

static void kt_put(struct kestrel_torus *t)
{
	put_device(t->dev);
}

static void kt_info(struct kestrel_torus *t, struct kestrel_torus_info *info)
{
	*info = t->info;
}

static int kt_attach(struct kestrel_torus *t, const struct kestrel_torus_client *c)
{
	unsigned long flags;
	int ret = 0;

	if (!c->rx)
		return -EINVAL;
	spin_lock_irqsave(&t->client_lock, flags);
	if (t->has_client) {
		ret = -EBUSY;
	} else {
		t->client = *c;
		t->has_client = true;
	}
	spin_unlock_irqrestore(&t->client_lock, flags);
	return ret;
}

static void kt_detach(struct kestrel_torus *t)
{
	unsigned long flags;

	/* Callbacks run under client_lock, so none runs once this returns. */
	spin_lock_irqsave(&t->client_lock, flags);
	t->has_client = false;
	memset(&t->client, 0, sizeof(t->client));
	spin_unlock_irqrestore(&t->client_lock, flags);
}

const struct kestrel_torus_api kestrel_torus_api = {
	.get = kt_get,
	.put = kt_put,
	.info = kt_info,
	.attach = kt_attach,
	.detach = kt_detach,
	.send = kt_send,
};
EXPORT_SYMBOL_GPL(kestrel_torus_api);

static struct platform_driver kt_driver = {
	.probe = kt_probe,
	.remove = kt_remove,
	.driver = {
		.name = DRV_NAME,
		.of_match_table = kt_of_match,
		/* bgnet holds pointers into the device; no unbinding under it */
		.suppress_bind_attrs = true,
	},
};
module_platform_driver(kt_driver);

MODULE_DESCRIPTION("Kestrel VM torus DMA group (Blue Gene/P torus DMA model)");
MODULE_LICENSE("GPL");
