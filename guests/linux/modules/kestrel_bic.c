// SPDX-License-Identifier: GPL-2.0
/*
 * kestrel_bic.c: irqchip for the Blue Gene/P interrupt controller (BIC) of a Kestrel VM.
 *
 * On BG/P the BIC is the root interrupt controller; in a Kestrel VM (bamboo board, Linux 6.1)
 * it is a cascade: the VMM's virtual BIC drives UIC0 input 30 (level, active high), and this
 * driver chains on that input (docs/adr/0021-guest-drivers.md). Facts from
 * bgp-interconnect.md 2.1; every register number comes from kestrel_bgp.h (generated from
 * bgp/).
 *
 * - One linear irq_domain of KESTREL_BGP_BIC_GROUPS * 32 lines; the device tree specifier is
 *   one cell, the BIC line number `group * 32 + bit` (bit 0 = the MSB of a group's words).
 * - Cascade: read HIER_NCRIT[core 0]; the first set bit (MSB = group 0) names a group; read
 *   that group's NCRIT[core 0]; the first set bit names the line; handle it; repeat until
 *   HIER_NCRIT reads 0 (bounded, so a line that will not clear cannot wedge the CPU).
 * - mask/unmask write the line's TARGET nibble: 0 (disabled) or non-critical to core 0;
 *   ack writes the line's bit to STATUS_CLR. Lines are level-triggered (handle_level_irq):
 *   the VMM's model latches STATUS again while a device keeps its line asserted.
 *
 * Other BG/P drivers (kestrel_coll, kestrel_torus) name their lines with
 * `interrupt-parent = <&BIC>` and get them with platform_get_irq() once this module is loaded
 * (before that, platform_get_irq() returns -EPROBE_DEFER). An interrupt controller cannot go
 * away under its users, so this module has no exit function (it cannot be unloaded) and its
 * device cannot be unbound through sysfs.
 */

#include <linux/io.h>
#include <linux/irq.h>
#include <linux/irqchip/chained_irq.h>
#include <linux/irqdomain.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/platform_device.h>
#include <linux/spinlock.h>

#include "include/kestrel_bgp.h"

#define BIC_LINES (KESTREL_BGP_BIC_GROUPS * KESTREL_BGP_BIC_LINES_PER_GROUP)
/* The core whose non-critical interrupt this guest takes (a Kestrel VM has one vCPU). */
#define BIC_CORE 0
/* Lines handled per cascade interrupt before returning to UIC0 (level: it fires again). */
#define BIC_MAX_LOOPS BIC_LINES

struct kestrel_bic {
	void __iomem *regs;
	struct irq_domain *domain;
	int parent_irq;
	/* Serialises read-modify-write of the TARGET words. */
	raw_spinlock_t lock;
};

static void __iomem *bic_group_reg(struct kestrel_bic *bic, unsigned int group, u32 reg)
{
	return bic->regs + group * KESTREL_BGP_BIC_GROUP_STRIDE + reg;
}

/* Bit of line `bit` (0..31) in a group's STATUS-like words: MSB first. */
static u32 bic_line_mask(unsigned int bit)
{
	return 0x80000000u >> bit;
}

static void bic_set_target(struct kestrel_bic *bic, irq_hw_number_t hwirq, u32 code)
{
	unsigned int group = hwirq / KESTREL_BGP_BIC_LINES_PER_GROUP;
	unsigned int bit = hwirq % KESTREL_BGP_BIC_LINES_PER_GROUP;
	void __iomem *reg = bic_group_reg(bic, group, KESTREL_BGP_BIC_TARGET + 4 * (bit / 8));
	unsigned int shift = (7 - bit % 8) * 4;
	unsigned long flags;
	u32 v;

	raw_spin_lock_irqsave(&bic->lock, flags);
	v = ioread32be(reg);
	v = (v & ~(0xfu << shift)) | ((code & 0xfu) << shift);
	iowrite32be(v, reg);
	raw_spin_unlock_irqrestore(&bic->lock, flags);
}

static void bic_mask(struct irq_data *d)
{
	bic_set_target(irq_data_get_irq_chip_data(d), irqd_to_hwirq(d),
		       KESTREL_BGP_BIC_TARGET_DISABLED);
}

static void bic_unmask(struct irq_data *d)
{
	bic_set_target(irq_data_get_irq_chip_data(d), irqd_to_hwirq(d),
		       KESTREL_BGP_BIC_TARGET_NCRIT_CORE | BIC_CORE);
}

static void bic_ack(struct irq_data *d)
{
	struct kestrel_bic *bic = irq_data_get_irq_chip_data(d);
	irq_hw_number_t hwirq = irqd_to_hwirq(d);

	iowrite32be(bic_line_mask(hwirq % KESTREL_BGP_BIC_LINES_PER_GROUP),
		    bic_group_reg(bic, hwirq / KESTREL_BGP_BIC_LINES_PER_GROUP,
				  KESTREL_BGP_BIC_STATUS_CLR));
}

static void bic_mask_ack(struct irq_data *d)
{
	bic_mask(d);
	bic_ack(d);
}

static int bic_set_type(struct irq_data *d, unsigned int type)
{
	/* Every BIC line is a level, active high. */
	return (type == IRQ_TYPE_LEVEL_HIGH || type == IRQ_TYPE_NONE) ? 0 : -EINVAL;
}

static struct irq_chip kestrel_bic_chip = {
	.name = "BIC",
	.irq_mask = bic_mask,
	.irq_unmask = bic_unmask,
	.irq_ack = bic_ack,
	.irq_mask_ack = bic_mask_ack,
	.irq_set_type = bic_set_type,
};

static int bic_map(struct irq_domain *d, unsigned int virq, irq_hw_number_t hwirq)
{
	if (hwirq >= BIC_LINES)
		return -EINVAL;
	irq_set_chip_data(virq, d->host_data);
	irq_set_chip_and_handler(virq, &kestrel_bic_chip, handle_level_irq);
	irq_set_status_flags(virq, IRQ_LEVEL);
	return 0;
}

static const struct irq_domain_ops kestrel_bic_domain_ops = {
	.map = bic_map,
	.xlate = irq_domain_xlate_onecell,
};

static void kestrel_bic_cascade(struct irq_desc *desc)
{
	struct kestrel_bic *bic = irq_desc_get_handler_data(desc);
	struct irq_chip *chip = irq_desc_get_chip(desc);
	unsigned int loops;

	chained_irq_enter(chip, desc);
	for (loops = 0; loops < BIC_MAX_LOOPS; loops++) {
		u32 hier = ioread32be(bic->regs + KESTREL_BGP_BIC_HIER_NCRIT + 4 * BIC_CORE);
		unsigned int group, bit;
		u32 pending;

		if (!hier)
			break;
		group = __builtin_clz(hier);
		if (group >= KESTREL_BGP_BIC_GROUPS) {
			pr_warn_ratelimited("kestrel_bic: HIER_NCRIT 0x%08x names no group\n", hier);
			break;
		}
		pending = ioread32be(bic_group_reg(bic, group, KESTREL_BGP_BIC_NCRIT + 4 * BIC_CORE));
		if (!pending) {
			pr_warn_ratelimited("kestrel_bic: group %u flagged but NCRIT is 0\n", group);
			break;
		}
		bit = __builtin_clz(pending);
		if (generic_handle_domain_irq(bic->domain,
					      group * KESTREL_BGP_BIC_LINES_PER_GROUP + bit)) {
			/* Routed but unmapped: disable the line so it cannot storm. */
			bic_set_target(bic, group * KESTREL_BGP_BIC_LINES_PER_GROUP + bit,
				       KESTREL_BGP_BIC_TARGET_DISABLED);
			iowrite32be(bic_line_mask(bit),
				    bic_group_reg(bic, group, KESTREL_BGP_BIC_STATUS_CLR));
			pr_warn_ratelimited("kestrel_bic: line 0x%x pending without a handler; disabled\n",
					    group * KESTREL_BGP_BIC_LINES_PER_GROUP + bit);
		}
	}
	chained_irq_exit(chip, desc);
}

static int kestrel_bic_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	struct kestrel_bic *bic;
	struct resource *res;
	unsigned int g, w;

	bic = devm_kzalloc(dev, sizeof(*bic), GFP_KERNEL);
	if (!bic)
		return -ENOMEM;
	raw_spin_lock_init(&bic->lock);

	bic->regs = devm_platform_get_and_ioremap_resource(pdev, 0, &res);
	if (IS_ERR(bic->regs))
		return PTR_ERR(bic->regs);
	if (resource_size(res) < KESTREL_BGP_BIC_SIZE)
		return dev_err_probe(dev, -EINVAL, "register window %pR smaller than 0x%x\n", res,
				     KESTREL_BGP_BIC_SIZE);

	bic->parent_irq = platform_get_irq(pdev, 0);
	if (bic->parent_irq < 0)
		return bic->parent_irq;

	/* Start quiet: every line disabled, nothing pending. */
	for (g = 0; g < KESTREL_BGP_BIC_GROUPS; g++) {
		for (w = 0; w < KESTREL_BGP_BIC_TARGET_WORDS; w++)
			iowrite32be(KESTREL_BGP_BIC_TARGET_DISABLED,
				    bic_group_reg(bic, g, KESTREL_BGP_BIC_TARGET + 4 * w));
		iowrite32be(~0u, bic_group_reg(bic, g, KESTREL_BGP_BIC_STATUS_CLR));
	}

	bic->domain = irq_domain_add_linear(dev->of_node, BIC_LINES, &kestrel_bic_domain_ops, bic);
	if (!bic->domain)
		return dev_err_probe(dev, -ENOMEM, "cannot create the irq domain\n");

	irq_set_chained_handler_and_data(bic->parent_irq, kestrel_bic_cascade, bic);
	platform_set_drvdata(pdev, bic);
	dev_info(dev, "BIC at %pa: %u lines in %u groups, cascaded on irq %d (UIC0 input %lu)\n",
		 &res->start, BIC_LINES, KESTREL_BGP_BIC_GROUPS, bic->parent_irq,
		 irqd_to_hwirq(irq_get_irq_data(bic->parent_irq)));
	return 0;
}

static const struct of_device_id kestrel_bic_of_match[] = {
	{ .compatible = "kestrel,bgp-bic" },
	{}
};
MODULE_DEVICE_TABLE(of, kestrel_bic_of_match);

static struct platform_driver kestrel_bic_driver = {
	.probe = kestrel_bic_probe,
	.driver = {
		.name = "kestrel-bic",
		.of_match_table = kestrel_bic_of_match,
		.suppress_bind_attrs = true,
	},
};
/* No module_exit: an interrupt controller stays (see the file comment). */
builtin_platform_driver(kestrel_bic_driver);

MODULE_DESCRIPTION("Kestrel VM: Blue Gene/P interrupt controller (BIC) cascaded on UIC0");
MODULE_AUTHOR("Kestrel project");
MODULE_LICENSE("GPL");
