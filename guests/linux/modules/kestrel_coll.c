// SPDX-License-Identifier: GPL-2.0
/*
 * kestrel_coll.c: driver for the Blue Gene/P collective (tree) network of a Kestrel VM.
 *
 * The device (`kestrel,bgp-collective`) has two virtual channels, each a 0x400-byte register
 * window (`reg` entries 0 and 1: VC0, VC1), and 0x80 DCRs (`dcr-reg = <base count>`), reached
 * with mfdcrx/mtdcrx because they lie above DCR 1023 (bgp-interconnect.md 2.5). Its four
 * interrupts come through the BIC (kestrel_bic.ko): injection exception, reception exception,
 * "a packet with the IRQ header bit arrived" on VC0 and on VC1. Every register number comes
 * from kestrel_bgp.h; the facts are bgp-interconnect.md 2.2.
 *
 * - Packets: one header word written to HI, then 16 quads to DI. The 440 has no Double Hummer,
 *   so a quad is four 32-bit stores at DI+0, +4, +8, +12 (Kestrel's model assembles them);
 *   reception reads HR, then 16 quads of four 32-bit loads from DR.
 * - Set up at probe: the node address (NADDR) from the device tree's `kestrel,node-address`
 *   when the DCR differs; P2P filtering on (VCFG RCVALL off), reception watermark 0 (the
 *   watermark condition holds while a VC holds a packet), injection watermark 4 (Kittyhawk's
 *   value; the injection-watermark interrupt stays disabled because sending polls the status
 *   word instead); the class routes named by the `routes` parameter get "this node injects"
 *   and "this node receives" (firmware's job on BG/P; Kestrel's VM has no firmware); the
 *   reception and injection error exceptions, and with `rx_watermark_irq=1` the reception
 *   watermark exception.
 * - Reception: on a VC's receive interrupt (asserted while a packet whose header has the IRQ
 *   bit waits; kestrel_coll.h's header helpers set it), or a reception-watermark exception, a
 *   threaded handler drains the VC and hands each packet to the receiver registered with
 *   kestrel_coll_register_rx() (include/kestrel_coll.h, the API for kestrel_bgnet.ko). The
 *   watermark exception is off by default: it asserts together with the receive line for
 *   every packet and would double the interrupt work (each BIC register access is a VMM exit).
 * - debugfs (kestrel_coll/): `stats` (counters, the status words and the DCRs set up at
 *   probe); `selftest`: writing "VC" sends one point-to-point test packet to this node's own
 *   address on that VC, "VC DEST" to node address DEST (another VM). A test packet that
 *   arrives on a VC without a receiver has its pattern checked and is counted as selftest_ok
 *   (it came from this node), peer_ok (from another node) or selftest_bad.
 */

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/of.h>
#include <linux/platform_device.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <asm/dcr-native.h>
#include <asm/unaligned.h>

#include "include/kestrel_bgp.h"
#include "include/kestrel_coll.h"

static unsigned int routes = 0x1;
module_param(routes, uint, 0444);
MODULE_PARM_DESC(routes,
		 "class routes (bit c = class c) this node injects into and receives (default: class 0)");

static bool rx_watermark_irq;
module_param(rx_watermark_irq, bool, 0444);
MODULE_PARM_DESC(rx_watermark_irq,
		 "also take the reception-watermark exception (for packets sent without the header IRQ bit; default: off)");

#define COLL_WORDS (KESTREL_BGP_COLL_PAYLOAD_BYTES / 4)
#define COLL_FIFO_QUADS (KESTREL_BGP_COLL_FIFO_PACKETS * KESTREL_BGP_COLL_PAYLOAD_QUADS)
/* Packets one interrupt drains before letting the line fire again. */
#define COLL_RX_BUDGET 64
/* The reception watermark and injection watermark programmed into VCFG (in packets). */
#define COLL_RWM 0
#define COLL_IWM 4
/* Marks a selftest packet: word 0 of its payload ('KCST'). */
#define COLL_SELFTEST_MAGIC 0x4b435354u

enum { COLL_IRQ_INJ_EXC, COLL_IRQ_RCV_EXC, COLL_IRQ_RCV_VC0, COLL_IRQ_RCV_VC1, COLL_NR_IRQS };

struct coll_vc {
	struct kestrel_coll *coll;
	unsigned int index;
	void __iomem *regs;
	/* Serialises injections (header + 16 quads must not interleave). */
	spinlock_t tx_lock;
	/* Serialises draining and the receiver's calls; guards rx and ctx. */
	struct mutex rx_lock;
	kestrel_coll_rx_fn rx;
	void *ctx;
	u32 buf[COLL_WORDS];
	u32 selftest_seq;
	u64 tx_packets, tx_busy, rx_packets, rx_dropped, selftest_ok, peer_ok, selftest_bad;
};

struct kestrel_coll {
	struct device *dev;
	unsigned int dcr_base;
	u32 node_address;
	struct coll_vc vc[KESTREL_BGP_COLL_VCS];
	int irq[COLL_NR_IRQS];
	/* PRXF/PIXF bits seen since load (ORed), and the exception interrupts taken. */
	u32 prxf_seen, pixf_seen;
	u64 rcv_exc, inj_exc;
	/* Watermark bits (PRX_WM0/WM1) that the reception exception's thread should drain. */
	atomic_t rx_pending;
	struct dentry *debugfs;
};

/* The device, once probed; the exported API works on it. */
static struct kestrel_coll *coll_dev;
static DEFINE_MUTEX(coll_dev_lock);

static u32 coll_dcr_read(struct kestrel_coll *coll, unsigned int off)
{
	return mfdcrx(coll->dcr_base + off);
}

static void coll_dcr_write(struct kestrel_coll *coll, unsigned int off, u32 value)
{
	mtdcrx(coll->dcr_base + off, value);
}

static u32 coll_status(struct coll_vc *vc)
{
	return ioread32be(vc->regs + KESTREL_BGP_COLL_S);
}

static struct kestrel_coll *coll_get(void)
{
	return smp_load_acquire(&coll_dev);
}

int kestrel_coll_ready(void)
{
	return coll_get() ? 0 : -EPROBE_DEFER;
}
EXPORT_SYMBOL_GPL(kestrel_coll_ready);

u32 kestrel_coll_node_address(void)
{
	struct kestrel_coll *coll = coll_get();

	return coll ? coll->node_address : 0;
}
EXPORT_SYMBOL_GPL(kestrel_coll_node_address);

int kestrel_coll_send(int vcn, u32 header, const void *payload)
{
	struct kestrel_coll *coll = coll_get();
	const u8 *p = payload;
	struct coll_vc *vc;
	unsigned long flags;
	unsigned int waited = 0, q, w;

	if (!coll)
		return -ENODEV;
	if (vcn < 0 || vcn >= KESTREL_BGP_COLL_VCS)
		return -EINVAL;
	vc = &coll->vc[vcn];

	spin_lock_irqsave(&vc->tx_lock, flags);
	for (;;) {
		u32 st = coll_status(vc);
		u32 hdrs = (st >> KESTREL_BGP_COLL_ST_INJ_HDRS_SHIFT) & KESTREL_BGP_COLL_ST_HDRS_MASK;
		u32 quads = (st >> KESTREL_BGP_COLL_ST_INJ_QUADS_SHIFT) &
			    KESTREL_BGP_COLL_ST_QUADS_MASK;

		if (hdrs < KESTREL_BGP_COLL_FIFO_PACKETS &&
		    quads + KESTREL_BGP_COLL_PAYLOAD_QUADS <= COLL_FIFO_QUADS)
			break;
		if (waited++ >= KESTREL_COLL_SEND_SPIN_US) {
			vc->tx_busy++;
			spin_unlock_irqrestore(&vc->tx_lock, flags);
			return -EBUSY;
		}
		udelay(1);
	}
	iowrite32be(header, vc->regs + KESTREL_BGP_COLL_HI);
	for (q = 0; q < KESTREL_BGP_COLL_PAYLOAD_QUADS; q++)
		for (w = 0; w < 4; w++)
			iowrite32be(get_unaligned_be32(p + 16 * q + 4 * w),
				    vc->regs + KESTREL_BGP_COLL_DI + 4 * w);
	vc->tx_packets++;
	spin_unlock_irqrestore(&vc->tx_lock, flags);
	return 0;
}
EXPORT_SYMBOL_GPL(kestrel_coll_send);

int kestrel_coll_register_rx(int vcn, kestrel_coll_rx_fn rx, void *ctx)
{
	struct kestrel_coll *coll = coll_get();
	struct coll_vc *vc;
	int ret = 0;

	if (!coll)
		return -ENODEV;
	if (vcn < 0 || vcn >= KESTREL_BGP_COLL_VCS || !rx)
		return -EINVAL;
	vc = &coll->vc[vcn];
	mutex_lock(&vc->rx_lock);
	if (vc->rx) {
		ret = -EBUSY;
	} else {
		vc->rx = rx;
		vc->ctx = ctx;
	}
	mutex_unlock(&vc->rx_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(kestrel_coll_register_rx);

void kestrel_coll_unregister_rx(int vcn)
{
	struct kestrel_coll *coll = coll_get();
	struct coll_vc *vc;

	if (!coll || vcn < 0 || vcn >= KESTREL_BGP_COLL_VCS)
		return;
	vc = &coll->vc[vcn];
	mutex_lock(&vc->rx_lock);
	vc->rx = NULL;
	vc->ctx = NULL;
	mutex_unlock(&vc->rx_lock);
}
EXPORT_SYMBOL_GPL(kestrel_coll_unregister_rx);

static u32 coll_selftest_word(u32 seq, unsigned int i)
{
	return seq * 0x9e3779b9u ^ (i * 0x01010101u);
}

/*
 * A packet that arrived on a VC without a receiver: a test packet (word 0 the magic, word 1
 * its sequence number, word 2 the sender's node address, the rest a pattern) or a drop.
 */
static void coll_unclaimed(struct coll_vc *vc)
{
	unsigned int i;

	if (vc->buf[0] != COLL_SELFTEST_MAGIC) {
		vc->rx_dropped++;
		return;
	}
	for (i = 3; i < COLL_WORDS; i++) {
		if (vc->buf[i] != coll_selftest_word(vc->buf[1], i)) {
			vc->selftest_bad++;
			dev_warn(vc->coll->dev, "VC%u: selftest packet %u: word %u is 0x%08x\n",
				 vc->index, vc->buf[1], i, vc->buf[i]);
			return;
		}
	}
	if (vc->buf[2] == vc->coll->node_address)
		vc->selftest_ok++;
	else
		vc->peer_ok++;
}

/* Reads every complete packet of the VC (up to the budget); process context. */
static void coll_drain(struct coll_vc *vc)
{
	unsigned int n, q, w;

	mutex_lock(&vc->rx_lock);
	for (n = 0; n < COLL_RX_BUDGET; n++) {
		u32 st = coll_status(vc);
		u32 hdrs = (st >> KESTREL_BGP_COLL_ST_RCV_HDRS_SHIFT) & KESTREL_BGP_COLL_ST_HDRS_MASK;
		u32 quads = (st >> KESTREL_BGP_COLL_ST_RCV_QUADS_SHIFT) &
			    KESTREL_BGP_COLL_ST_QUADS_MASK;
		u32 header;

		if (!hdrs || quads < KESTREL_BGP_COLL_PAYLOAD_QUADS)
			break;
		header = ioread32be(vc->regs + KESTREL_BGP_COLL_HR);
		for (q = 0; q < KESTREL_BGP_COLL_PAYLOAD_QUADS; q++)
			for (w = 0; w < 4; w++)
				vc->buf[4 * q + w] =
					ioread32be(vc->regs + KESTREL_BGP_COLL_DR + 4 * w);
		vc->rx_packets++;
		if (vc->rx)
			vc->rx(header, vc->buf, vc->ctx);
		else
			coll_unclaimed(vc);
	}
	mutex_unlock(&vc->rx_lock);
}

static irqreturn_t coll_rcv_thread(int irq, void *data)
{
	coll_drain(data);
	return IRQ_HANDLED;
}

static irqreturn_t coll_rcv_exc_hard(int irq, void *data)
{
	struct kestrel_coll *coll = data;
	u32 flags = coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_PRXF); /* a read clears */
	u32 errors = flags & ~(KESTREL_BGP_COLL_PRX_WM0 | KESTREL_BGP_COLL_PRX_WM1);

	coll->rcv_exc++;
	coll->prxf_seen |= flags;
	if (errors)
		dev_warn_ratelimited(coll->dev, "reception exception: PRXF 0x%08x\n", flags);
	if (flags & (KESTREL_BGP_COLL_PRX_WM0 | KESTREL_BGP_COLL_PRX_WM1)) {
		atomic_or(flags & (KESTREL_BGP_COLL_PRX_WM0 | KESTREL_BGP_COLL_PRX_WM1),
			  &coll->rx_pending);
		return IRQ_WAKE_THREAD;
	}
	return IRQ_HANDLED;
}

static irqreturn_t coll_rcv_exc_thread(int irq, void *data)
{
	struct kestrel_coll *coll = data;
	u32 pending = atomic_xchg(&coll->rx_pending, 0);

	if (pending & KESTREL_BGP_COLL_PRX_WM0)
		coll_drain(&coll->vc[0]);
	if (pending & KESTREL_BGP_COLL_PRX_WM1)
		coll_drain(&coll->vc[1]);
	return IRQ_HANDLED;
}

static irqreturn_t coll_inj_exc(int irq, void *data)
{
	struct kestrel_coll *coll = data;
	u32 flags = coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_PIXF); /* a read clears */

	coll->inj_exc++;
	coll->pixf_seen |= flags;
	dev_warn_ratelimited(coll->dev, "injection exception: PIXF 0x%08x\n", flags);
	return IRQ_HANDLED;
}

static int coll_stats_show(struct seq_file *m, void *unused)
{
	struct kestrel_coll *coll = m->private;
	unsigned int i;

	seq_printf(m, "node_address %u\ndcr_base 0x%x\nroutes 0x%04x\n", coll->node_address,
		   coll->dcr_base, routes);
	seq_printf(m, "rcv_exc %llu\ninj_exc %llu\nprxf_seen 0x%08x\npixf_seen 0x%08x\n",
		   coll->rcv_exc, coll->inj_exc, coll->prxf_seen, coll->pixf_seen);
	for (i = 0; i < KESTREL_BGP_COLL_VCS; i++) {
		struct coll_vc *vc = &coll->vc[i];

		seq_printf(m,
			   "vc%u status 0x%08x vcfg 0x%08x tx_packets %llu tx_busy %llu rx_packets %llu rx_dropped %llu selftest_ok %llu peer_ok %llu selftest_bad %llu receiver %s\n",
			   i, coll_status(vc), coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_VCFG0 + i),
			   vc->tx_packets, vc->tx_busy, vc->rx_packets, vc->rx_dropped,
			   vc->selftest_ok, vc->peer_ok, vc->selftest_bad, vc->rx ? "yes" : "no");
	}
	for (i = 0; i < KESTREL_BGP_COLL_RDR_COUNT; i++)
		seq_printf(m, "rdr%u 0x%08x\n", i,
			   coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_RDR0 + i));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(coll_stats);

static ssize_t coll_selftest_write(struct file *file, const char __user *ubuf, size_t len,
				   loff_t *ppos)
{
	struct kestrel_coll *coll = file->private_data;
	u32 payload[COLL_WORDS];
	unsigned int vcn, dest, i;
	struct coll_vc *vc;
	char cmd[32];
	u8 route;
	int ret, n;

	if (len >= sizeof(cmd))
		return -EINVAL;
	if (copy_from_user(cmd, ubuf, len))
		return -EFAULT;
	cmd[len] = 0;
	n = sscanf(cmd, "%u %u", &vcn, &dest);
	if (n < 1 || vcn >= KESTREL_BGP_COLL_VCS)
		return -EINVAL;
	if (n < 2)
		dest = coll->node_address;
	if (dest > KESTREL_BGP_COLL_HDR_P2P_ADDR_MASK)
		return -EINVAL;
	if (!routes)
		return -ENXIO;
	vc = &coll->vc[vcn];
	route = __ffs(routes);
	payload[0] = COLL_SELFTEST_MAGIC;
	payload[1] = ++vc->selftest_seq;
	payload[2] = coll->node_address;
	for (i = 3; i < COLL_WORDS; i++)
		payload[i] = coll_selftest_word(payload[1], i);
	ret = kestrel_coll_send(vcn, kestrel_coll_header_p2p(route, dest), payload);
	return ret ? ret : len;
}

static const struct file_operations coll_selftest_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = coll_selftest_write,
	.llseek = no_llseek,
};

/* Gives this node "injects into" and "receives" on the classes in `routes`. */
static void coll_setup_routes(struct kestrel_coll *coll)
{
	const u32 local = KESTREL_BGP_COLL_RDR_LO_SRCL | KESTREL_BGP_COLL_RDR_LO_TGTL;
	unsigned int c;

	for (c = 0; c < 2 * KESTREL_BGP_COLL_RDR_COUNT; c++) {
		unsigned int reg = KESTREL_BGP_COLL_DCR_RDR0 + c / 2;
		u32 bits = (c % 2) ? local >> KESTREL_BGP_COLL_RDR_HI_SHIFT : local;
		u32 v;

		if (!(routes & (1u << c)))
			continue;
		v = coll_dcr_read(coll, reg);
		if ((v & bits) == bits)
			continue;
		coll_dcr_write(coll, reg, v | bits);
		v = coll_dcr_read(coll, reg);
		if ((v & bits) != bits)
			dev_warn(coll->dev, "class %u: RDR%u reads 0x%08x after setting 0x%08x\n", c,
				 c / 2, v, bits);
	}
}

static void coll_setup(struct kestrel_coll *coll, u32 dt_naddr, bool have_dt_naddr)
{
	unsigned int i;

	coll->node_address = coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_NADDR);
	if (have_dt_naddr && coll->node_address != dt_naddr) {
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_NADDR, dt_naddr);
		coll->node_address = coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_NADDR);
		if (coll->node_address != dt_naddr)
			dev_warn(coll->dev, "NADDR reads %u, the device tree says %u\n",
				 coll->node_address, dt_naddr);
	}
	for (i = 0; i < KESTREL_BGP_COLL_VCS; i++) {
		u32 v = coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_VCFG0 + i);

		v &= ~(KESTREL_BGP_COLL_VCFG_RCVALL |
		       (KESTREL_BGP_COLL_VCFG_WM_MASK << KESTREL_BGP_COLL_VCFG_RWM_SHIFT) |
		       (KESTREL_BGP_COLL_VCFG_WM_MASK << KESTREL_BGP_COLL_VCFG_IWM_SHIFT));
		v |= (COLL_RWM << KESTREL_BGP_COLL_VCFG_RWM_SHIFT) |
		     (COLL_IWM << KESTREL_BGP_COLL_VCFG_IWM_SHIFT);
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_VCFG0 + i, v);
	}
	coll_setup_routes(coll);
	/* Clear stale flags (a read clears), then enable the exceptions this driver handles. */
	coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_PRXF);
	coll_dcr_read(coll, KESTREL_BGP_COLL_DCR_PIXF);
	coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PRXEN,
		       (rx_watermark_irq ? KESTREL_BGP_COLL_PRX_WM0 | KESTREL_BGP_COLL_PRX_WM1 : 0) |
			       KESTREL_BGP_COLL_PRX_BADADDR0 | KESTREL_BGP_COLL_PRX_BADADDR1 |
			       KESTREL_BGP_COLL_PRX_PUR0 | KESTREL_BGP_COLL_PRX_PUR1 |
			       KESTREL_BGP_COLL_PRX_HUR0 | KESTREL_BGP_COLL_PRX_HUR1);
	coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PIXEN,
		       KESTREL_BGP_COLL_PIX_COLLISION | KESTREL_BGP_COLL_PIX_BADHDR0 |
			       KESTREL_BGP_COLL_PIX_BADHDR1 | KESTREL_BGP_COLL_PIX_POF0 |
			       KESTREL_BGP_COLL_PIX_POF1 | KESTREL_BGP_COLL_PIX_HOF0 |
			       KESTREL_BGP_COLL_PIX_HOF1 | KESTREL_BGP_COLL_PIX_ENABLE);
}

static int kestrel_coll_probe(struct platform_device *pdev)
{
	static const char *const irq_names[COLL_NR_IRQS] = {
		"kestrel-coll-inj-exc", "kestrel-coll-rcv-exc", "kestrel-coll-vc0",
		"kestrel-coll-vc1"
	};
	struct device *dev = &pdev->dev;
	struct device_node *np = dev->of_node;
	struct kestrel_coll *coll;
	u32 dcr_count, dt_naddr;
	bool have_dt_naddr;
	unsigned int i;
	int ret;

	coll = devm_kzalloc(dev, sizeof(*coll), GFP_KERNEL);
	if (!coll)
		return -ENOMEM;
	coll->dev = dev;
	atomic_set(&coll->rx_pending, 0);

	/* The interrupts first: without the BIC driver this defers, before touching anything. */
	for (i = 0; i < COLL_NR_IRQS; i++) {
		coll->irq[i] = platform_get_irq(pdev, i);
		if (coll->irq[i] < 0)
			return coll->irq[i];
	}

	for (i = 0; i < KESTREL_BGP_COLL_VCS; i++) {
		struct coll_vc *vc = &coll->vc[i];
		struct resource *res;

		vc->coll = coll;
		vc->index = i;
		spin_lock_init(&vc->tx_lock);
		mutex_init(&vc->rx_lock);
		vc->regs = devm_platform_get_and_ioremap_resource(pdev, i, &res);
		if (IS_ERR(vc->regs))
			return PTR_ERR(vc->regs);
		if (resource_size(res) < KESTREL_BGP_COLL_VC_SIZE)
			return dev_err_probe(dev, -EINVAL, "VC%u window %pR smaller than 0x%x\n", i,
					     res, KESTREL_BGP_COLL_VC_SIZE);
	}

	if (of_property_read_u32_index(np, "dcr-reg", 0, &coll->dcr_base) ||
	    of_property_read_u32_index(np, "dcr-reg", 1, &dcr_count))
		return dev_err_probe(dev, -EINVAL, "no dcr-reg property\n");
	if (dcr_count < KESTREL_BGP_COLL_DCR_COUNT)
		return dev_err_probe(dev, -EINVAL, "dcr-reg has 0x%x DCRs, need 0x%x\n", dcr_count,
				     KESTREL_BGP_COLL_DCR_COUNT);
	have_dt_naddr = !of_property_read_u32(np, "kestrel,node-address", &dt_naddr);

	coll_setup(coll, dt_naddr, have_dt_naddr);

	ret = devm_request_threaded_irq(dev, coll->irq[COLL_IRQ_INJ_EXC], coll_inj_exc, NULL, 0,
					irq_names[COLL_IRQ_INJ_EXC], coll);
	if (!ret)
		ret = devm_request_threaded_irq(dev, coll->irq[COLL_IRQ_RCV_EXC], coll_rcv_exc_hard,
						coll_rcv_exc_thread, IRQF_ONESHOT,
						irq_names[COLL_IRQ_RCV_EXC], coll);
	for (i = 0; !ret && i < KESTREL_BGP_COLL_VCS; i++)
		ret = devm_request_threaded_irq(dev, coll->irq[COLL_IRQ_RCV_VC0 + i], NULL,
						coll_rcv_thread, IRQF_ONESHOT,
						irq_names[COLL_IRQ_RCV_VC0 + i], &coll->vc[i]);
	if (ret) {
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PRXEN, 0);
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PIXEN, 0);
		return dev_err_probe(dev, ret, "cannot request the interrupts\n");
	}

	platform_set_drvdata(pdev, coll);
	coll->debugfs = debugfs_create_dir("kestrel_coll", NULL);
	debugfs_create_file("stats", 0444, coll->debugfs, coll, &coll_stats_fops);
	debugfs_create_file("selftest", 0200, coll->debugfs, coll, &coll_selftest_fops);

	mutex_lock(&coll_dev_lock);
	if (coll_get()) {
		mutex_unlock(&coll_dev_lock);
		debugfs_remove_recursive(coll->debugfs);
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PRXEN, 0);
		coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PIXEN, 0);
		return dev_err_probe(dev, -EBUSY, "a second collective device is not supported\n");
	}
	smp_store_release(&coll_dev, coll);
	mutex_unlock(&coll_dev_lock);

	/* Packets that arrived before the interrupts were requested. */
	for (i = 0; i < KESTREL_BGP_COLL_VCS; i++)
		coll_drain(&coll->vc[i]);

	dev_info(dev, "collective: node address %u, DCRs 0x%x, irqs %d %d %d %d, routes 0x%x\n",
		 coll->node_address, coll->dcr_base, coll->irq[0], coll->irq[1], coll->irq[2],
		 coll->irq[3], routes);
	return 0;
}

static int kestrel_coll_remove(struct platform_device *pdev)
{
	struct kestrel_coll *coll = platform_get_drvdata(pdev);

	/* Clients hold a reference on this module, so none is left when the device goes. */
	mutex_lock(&coll_dev_lock);
	smp_store_release(&coll_dev, NULL);
	mutex_unlock(&coll_dev_lock);
	debugfs_remove_recursive(coll->debugfs);
	coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PRXEN, 0);
	coll_dcr_write(coll, KESTREL_BGP_COLL_DCR_PIXEN, 0);
	return 0;
}

static const struct of_device_id kestrel_coll_of_match[] = {
	{ .compatible = "kestrel,bgp-collective" },
	{}
};
MODULE_DEVICE_TABLE(of, kestrel_coll_of_match);

static struct platform_driver kestrel_coll_driver = {
	.probe = kestrel_coll_probe,
	.remove = kestrel_coll_remove,
	.driver = {
		.name = "kestrel-coll",
		.of_match_table = kestrel_coll_of_match,
		/* Exported API users rely on the device staying: no unbind through sysfs. */
		.suppress_bind_attrs = true,
	},
};
module_platform_driver(kestrel_coll_driver);

MODULE_DESCRIPTION("Kestrel VM: Blue Gene/P collective network");
MODULE_AUTHOR("Kestrel project");
MODULE_LICENSE("GPL");
