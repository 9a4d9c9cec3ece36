/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kestrel_bgp.h: Blue Gene/P interconnect registers as Kestrel models them.
 *
 * GENERATED from bgp/ (crate kestrel-bgp) by its test c_header_is_current;
 * do not edit. Regenerate: KESTREL_BLESS=1 cargo test -p kestrel-bgp
 */
#ifndef KESTREL_BGP_H
#define KESTREL_BGP_H

/* ---- BIC: Blue Gene interrupt controller (bgp-interconnect.md 2.1) ---- */
/* Guest-physical base of the BIC (36-bit address). */
#define KESTREL_BGP_BIC_BASE 0x730000000ULL
/* Size of the BIC window. */
#define KESTREL_BGP_BIC_SIZE 0x1000u
/* Number of groups of 32 lines. */
#define KESTREL_BGP_BIC_GROUPS 0xfu
/* Lines per group. */
#define KESTREL_BGP_BIC_LINES_PER_GROUP 0x20u
/* Distance between two groups' register blocks. */
#define KESTREL_BGP_BIC_GROUP_STRIDE 0x80u
/* Group register: pending latch (RW; a write replaces it). */
#define KESTREL_BGP_BIC_STATUS 0x0u
/* Group register: returns STATUS and clears it (RO). */
#define KESTREL_BGP_BIC_RD_CLR_STATUS 0x4u
/* Group register: write-1-to-clear (the ack/EOI). */
#define KESTREL_BGP_BIC_STATUS_CLR 0x8u
/* Group register: write-1-to-set (IPIs, soft interrupts). */
#define KESTREL_BGP_BIC_STATUS_SET 0xcu
/* Group register: TARGET[0..3], 4 bits per line, 8 lines per word (RW). */
#define KESTREL_BGP_BIC_TARGET 0x10u
/* Number of TARGET words per group. */
#define KESTREL_BGP_BIC_TARGET_WORDS 0x4u
/* Group register: NCRIT[core], pending lines routed non-critical to the core (RO). */
#define KESTREL_BGP_BIC_NCRIT 0x20u
/* Group register: CRIT[core], pending critical (RO). */
#define KESTREL_BGP_BIC_CRIT 0x30u
/* Group register: MCHK[core], pending machine check (RO). */
#define KESTREL_BGP_BIC_MCHK 0x40u
/* Hierarchy: HIER_NCRIT[core], bit g (MSB = group 0) = group g has a non-critical line pending for that core. */
#define KESTREL_BGP_BIC_HIER_NCRIT 0x780u
/* Hierarchy: HIER_CRIT[core]. */
#define KESTREL_BGP_BIC_HIER_CRIT 0x790u
/* Hierarchy: HIER_MCHK[core]. */
#define KESTREL_BGP_BIC_HIER_MCHK 0x7a0u
/* Cores of a BG/P node (per-core views exist for 4; a Kestrel VM has core 0 only). */
#define KESTREL_BGP_BIC_CORES 0x4u
/* Target code: line disabled. */
#define KESTREL_BGP_BIC_TARGET_DISABLED 0x0u
/* Target code: non-critical to every core. */
#define KESTREL_BGP_BIC_TARGET_BCAST_NCRIT 0x1u
/* Target code: critical to every core. */
#define KESTREL_BGP_BIC_TARGET_BCAST_CRIT 0x2u
/* Target code: machine check to every core. */
#define KESTREL_BGP_BIC_TARGET_BCAST_MCHK 0x3u
/* Target code: non-critical to core c is `TARGET_NCRIT_CORE | c`. */
#define KESTREL_BGP_BIC_TARGET_NCRIT_CORE 0x4u
/* Target code: critical to core c is `TARGET_CRIT_CORE | c`. */
#define KESTREL_BGP_BIC_TARGET_CRIT_CORE 0x8u
/* Target code: machine check to core c is `TARGET_MCHK_CORE | c`. */
#define KESTREL_BGP_BIC_TARGET_MCHK_CORE 0xcu
/* The UIC0 input the VMM cascades the virtual BIC into (free on the VM's board: the real bamboo uses inputs 30/31 for UIC1, which the VMM does not model). */
#define KESTREL_BGP_BIC_UIC0_CASCADE_INPUT 0x1eu

/* ---- Collective (tree) network: VC windows, packet header, status, DCRs (2.2) ---- */
/* Guest-physical base of VC0's window. */
#define KESTREL_BGP_COLL_VC0_BASE 0x610000000ULL
/* Guest-physical base of VC1's window. */
#define KESTREL_BGP_COLL_VC1_BASE 0x611000000ULL
/* Size of one VC window. */
#define KESTREL_BGP_COLL_VC_SIZE 0x400u
/* Number of virtual channels. */
#define KESTREL_BGP_COLL_VCS 0x2u
/* VC register: data (payload) injection, one 16-byte quad per store sequence (WO). */
#define KESTREL_BGP_COLL_DI 0x0u
/* VC register: header injection, one 32-bit word (WO). */
#define KESTREL_BGP_COLL_HI 0x10u
/* VC register: data (payload) reception, one quad (RO). */
#define KESTREL_BGP_COLL_DR 0x20u
/* VC register: header reception (RO). */
#define KESTREL_BGP_COLL_HR 0x30u
/* VC register: status of this VC (RO). */
#define KESTREL_BGP_COLL_S 0x40u
/* VC register: status of the other VC (RO). */
#define KESTREL_BGP_COLL_SO 0x50u
/* Packets per injection or reception FIFO. */
#define KESTREL_BGP_COLL_FIFO_PACKETS 0x8u
/* Payload bytes per packet. */
#define KESTREL_BGP_COLL_PAYLOAD_BYTES 0x100u
/* Payload quads (16 bytes) per packet. */
#define KESTREL_BGP_COLL_PAYLOAD_QUADS 0x10u
/* Header: class (route) field, bits 0-3: shift. */
#define KESTREL_BGP_COLL_HDR_CLASS_SHIFT 0x1cu
/* Header: class field mask (after the shift). */
#define KESTREL_BGP_COLL_HDR_CLASS_MASK 0xfu
/* Header: bit 4, point-to-point. */
#define KESTREL_BGP_COLL_HDR_P2P 0x8000000u
/* Header: bit 5, interrupt at the receiver. */
#define KESTREL_BGP_COLL_HDR_IRQ 0x4000000u
/* Header (P2P): target node address, bits 6-29: shift. */
#define KESTREL_BGP_COLL_HDR_P2P_ADDR_SHIFT 0x2u
/* Header (P2P): target node address mask (24 bits, after the shift). */
#define KESTREL_BGP_COLL_HDR_P2P_ADDR_MASK 0xffffffu
/* Header (not P2P): ALU opcode, bits 6-8: shift. */
#define KESTREL_BGP_COLL_HDR_OP_SHIFT 0x17u
/* Header (not P2P): ALU opcode mask (after the shift). */
#define KESTREL_BGP_COLL_HDR_OP_MASK 0x7u
/* Header (not P2P): operand size (16-bit words - 1), bits 9-15: shift. */
#define KESTREL_BGP_COLL_HDR_OPSIZE_SHIFT 0x10u
/* Header (not P2P): operand size mask (after the shift). */
#define KESTREL_BGP_COLL_HDR_OPSIZE_MASK 0x7fu
/* Header (not P2P): tag, bits 16-29: shift. */
#define KESTREL_BGP_COLL_HDR_TAG_SHIFT 0x2u
/* Header (not P2P): tag mask (after the shift). */
#define KESTREL_BGP_COLL_HDR_TAG_MASK 0x3fffu
/* Header: injection checksum mode, bits 30-31. */
#define KESTREL_BGP_COLL_HDR_CSUM_MASK 0x3u
/* ALU opcode: none (broadcast). */
#define KESTREL_BGP_COLL_OP_NONE 0x0u
/* ALU opcode: bitwise OR. */
#define KESTREL_BGP_COLL_OP_OR 0x1u
/* ALU opcode: bitwise AND. */
#define KESTREL_BGP_COLL_OP_AND 0x2u
/* ALU opcode: bitwise XOR. */
#define KESTREL_BGP_COLL_OP_XOR 0x3u
/* ALU opcode: unsigned maximum. */
#define KESTREL_BGP_COLL_OP_MAX 0x5u
/* ALU opcode: unsigned integer addition. */
#define KESTREL_BGP_COLL_OP_ADD 0x6u
/* Status: injection payload quads in the FIFO, bits 0-7: shift. */
#define KESTREL_BGP_COLL_ST_INJ_QUADS_SHIFT 0x18u
/* Status: injection headers in the FIFO, bits 12-15: shift. */
#define KESTREL_BGP_COLL_ST_INJ_HDRS_SHIFT 0x10u
/* Status: reception payload quads, bits 16-23: shift. */
#define KESTREL_BGP_COLL_ST_RCV_QUADS_SHIFT 0x8u
/* Status: bit 27, a received header has the IRQ bit set. */
#define KESTREL_BGP_COLL_ST_RCV_IRQ 0x10u
/* Status: reception headers, bits 28-31: shift. */
#define KESTREL_BGP_COLL_ST_RCV_HDRS_SHIFT 0x0u
/* Status: mask of a quad-count field (after its shift). */
#define KESTREL_BGP_COLL_ST_QUADS_MASK 0xffu
/* Status: mask of a header-count field (after its shift). */
#define KESTREL_BGP_COLL_ST_HDRS_MASK 0xfu
/* First DCR of the collective. */
#define KESTREL_BGP_COLL_DCR_BASE 0xc00u
/* Number of collective DCRs. */
#define KESTREL_BGP_COLL_DCR_COUNT 0x80u
/* DCR offset of RDR0 (route descriptors; two classes per register, RDR0..RDR7). */
#define KESTREL_BGP_COLL_DCR_RDR0 0x0u
/* Number of route descriptor registers. */
#define KESTREL_BGP_COLL_RDR_COUNT 0x8u
/* RDR bit of the lower-numbered (even) class: source link 2 (IBM bit 1). */
#define KESTREL_BGP_COLL_RDR_LO_SRC2 0x40000000u
/* RDR even class: source link 1 (bit 2). */
#define KESTREL_BGP_COLL_RDR_LO_SRC1 0x20000000u
/* RDR even class: source link 0 (bit 3). */
#define KESTREL_BGP_COLL_RDR_LO_SRC0 0x10000000u
/* RDR even class: target link 2 (bit 5). */
#define KESTREL_BGP_COLL_RDR_LO_TGT2 0x4000000u
/* RDR even class: target link 1 (bit 6). */
#define KESTREL_BGP_COLL_RDR_LO_TGT1 0x2000000u
/* RDR even class: target link 0 (bit 7). */
#define KESTREL_BGP_COLL_RDR_LO_TGT0 0x1000000u
/* RDR even class: source local client, i.e. this node injects into the class (bit 14). */
#define KESTREL_BGP_COLL_RDR_LO_SRCL 0x20000u
/* RDR even class: target local client, i.e. this node receives the class (bit 15). */
#define KESTREL_BGP_COLL_RDR_LO_TGTL 0x10000u
/* The odd class's bits are the even class's shifted right by this (IBM bits 16-31). */
#define KESTREL_BGP_COLL_RDR_HI_SHIFT 0x10u
/* DCR offset of RCFG (router configuration). */
#define KESTREL_BGP_COLL_DCR_RCFG 0x10u
/* DCR offset of FPTR (FIFO pointers). */
#define KESTREL_BGP_COLL_DCR_FPTR 0x40u
/* DCR offset of NADDR (24-bit node address for P2P). */
#define KESTREL_BGP_COLL_DCR_NADDR 0x41u
/* DCR offset of VCFG0 (VC0 configuration). */
#define KESTREL_BGP_COLL_DCR_VCFG0 0x42u
/* DCR offset of VCFG1. */
#define KESTREL_BGP_COLL_DCR_VCFG1 0x43u
/* VCFG bit 0: receive all (turn off P2P address filtering). */
#define KESTREL_BGP_COLL_VCFG_RCVALL 0x80000000u
/* VCFG bits 21-23: reception watermark: shift. */
#define KESTREL_BGP_COLL_VCFG_RWM_SHIFT 0x8u
/* VCFG bits 29-31: injection watermark: shift. */
#define KESTREL_BGP_COLL_VCFG_IWM_SHIFT 0x0u
/* VCFG watermark field mask (after its shift). */
#define KESTREL_BGP_COLL_VCFG_WM_MASK 0x7u
/* DCR offset of PRXF (reception exception flags; a read clears). */
#define KESTREL_BGP_COLL_DCR_PRXF 0x44u
/* DCR offset of PRXEN (reception exception enables). */
#define KESTREL_BGP_COLL_DCR_PRXEN 0x45u
/* DCR offset of PIXF (injection exception flags; a read clears). */
#define KESTREL_BGP_COLL_DCR_PIXF 0x48u
/* DCR offset of PIXEN (injection exception enables). */
#define KESTREL_BGP_COLL_DCR_PIXEN 0x49u
/* PRXF/PRXEN bit 12: bad address, VC0 (Kestrel: an access outside the VC's registers). */
#define KESTREL_BGP_COLL_PRX_BADADDR0 0x80000u
/* PRXF/PRXEN bit 13: bad address, VC1. */
#define KESTREL_BGP_COLL_PRX_BADADDR1 0x40000u
/* PRXF/PRXEN bit 26: payload underrun VC0 (DR read with nothing received). */
#define KESTREL_BGP_COLL_PRX_PUR0 0x20u
/* PRXF/PRXEN bit 27: payload underrun VC1. */
#define KESTREL_BGP_COLL_PRX_PUR1 0x10u
/* PRXF/PRXEN bit 28: header underrun VC0 (HR read with nothing received). */
#define KESTREL_BGP_COLL_PRX_HUR0 0x8u
/* PRXF/PRXEN bit 29: header underrun VC1. */
#define KESTREL_BGP_COLL_PRX_HUR1 0x4u
/* PRXF/PRXEN bit 30: VC0 reception above its watermark. */
#define KESTREL_BGP_COLL_PRX_WM0 0x2u
/* PRXF/PRXEN bit 31: VC1 reception above its watermark. */
#define KESTREL_BGP_COLL_PRX_WM1 0x1u
/* PIXF/PIXEN bit 14: collision (Kestrel: a payload write without a header, or a partial quad followed by a header). */
#define KESTREL_BGP_COLL_PIX_COLLISION 0x20000u
/* PIXF/PIXEN bit 12 (in 6-13, parity/alignment/address errors): Kestrel: VC0 injected a header the fabric cannot deliver (reserved ALU opcode, a class this node does not source, a reduction whose contributors disagree on opcode or operand size). */
#define KESTREL_BGP_COLL_PIX_BADHDR0 0x80000u
/* PIXF/PIXEN bit 13: the same for VC1. */
#define KESTREL_BGP_COLL_PIX_BADHDR1 0x40000u
/* PIXF/PIXEN bit 25: payload overflow VC0. */
#define KESTREL_BGP_COLL_PIX_POF0 0x40u
/* PIXF/PIXEN bit 26: payload overflow VC1. */
#define KESTREL_BGP_COLL_PIX_POF1 0x20u
/* PIXF/PIXEN bit 27: header overflow VC0. */
#define KESTREL_BGP_COLL_PIX_HOF0 0x10u
/* PIXF/PIXEN bit 28: header overflow VC1. */
#define KESTREL_BGP_COLL_PIX_HOF1 0x8u
/* PIXF/PIXEN bit 29: VC0 injection at or below its watermark. */
#define KESTREL_BGP_COLL_PIX_WM0 0x4u
/* PIXF/PIXEN bit 30: VC1 injection at or below its watermark. */
#define KESTREL_BGP_COLL_PIX_WM1 0x2u
/* PIXF/PIXEN bit 31: enable. */
#define KESTREL_BGP_COLL_PIX_ENABLE 0x1u
/* BIC line: injection exception. */
#define KESTREL_BGP_COLL_IRQ_INJ_EXC 0xb4u
/* BIC line: reception exception. */
#define KESTREL_BGP_COLL_IRQ_RCV_EXC 0xb5u
/* BIC line: a packet with the header IRQ bit arrived on VC0. */
#define KESTREL_BGP_COLL_IRQ_RCV_VC0 0xb6u
/* BIC line: the same on VC1. */
#define KESTREL_BGP_COLL_IRQ_RCV_VC1 0xb7u
/* BIC line: no-target trap (a packet no node receives; Kestrel counts the drop too). */
#define KESTREL_BGP_COLL_IRQ_NO_TARGET 0xa1u
/* BIC line: ALU overflow. */
#define KESTREL_BGP_COLL_IRQ_ALU_OVERFLOW 0xa2u
/* Kestrel's class for bgnet (the device tree's `tree-route`; the default fabric policy's partition `node`, `kestrel_abi::grants`). */
#define KESTREL_BGP_COLL_BGNET_CLASS 0x0u
/* Kestrel's class for the native MPI layer's reductions (the default fabric policy's partition `native`). */
#define KESTREL_BGP_COLL_MPI_CLASS 0xeu
/* Link-layer header bytes in front of every collective packet's frame data (bgnet). */
#define KESTREL_BGP_COLL_LINK_HDR_BYTES 0x10u

/* ---- Torus DMA engine: group registers, DCRs, descriptors, packet headers (2.3) ---- */
/* Guest-physical base of DMA group 0 (group g at `BASE + g * GROUP_SIZE`). */
#define KESTREL_BGP_DMA_BASE 0x600000000ULL
/* Size of one group's register page. */
#define KESTREL_BGP_DMA_GROUP_SIZE 0x1000u
/* Groups of a node. */
#define KESTREL_BGP_DMA_GROUPS 0x4u
/* The group number a Kestrel VM's own DMA group has (Kittyhawk's kernel uses group 3). */
#define KESTREL_BGP_DMA_VM_GROUP 0x3u
/* Injection FIFOs per group. */
#define KESTREL_BGP_DMA_INJ_FIFOS 0x20u
/* Reception FIFOs per group (plus one header FIFO). */
#define KESTREL_BGP_DMA_RCV_FIFOS 0x8u
/* Injection (and reception) counters per group. */
#define KESTREL_BGP_DMA_COUNTERS 0x40u
/* Injection FIFO f's registers at `INJ_FIFO + 16 * f`. */
#define KESTREL_BGP_DMA_INJ_FIFO 0x0u
/* Distance between two FIFOs' (or counters') register blocks. */
#define KESTREL_BGP_DMA_FIFO_STRIDE 0x10u
/* FIFO register: START (address >> 4). */
#define KESTREL_BGP_DMA_FIFO_START 0x0u
/* FIFO register: END (address >> 4; the FIFO is [START, END)). */
#define KESTREL_BGP_DMA_FIFO_END 0x4u
/* FIFO register: HEAD (address >> 4). Injection: the DMA advances it. Reception: software advances it. */
#define KESTREL_BGP_DMA_FIFO_HEAD 0x8u
/* FIFO register: TAIL (address >> 4). Injection: software advances it. Reception: the DMA advances it. */
#define KESTREL_BGP_DMA_FIFO_TAIL 0xcu
/* Injection FIFOs not empty (bit per FIFO, MSB = FIFO 0). */
#define KESTREL_BGP_DMA_INJ_NOT_EMPTY 0x200u
/* Injection FIFOs with room (bit per FIFO). */
#define KESTREL_BGP_DMA_INJ_AVAILABLE 0x208u
/* Injection FIFO threshold crossed (bit per FIFO). */
#define KESTREL_BGP_DMA_INJ_THRESHOLD 0x210u
/* Write 1s: clear injection FIFO threshold-crossed bits. */
#define KESTREL_BGP_DMA_INJ_THRESHOLD_CLEAR 0x218u
/* Injection FIFOs activated (bit per FIFO, RO). */
#define KESTREL_BGP_DMA_INJ_ACTIVATED 0x220u
/* Write 1s: activate injection FIFOs. */
#define KESTREL_BGP_DMA_INJ_ACTIVATE 0x224u
/* Write 1s: deactivate injection FIFOs. */
#define KESTREL_BGP_DMA_INJ_DEACTIVATE 0x228u
/* Injection counters enabled, words 0 and 1 (bit per counter, MSB of word 0 = 0). */
#define KESTREL_BGP_DMA_INJ_CTR_ENABLED 0x300u
/* Write 1s: enable injection counters (2 words). */
#define KESTREL_BGP_DMA_INJ_CTR_ENABLE 0x308u
/* Write 1s: disable injection counters (2 words). */
#define KESTREL_BGP_DMA_INJ_CTR_DISABLE 0x310u
/* Injection counters that hit zero (2 words). */
#define KESTREL_BGP_DMA_INJ_CTR_HIT_ZERO 0x320u
/* Write 1s: clear hit-zero bits (2 words). */
#define KESTREL_BGP_DMA_INJ_CTR_CLEAR_HIT_ZERO 0x328u
/* Injection counter group status (bit per 8-counter subgroup with a hit-zero). */
#define KESTREL_BGP_DMA_INJ_CTR_GRP_STATUS 0x330u
/* Injection counter c's registers at `INJ_CTR + 16 * c`. */
#define KESTREL_BGP_DMA_INJ_CTR 0x400u
/* Counter register: COUNT (bytes still to send or to receive). */
#define KESTREL_BGP_DMA_CTR_COUNT 0x0u
/* Counter register: INCREMENT (a write adds to COUNT; reads 0). */
#define KESTREL_BGP_DMA_CTR_INCREMENT 0x4u
/* Counter register: BASE (address >> 4). */
#define KESTREL_BGP_DMA_CTR_BASE 0x8u
/* Counter register (reception only): LIMIT / MAX (address >> 4). */
#define KESTREL_BGP_DMA_CTR_LIMIT 0xcu
/* Reception FIFO f's registers at `RCV_FIFO + 16 * f`. */
#define KESTREL_BGP_DMA_RCV_FIFO 0x800u
/* The reception header FIFO's registers. */
#define KESTREL_BGP_DMA_RCV_HDR_FIFO 0x880u
/* 16 words of storage the DMA does not use. */
#define KESTREL_BGP_DMA_SCRATCH 0x900u
/* Reception FIFOs not empty (two words; bit `group * 8 + f`, MSB first). */
#define KESTREL_BGP_DMA_RCV_NOT_EMPTY 0xa00u
/* Reception FIFOs with room (two words). */
#define KESTREL_BGP_DMA_RCV_AVAILABLE 0xa08u
/* Reception FIFO threshold crossed (two words). */
#define KESTREL_BGP_DMA_RCV_THRESHOLD 0xa10u
/* Write 1s: clear reception threshold-crossed bits (two words). */
#define KESTREL_BGP_DMA_RCV_THRESHOLD_CLEAR 0xa18u
/* Reception counters enabled (2 words). */
#define KESTREL_BGP_DMA_RCV_CTR_ENABLED 0xb00u
/* Write 1s: enable reception counters. */
#define KESTREL_BGP_DMA_RCV_CTR_ENABLE 0xb08u
/* Write 1s: disable reception counters. */
#define KESTREL_BGP_DMA_RCV_CTR_DISABLE 0xb10u
/* Reception counters that hit zero (2 words). */
#define KESTREL_BGP_DMA_RCV_CTR_HIT_ZERO 0xb18u
/* Write 1s: clear reception hit-zero bits. */
#define KESTREL_BGP_DMA_RCV_CTR_CLEAR_HIT_ZERO 0xb20u
/* Reception counter group status. */
#define KESTREL_BGP_DMA_RCV_CTR_GRP_STATUS 0xb30u
/* Reception counter c's registers at `RCV_CTR + 16 * c`. */
#define KESTREL_BGP_DMA_RCV_CTR 0xc00u
/* First DMA DCR. */
#define KESTREL_BGP_DMA_DCR_BASE 0xd00u
/* Number of DMA DCRs. */
#define KESTREL_BGP_DMA_DCR_COUNT 0x100u
/* DCR offset: reset (all ones = in reset). */
#define KESTREL_BGP_DMA_DCR_RESET 0x0u
/* DCR offset: base control. */
#define KESTREL_BGP_DMA_DCR_BASE_CONTROL 0x1u
/* Base control bit 0: use the DMA (not the torus FIFOs). */
#define KESTREL_BGP_DMA_BASE_CONTROL_USE_DMA 0x80000000u
/* DCR offset: injection range window w (0..8) minimum (address >> 4) at `DCR_INJ_MIN + 2 * w`, maximum at `+ 1`. */
#define KESTREL_BGP_DMA_DCR_INJ_MIN 0x2u
/* DCR offset: reception range window w minimum at `DCR_RCV_MIN + 2 * w`, maximum at `+ 1`. */
#define KESTREL_BGP_DMA_DCR_RCV_MIN 0x14u
/* Range-check windows per direction. */
#define KESTREL_BGP_DMA_RANGE_WINDOWS 0x8u
/* DCR offset: injection FIFO enable of group g at `DCR_INJ_FIFO_ENABLE + g`. */
#define KESTREL_BGP_DMA_DCR_INJ_FIFO_ENABLE 0x2cu
/* DCR offset: reception FIFO enable (bit `group * 8 + f`). */
#define KESTREL_BGP_DMA_DCR_RCV_FIFO_ENABLE 0x30u
/* DCR offset: reception header FIFO enable. */
#define KESTREL_BGP_DMA_DCR_RCV_HDR_FIFO_ENABLE 0x31u
/* DCR offset: reception FIFO type (bit per FIFO: which threshold and interrupt, 0/1). */
#define KESTREL_BGP_DMA_DCR_RCV_FIFO_TYPE 0x38u
/* DCR offset: reception threshold of type 0 FIFOs (in 16-byte units). */
#define KESTREL_BGP_DMA_DCR_RCV_THRESHOLD0 0x3au
/* DCR offset: reception threshold of type 1 FIFOs. */
#define KESTREL_BGP_DMA_DCR_RCV_THRESHOLD1 0x3bu
/* DCR offset: the reception FIFO map, `DCR_RCV_MAP + 2 * pid_pair + word`; a byte per arrival direction (XP, XM, YP, YM, ZP, ZM, HIGH, LOCAL), value `group << 3 | fifo`. Kestrel delivers everything inside a node as LOCAL (byte 7, the last of word 1). */
#define KESTREL_BGP_DMA_DCR_RCV_MAP 0x60u
/* PID values a packet can carry (hardware header bits Pid0, Pid1); the reception FIFO map has two DCRs per PID. */
#define KESTREL_BGP_DMA_PIDS 0x4u
/* Reception FIFO map: DCRs per PID pair (PID = Pid0 << 1 | Pid1, 4 pairs). */
#define KESTREL_BGP_DMA_RCV_MAP_DCRS_PER_PID 0x2u
/* Reception FIFO map: the word (of the pair) holding the LOCAL arrival byte. */
#define KESTREL_BGP_DMA_RCV_MAP_LOCAL_WORD 0x1u
/* Reception FIFO map: shift of the LOCAL byte in its word (the last byte). */
#define KESTREL_BGP_DMA_RCV_MAP_LOCAL_SHIFT 0x0u
/* DCR offset: injection FIFO interrupt enable of group g at `DCR_INJ_FIFO_IRQ_EN + g`. */
#define KESTREL_BGP_DMA_DCR_INJ_FIFO_IRQ_EN 0x6du
/* DCR offset: reception FIFO interrupt enable of type t at `DCR_RCV_FIFO_IRQ_EN + t` (bit `group * 8 + f`, MSB first). */
#define KESTREL_BGP_DMA_DCR_RCV_FIFO_IRQ_EN 0x71u
/* DCR offset: injection counter hit-zero interrupt enable for line i at `DCR_INJ_CTR_IRQ_EN + i` (bit per 8-counter subgroup `group * 8 + s`). */
#define KESTREL_BGP_DMA_DCR_INJ_CTR_IRQ_EN 0x76u
/* DCR offset: reception counter hit-zero interrupt enable for line i at `DCR_RCV_CTR_IRQ_EN + i`. */
#define KESTREL_BGP_DMA_DCR_RCV_CTR_IRQ_EN 0x7au
/* DCR offset: fatal error enable 0 (bit per [`DCR_FATAL_STATUS`] bit; the fatal IRQ line is raised while `status & enable` is not zero). Kestrel's reset value enables [`ERR_RANGE`] and [`ERR_DESCRIPTOR`]. */
#define KESTREL_BGP_DMA_DCR_FATAL_ENABLE 0x7eu
/* DCR offset: fatal error status 0 (Kestrel sets [`ERR_RANGE`] here). */
#define KESTREL_BGP_DMA_DCR_FATAL_STATUS 0x93u
/* DCR offset: the bad address of the last range-check violation (address >> 4). */
#define KESTREL_BGP_DMA_DCR_BAD_ADDRESS 0x97u
/* DCR offset (Kestrel's, no BG/P counterpart): who may direct-put into reception counter c of the group, at `DCR_PUT_FROM + c` (64 DCRs). BG/P's DMA lands a direct put in any enabled counter; on a shared fabric the counter's owner names the sender it expects (`coord_word` of its coordinates | [`PUT_FROM_ONE`]) or allows every endpoint it may reach ([`PUT_FROM_ANY`]). Reset: 0, nobody (the owner's own local memcopies always land). A refused put is dropped and counted at the receiver, with [`ERR_PUT_REFUSED`] in the sender's fatal status. */
#define KESTREL_BGP_DMA_DCR_PUT_FROM 0xa0u
/* `DCR_PUT_FROM` value bit: the sender whose coordinate word is in bits 8-31 may put. */
#define KESTREL_BGP_DMA_PUT_FROM_ONE 0x1u
/* `DCR_PUT_FROM` value bit: any endpoint the owner may reach may put. */
#define KESTREL_BGP_DMA_PUT_FROM_ANY 0x2u
/* Fatal error status bit: a DMA address outside every range-check window. */
#define KESTREL_BGP_DMA_ERR_RANGE 0x80000000u
/* Fatal error status bit: a descriptor the engine could not decode (bad counter id, zero-size packet, FIFO pointers outside the FIFO). */
#define KESTREL_BGP_DMA_ERR_DESCRIPTOR 0x40000000u
/* Fatal error status bit: a reception FIFO was full and a packet was dropped. */
#define KESTREL_BGP_DMA_ERR_RCV_OVERFLOW 0x20000000u
/* Fatal error status bit (Kestrel's): a packet went to an endpoint this one has no grant to reach, or a direct put to a counter whose owner did not allow this sender ([`DCR_PUT_FROM`]); the packet was dropped. */
#define KESTREL_BGP_DMA_ERR_PUT_REFUSED 0x10000000u
/* Descriptor size in bytes. */
#define KESTREL_BGP_DMA_DESC_BYTES 0x20u
/* Descriptor word 0 bit 30: prefetch only. */
#define KESTREL_BGP_DMA_DESC_PREFETCH_ONLY 0x2u
/* Descriptor word 0 bit 31: local memory copy. */
#define KESTREL_BGP_DMA_DESC_LOCAL_MEMCOPY 0x1u
/* Descriptor word 1, bits 24-31: injection counter id (`group * 64 + counter`). */
#define KESTREL_BGP_DMA_DESC_CTR_ID_MASK 0xffu
/* Descriptor byte offset of word 2 (base_offset, added to the counter's BASE). */
#define KESTREL_BGP_DMA_DESC_BASE_OFFSET 0x8u
/* Descriptor byte offset of word 3 (message length in bytes). */
#define KESTREL_BGP_DMA_DESC_LENGTH 0xcu
/* Descriptor byte offset of the 8-byte hardware header (words 4-5). */
#define KESTREL_BGP_DMA_DESC_HW_HDR 0x10u
/* Descriptor byte offset of the 8-byte software header (words 6-7). */
#define KESTREL_BGP_DMA_DESC_SW_HDR 0x18u
/* Packet header size (hardware + software header) in every FIFO slot. */
#define KESTREL_BGP_DMA_PKT_HDR_BYTES 0x10u
/* Largest payload of a packet (8 chunks of 32 bytes, minus the header). */
#define KESTREL_BGP_DMA_PKT_MAX_PAYLOAD 0xf0u
/* Bytes per chunk. */
#define KESTREL_BGP_DMA_CHUNK_BYTES 0x20u
/* HW header word 0 bits 0-6: checksum skip: shift. */
#define KESTREL_BGP_DMA_HW_CSUM_SKIP_SHIFT 0x19u
/* HW header word 0 bit 7: skip checksum. */
#define KESTREL_BGP_DMA_HW_SK 0x1000000u
/* HW header word 0 bits 8-13: hint bits x+ x- y+ y- z+ z-: shift. */
#define KESTREL_BGP_DMA_HW_HINT_SHIFT 0x12u
/* HW header word 0 bit 14: deposit. */
#define KESTREL_BGP_DMA_HW_DP 0x20000u
/* HW header word 0 bit 15: PID bit 0. */
#define KESTREL_BGP_DMA_HW_PID0 0x10000u
/* HW header word 0 bits 16-18: chunks - 1: shift (packet = (chunks + 1) * 32 bytes). */
#define KESTREL_BGP_DMA_HW_CHUNKS_SHIFT 0xdu
/* HW header chunk field mask (after the shift). */
#define KESTREL_BGP_DMA_HW_CHUNKS_MASK 0x7u
/* HW header word 0 bit 19: PID bit 1. */
#define KESTREL_BGP_DMA_HW_PID1 0x1000u
/* HW header word 0 bit 20: direct put (1) or memory FIFO (0). */
#define KESTREL_BGP_DMA_HW_DM 0x800u
/* HW header word 0 bit 21: dynamic routing. */
#define KESTREL_BGP_DMA_HW_DYNAMIC 0x400u
/* HW header word 0 bits 22-23: virtual channel: shift. */
#define KESTREL_BGP_DMA_HW_VC_SHIFT 0x8u
/* HW header word 0 bits 24-31: destination X. */
#define KESTREL_BGP_DMA_HW_X_MASK 0xffu
/* HW header word 1 bits 0-7: destination Y: shift. */
#define KESTREL_BGP_DMA_HW_Y_SHIFT 0x18u
/* HW header word 1 bits 8-15: destination Z: shift. */
#define KESTREL_BGP_DMA_HW_Z_SHIFT 0x10u
/* SW header byte offset of Put_Offset (word 2 of the packet header). */
#define KESTREL_BGP_DMA_SW_PUT_OFFSET 0x8u
/* SW header byte offset of word 3 (direct put: rcv counter, payload bytes, flags, FIFO id; memory FIFO: SW_Arg:24, Func_Id:8). */
#define KESTREL_BGP_DMA_SW_WORD3 0xcu
/* Direct put, SW word 3 bits 0-7: reception counter id: shift. */
#define KESTREL_BGP_DMA_SW_RCV_CTR_SHIFT 0x18u
/* BIC line: DMA fatal error (range check, bad descriptor). */
#define KESTREL_BGP_DMA_IRQ_FATAL 0x3fu
/* BIC line: injection FIFO threshold of group g is `IRQ_INJ_FIFO_THRESHOLD + g`. */
#define KESTREL_BGP_DMA_IRQ_INJ_FIFO_THRESHOLD 0x58u
/* BIC line: reception FIFO threshold of type t is `IRQ_RCV_FIFO_THRESHOLD + t`. */
#define KESTREL_BGP_DMA_IRQ_RCV_FIFO_THRESHOLD 0x5cu
/* BIC line: injection counter hit zero, line i is `IRQ_INJ_CTR_ZERO + i`. */
#define KESTREL_BGP_DMA_IRQ_INJ_CTR_ZERO 0x60u
/* BIC line: reception counter hit zero, line i is `IRQ_RCV_CTR_ZERO + i`. */
#define KESTREL_BGP_DMA_IRQ_RCV_CTR_ZERO 0x64u
/* BIC line: injection counter error, line i. */
#define KESTREL_BGP_DMA_IRQ_INJ_CTR_ERROR 0x68u
/* BIC line: DMA write error (a delivery outside the reception range windows). */
#define KESTREL_BGP_DMA_IRQ_WRITE_ERROR 0x6fu
/* Bytes of bgnet's torus link header in front of a frame. */
#define KESTREL_BGP_DMA_LINK_HDR_BYTES 0xcu
/* bgnet's torus framing: most packets of one memory-FIFO message (39, so a message of `39 * PKT_MAX_PAYLOAD` bytes, link header included, as Kittyhawk's TORUS_MAX_MTU). */
#define KESTREL_BGP_DMA_MSG_MAX_PKTS 0x27u

/* ---- Torus DCRs and Kestrel's fabric geometry (2.3) ---- */
/* First torus DCR. */
#define KESTREL_BGP_TORUS_DCR_BASE 0xc80u
/* Number of torus DCRs. */
#define KESTREL_BGP_TORUS_DCR_COUNT 0x80u
/* DCR offset: reset. */
#define KESTREL_BGP_TORUS_DCR_RESET 0x0u
/* DCR offset: machine size, nodes - 1 per dimension (X bits 0-7, Y 8-15, Z 16-23). */
#define KESTREL_BGP_TORUS_DCR_SIZE 0x1u
/* DCR offset: this node's coordinates (X bits 0-7, Y 8-15, Z 16-23). */
#define KESTREL_BGP_TORUS_DCR_COORDS 0x2u
/* DCR offset: plus neighbours. */
#define KESTREL_BGP_TORUS_DCR_NEIGHBOUR_PLUS 0x3u
/* DCR offset: minus neighbours. */
#define KESTREL_BGP_TORUS_DCR_NEIGHBOUR_MINUS 0x4u
/* Coordinate word: X shift. */
#define KESTREL_BGP_TORUS_COORD_X_SHIFT 0x18u
/* Coordinate word: Y shift. */
#define KESTREL_BGP_TORUS_COORD_Y_SHIFT 0x10u
/* Coordinate word: Z shift. */
#define KESTREL_BGP_TORUS_COORD_Z_SHIFT 0x8u
/* Most endpoints (VMs plus native programs) one fabric serves. */
#define KESTREL_BGP_TORUS_MAX_ENDPOINTS 0x10u
/* Fabric bus: endpoint k's memory window starts at bus address `(k + 1) * BUS_SLOT` (so bus 0 is never valid, and every bus address >> 4 fits in 32 bits). */
#define KESTREL_BGP_TORUS_BUS_SLOT 0x80000000u
/* Largest memory window of one endpoint (one bus slot). */
#define KESTREL_BGP_TORUS_MAX_WINDOW 0x80000000u
/* Payload bytes the fabric's DMA moves within one engine call; the rest continues in its owner's next call or at the host's timer (`Fabric::poll`), so one endpoint's huge messages stall nobody, and no endpoint's work runs in another's call. */
#define KESTREL_BGP_TORUS_INJECT_BUDGET_BYTES 0x100000u
/* Descriptors the fabric's DMA starts within one engine call. */
#define KESTREL_BGP_TORUS_INJECT_BUDGET_DESCRIPTORS 0x1000u
/* Frames (pv NIC) queued per endpoint before the fabric drops (and counts) more. */
#define KESTREL_BGP_TORUS_FRAME_QUEUE_FRAMES 0x80u
/* Largest Ethernet frame the fabric carries (1514 + 4-byte VLAN tag). */
#define KESTREL_BGP_TORUS_FRAME_MAX_BYTES 0x5eeu
/* Smallest frame: an Ethernet header. */
#define KESTREL_BGP_TORUS_FRAME_MIN_BYTES 0xeu
/* bgnet: the first MAC byte of a torus-routed address has `(b & 7) == 6`. */
#define KESTREL_BGP_TORUS_MAC_TORUS_KIND 0x6u
/* bgnet: the link protocol of Ethernet frames. */
#define KESTREL_BGP_TORUS_LINK_PROTO_NET 0x1u

#endif /* KESTREL_BGP_H */
