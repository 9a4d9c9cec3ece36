//! Target `codec`: every decoder of words that cross a protection boundary in
//! `kestrel_abi`: virtualization-fault messages and the VMM's replies (the kernel decodes
//! a reply a possibly hostile VMM sent), the register transfer parts, root-task requests
//! and replies, program names and argument lists, block splitting, map items, flexpage
//! targets and IPC error codes.
//!
//! Input: operations, one selector byte each, then the words of that message. Checked:
//! decoding never panics and yields in-range values; decode → encode → decode is the
//! identity on what decodes (and encode → decode on what the sender builds); root
//! requests re-encode to the exact words received; `pieces` covers its block exactly with
//! aligned pieces; `map_target` stays inside both flexpages.

use crate::input::{Input, SeedWriter};
use kestrel_abi::root::{
    self, decode_reply, encode_reply, name_from_words, name_words, pieces, Request,
};
use kestrel_abi::{
    label, map_target, vfault, xfer, FaultReply, Fpage, IpcError, MapItem, MsgTag, Rights,
    VirtFaultMsg, XferRegs, XferTlb, GPA_BITS, NUM_MRS,
};

/// Operation selectors, for [`seed`].
pub mod op {
    pub const FAULT_MSG: u8 = 0;
    pub const REPLY: u8 = 1;
    pub const XFER: u8 = 2;
    pub const REQUEST: u8 = 3;
    pub const ROOT_REPLY: u8 = 4;
    pub const NAME: u8 = 5;
    pub const ARGS: u8 = 6;
    pub const PIECES: u8 = 7;
    pub const ITEMS: u8 = 8;
    pub const COUNT: u8 = 9;
}

fn words6(input: &mut Input) -> [u32; 6] {
    core::array::from_fn(|_| input.u32())
}

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    while !input.is_empty() {
        match input.u8() % op::COUNT {
            op::FAULT_MSG => {
                let tag = MsgTag(input.u32());
                let mr = words6(&mut input);
                fault_message(tag, &mr);
            }
            op::REPLY => {
                let tag = MsgTag(input.u32());
                let mr = words6(&mut input);
                let r = FaultReply::decode(tag, &mr);
                assert!(r.set_gpr.is_none_or(|(i, _)| i < 32));
                let mut long = [0u32; NUM_MRS];
                let regs = XferRegs {
                    gpr: core::array::from_fn(|i| mr[i % 6] ^ i as u32),
                    special: [mr[0], mr[1], mr[2], mr[3]],
                };
                let (t2, m2) = r.encode(Some(&regs), &mut long);
                assert!(t2.validate().is_ok(), "a reply's own tag is valid");
                assert_eq!(FaultReply::decode(t2, &m2), r, "reply round trip");
                if r.regs {
                    assert_eq!(
                        XferRegs::decode_gprs(xfer::GPRS, t2.untyped(), &long),
                        Some(&regs.gpr)
                    );
                    assert_eq!(
                        XferRegs::decode_special(xfer::SPECIAL, t2.untyped(), &long),
                        Some(regs.special)
                    );
                }
            }
            op::XFER => {
                let mask = input.u32();
                let words = usize::from(input.u8());
                let seed = input.u32();
                let mut mr: [u32; NUM_MRS] = core::array::from_fn(|i| seed.rotate_left(i as u32));
                let _ = XferRegs::decode_gprs(mask, words, &mr);
                let _ = XferRegs::decode_special(mask, words, &mr);
                let _ = XferTlb::decode(mask, words, &mr);
                let regs = XferRegs {
                    gpr: core::array::from_fn(|i| seed ^ (i as u32)),
                    special: [seed, !seed, seed >> 1, seed << 1],
                };
                let tlb = XferTlb {
                    pid: seed & 0xFF,
                    mmucr: seed,
                    tlb_index: !seed,
                };
                let mask = mask & xfer::ALL;
                regs.encode(mask, &mut mr);
                if mask & xfer::TLB != 0 {
                    tlb.encode(&mut mr);
                }
                let n = VirtFaultMsg::words(mask) as usize;
                assert_eq!(
                    XferRegs::decode_gprs(mask, n, &mr),
                    (mask & xfer::GPRS != 0).then_some(&regs.gpr)
                );
                assert_eq!(
                    XferRegs::decode_special(mask, n, &mr),
                    (mask & xfer::SPECIAL != 0).then_some(regs.special)
                );
                assert_eq!(
                    XferTlb::decode(mask, n, &mr),
                    (mask & xfer::TLB != 0).then_some(tlb)
                );
            }
            op::REQUEST => {
                let label = input.u16();
                let label = if label & 0x8000 != 0 {
                    root::LABEL + (label & 0xF)
                } else {
                    label
                };
                let n = usize::from(input.u8() % 9);
                let words: Vec<u32> = (0..n).map(|_| input.u32()).collect();
                if let Some(r) = Request::decode(label, &words) {
                    let w = r.encode();
                    assert_eq!(
                        (w.label, w.words()),
                        (label, &words[..]),
                        "{r:?} re-encodes exactly"
                    );
                    assert_eq!(Request::decode(w.label, w.words()), Some(r));
                }
            }
            op::ROOT_REPLY => {
                let opcode = u16::from(input.u8() % 12);
                let label = match input.u8() % 3 {
                    0 => root::OK,
                    1 => root::ERROR,
                    _ => input.u16(),
                };
                let n = usize::from(input.u8() % 8);
                let words: Vec<u32> = (0..n).map(|_| input.u32()).collect();
                let res = decode_reply(opcode, label, &words);
                let w = encode_reply(&res);
                assert_eq!(
                    decode_reply(opcode, w.label, w.words()),
                    res,
                    "root reply round trip"
                );
                if let Err(e) = res {
                    assert!(!e.as_str().is_empty());
                }
            }
            op::NAME => {
                let w: [u32; root::NAME_WORDS] = core::array::from_fn(|_| input.u32());
                let (b, n) = name_from_words(&w);
                assert!(n <= b.len() && b[..n].iter().all(|c| c.is_ascii_graphic()));
                let text = core::str::from_utf8(&b[..n]).expect("ASCII");
                if n > 0 {
                    let (b2, n2) = name_from_words(&name_words(text));
                    assert_eq!(&b2[..n2], &b[..n], "name round trip");
                }
            }
            op::ARGS => {
                let n = input_len(&mut input);
                let bytes = input.bytes(usize::from(n));
                let text = String::from_utf8_lossy(bytes);
                let key = match bytes.first().map(|b| b % 3) {
                    Some(0) => "root.start=",
                    Some(1) => "root.vcpu=",
                    _ => "",
                };
                for item in root::arg_list(&text, key) {
                    assert!(!item.is_empty() && !item.contains(','), "item {item:?}");
                    assert!(
                        !item.chars().any(|c| c.is_ascii_whitespace()),
                        "item {item:?}"
                    );
                    assert!(text.contains(item));
                }
            }
            op::PIECES => {
                let (src, dst, size, max_log2) =
                    (input.u32(), input.u32(), input.u32(), input.u32() % 40);
                check_pieces(src, dst, size, max_log2);
            }
            _ => {
                let (w0, w1, w2, hot) = (input.u32(), input.u32(), input.u32(), input.u32());
                if let Some(item) = MapItem::decode(w0, w1) {
                    let [a, b] = item.encode();
                    assert_eq!(MapItem::decode(a, b), Some(item), "map item round trip");
                }
                if let Some((e, phase)) = IpcError::decode(w0) {
                    assert_eq!(IpcError::decode(e.encode(phase)), Some((e, phase)));
                }
                check_map_target(Fpage(w1), Fpage(w2), hot);
                let _ = MsgTag(w0).validate();
            }
        }
    }
}

fn input_len(input: &mut Input) -> u8 {
    input.u8() % 96
}

fn fault_message(tag: MsgTag, mr: &[u32; 6]) {
    if let Some(m) = VirtFaultMsg::decode(tag, mr) {
        assert!(label::is_virt_fault(tag.label()));
        assert!(m.gpa < 1 << GPA_BITS);
        assert!(m.mask <= vfault::MASK_BITS);
        let (t2, m2) = m.encode();
        assert!(t2.validate().is_ok());
        let back = VirtFaultMsg::decode(t2, &m2).expect("an encoded fault decodes");
        assert_eq!(
            back,
            VirtFaultMsg {
                mask: m.mask & xfer::ALL,
                ..m
            },
            "fault message round trip"
        );
        assert_eq!(t2.untyped() as u32, VirtFaultMsg::words(m.mask & xfer::ALL));
    }
}

fn check_pieces(src: u32, dst: u32, size: u32, max_log2: u32) {
    let Some(ps) = pieces(src, dst, size, max_log2) else {
        return;
    };
    assert!(
        (src | dst | size) & 0xFFF == 0 && size != 0,
        "accepted an unaligned block"
    );
    let mut off = 0u64;
    for p in ps.as_slice() {
        assert_eq!(u64::from(p.src), u64::from(src) + off);
        assert_eq!(u64::from(p.dst), u64::from(dst) + off);
        assert!(
            p.log2 >= 12 && p.log2 <= max_log2.max(12) && p.log2 < 32,
            "{p:?}"
        );
        let bytes = 1u64 << p.log2;
        assert_eq!(u64::from(p.src) % bytes, 0, "{p:?} aligned");
        assert_eq!(u64::from(p.dst) % bytes, 0, "{p:?} aligned");
        assert!(p.fpage(Rights::RW).is_some(), "{p:?} is a flexpage");
        off += bytes;
    }
    assert_eq!(off, u64::from(size), "pieces cover the block exactly");
}

fn check_map_target(send: Fpage, window: Fpage, hot: u32) {
    let Some((src, dst, log2)) = map_target(send, window, hot) else {
        assert!(
            !send.is_mappable() || !window.is_mappable(),
            "refused mappable flexpages"
        );
        return;
    };
    assert_eq!(log2, send.log2size().min(window.log2size()));
    let bytes = 1u64 << log2;
    let inside = |base: u32, f: Fpage| {
        u64::from(base) % bytes == 0
            && u64::from(base) >= u64::from(f.base())
            && u64::from(base) + bytes <= u64::from(f.base()) + f.size()
    };
    assert!(inside(src, send), "source {src:#x}/{log2} outside {send:?}");
    assert!(
        inside(dst, window),
        "destination {dst:#x}/{log2} outside {window:?}"
    );
}

/// A seed with one of each operation, built from the messages the property tests use.
pub fn seed(variant: u32) -> Vec<u8> {
    let mut w = SeedWriter::default();
    let msg = VirtFaultMsg {
        class: kestrel_abi::VirtFault::from_raw(variant % 4).expect("0..4"),
        pc: 0x100 + variant * 4,
        insn: 0x8003_0000 | variant,
        gpa: 0x7_3000_0010,
        msr: 0x2_9000,
        mask: variant % 16,
        rs_value: variant,
    };
    let (tag, mr) = msg.encode();
    w.u8(op::FAULT_MSG).u32(tag.0);
    for x in mr {
        w.u32(x);
    }
    let reply = FaultReply::resume(0x104)
        .set_gpr((variant % 32) as u8, 0x41)
        .irq(variant.is_multiple_of(2));
    let (tag, mr) = reply.encode(None, &mut [0; NUM_MRS]);
    w.u8(op::REPLY).u32(tag.0);
    for x in mr {
        w.u32(x);
    }
    w.u8(op::XFER)
        .u32(variant % 16)
        .u8(46)
        .u32(0x1234_5678 ^ variant);
    let req = Request::Ram {
        dest: 0x2000_0000,
        size: 16 << 20,
        align_log2: 24,
    };
    let words = req.encode();
    w.u8(op::REQUEST).u16(words.label).u8(words.len as u8);
    for x in words.words() {
        w.u32(*x);
    }
    w.u8(op::ROOT_REPLY)
        .u8(root::op::RAM as u8)
        .u8(0)
        .u8(1)
        .u32(0x0100_0000);
    w.u8(op::NAME);
    for x in name_words("kestrel-vmm") {
        w.u32(x);
    }
    let args = b"console=ttyS0 root.start=kestrel-vmm,guest root.vcpu=kestrel-vmm";
    w.u8(op::ARGS).u8(args.len() as u8).raw(args);
    w.u8(op::PIECES)
        .u32(0x0100_0000)
        .u32(0x2000_0000)
        .u32(0x0030_0000 + (variant << 12))
        .u32(24);
    let page = Fpage::new(0x8000_0000, 12 + variant % 8, Rights::RW).expect("aligned");
    let [a, b] = MapItem::map(0x8000_3000, page).encode();
    w.u8(op::ITEMS)
        .u32(a)
        .u32(b)
        .u32(Fpage::complete(Rights::RWX).0)
        .u32(0x8000_3000);
    w.bytes
}
