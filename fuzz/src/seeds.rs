//! The seed corpora, built from the existing property tests and test vectors: the
//! decoder's binutils vectors (`ppc440/tests/vectors/vectors.txt`), the generators and
//! reference models of `vtlb/tests/model.rs` and `devices/tests/props.rs`, the fault-path
//! scenarios of `vmm/src/fault.rs`'s tests (a UART driver's initialisation, UIC DCRs),
//! the ELF images of `ukernel/kcore/src/elf.rs`'s tests, the archives of
//! `ukernel/abi/src/bootmod.rs`'s tests, the QEMU bamboo device tree fixture of
//! `ukernel/kcore`, and the messages of the ABI's round-trip tests.
//!
//! `cargo test -p kestrel-fuzz --test seeds -- --ignored` writes them to
//! `fuzz/seeds/<target>/` (they are committed; `tests/replay.rs` replays them).

use crate::{archive, bic, codec, collective, elf, torus, uart, uic, virtio_net, vmm, vtlb};
use kestrel_abi::bootmod::Module;

const VECTORS: &str = include_str!("../../ppc440/tests/vectors/vectors.txt");
const BAMBOO_DTB: &[u8] = include_bytes!("../../ukernel/kcore/tests/fixtures/bamboo-qemu.dtb");

/// The seeds of target `name`, as `(file name, bytes)`.
pub fn seeds(name: &str) -> Vec<(String, Vec<u8>)> {
    let named = |v: Vec<Vec<u8>>| -> Vec<(String, Vec<u8>)> {
        v.into_iter()
            .enumerate()
            .map(|(i, b)| (format!("seed-{i:03}"), b))
            .collect()
    };
    match name {
        "decode" => named(decode()),
        "vtlb" => named(
            (0..24u8)
                .map(|i| vtlb::seed(1 + i % 12, i))
                .chain([vtlb::split_seed()])
                .collect(),
        ),
        "guestcpu" => named(crate::guestcpu::seeds()),
        "uart" => named(uart_seeds()),
        "uic" => named(uic_seeds()),
        "bic" => named(bic_seeds()),
        "collective" => named(collective_seeds()),
        "torus" => named(torus_seeds()),
        "virtio_net" => named(virtio_net_seeds()),
        "vmm" => named((0..4).map(vmm::seed).collect()),
        "elf" => named(elf_seeds()),
        "archive" => named(archive_seeds()),
        "fdt" => named(vec![BAMBOO_DTB.to_vec()]),
        "codec" => named((0..16).map(codec::seed).collect()),
        "fabric" => named(crate::fabric::seeds()),
        "service" => named((0..8).map(crate::service::seed).collect()),
        _ => Vec::new(),
    }
}

/// The vectors' words, 64 to a seed, in file order (hand-written words first).
fn decode() -> Vec<Vec<u8>> {
    let words: Vec<u32> = VECTORS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| u32::from_str_radix(l.split('\t').next()?, 16).ok())
        .collect();
    words
        .chunks(64)
        .map(|c| c.iter().flat_map(|w| w.to_be_bytes()).collect())
        .collect()
}

fn uart_seeds() -> Vec<Vec<u8>> {
    use uart::Op::*;
    vec![
        // Linux's 8250 probe and setup: DLAB, divisor, 8N1, FIFOs, modem lines, IER.
        uart::seed(&[
            Write(3, 0x80),
            Write(0, 12),
            Write(1, 0),
            Write(3, 0x03),
            Write(2, 0xC7),
            Write(4, 0x0B),
            Write(1, 0x0F),
            Read(2),
            Write(0, b'h'),
            Write(0, b'i'),
            Push(b'x'),
            Push(b'y'),
            Read(2),
            Read(5),
            Read(0),
            Read(0),
            Read(6),
        ]),
        // Loopback, overrun through loopback, break, modem lines.
        uart::seed(&[
            Write(4, 0x10),
            Write(0, 1),
            Write(0, 2),
            Read(5),
            Read(0),
            Push(3),
            Break,
            Read(5),
            Modem(0xF0),
            Read(6),
            Write(1, 0x08),
            Read(2),
            Write(7, 0x5A),
            Read(7),
        ]),
        // FIFO trigger levels and character timeout, an offset beyond the registers.
        uart::seed(&[
            Write(2, 0x41),
            Write(1, 0x01),
            Push(1),
            Push(2),
            Push(3),
            Push(4),
            Read(2),
            Write(2, 0x02),
            Read(0x1000_0005),
            Write(0xFFFF_FFFF, 0x80),
            Read(0),
        ]),
        // FIFOs off: RBR holds one byte, a refused push.
        uart::seed(&[
            Push(b'a'),
            Push(b'b'),
            Read(5),
            Read(0),
            Push(b'c'),
            Break,
            Break,
            Read(0),
            Read(0),
        ]),
    ]
}

fn uic_seeds() -> Vec<Vec<u8>> {
    use uic::Op::*;
    let linux = |polarity| {
        uic::seed(
            polarity,
            &[
                Write(5, 0),
                Write(4, 0xFFFF_FFFF),
                Write(3, 0),
                Write(2, 0xC000_0000),
                Write(0, 0xFFFF_FFFF),
                Input(0, true),
                Read(6),
                Input(0, false),
                Write(0, 0x8000_0000),
                Input(1, true),
                Read(0),
            ],
        )
    };
    vec![
        linux(true),
        linux(false),
        // Edge lines, critical lines, vectors with and without PRO.
        uic::seed(
            true,
            &[
                Write(5, 0x0000_0003),
                Write(4, 0x0000_0003),
                Write(3, 0x0000_0001),
                Write(2, 0x0000_0003),
                Write(8, 0x1000_0003),
                Input(31, true),
                Input(30, true),
                Read(7),
                Write(8, 0x1000_0002),
                Read(7),
                Write(1, 0x0000_0100),
                Read(6),
                Input(40, true),
                Read(0x1_0000),
            ],
        ),
    ]
}

/// The BIC as kestrel_bic.ko drives it (devices/tests/linux_bic.rs): targets, lines,
/// get_irq through HIER and NCRIT, acks, soft interrupts, critical routing.
fn bic_seeds() -> Vec<Vec<u8>> {
    use bic::Op::*;
    let mut groups = [0u32; 15];
    groups[5] = 0x0000_0F00;
    groups[2] = 0x8000_0001;
    vec![
        bic::seed(&[
            Write(0x298, 0x0000_0044),
            Line(0xB6, true),
            Read(0x780),
            Read(0x2A0),
            Write(0x288, 0x0000_0200),
            Line(0xB6, false),
            Write(0x288, 0x0000_0200),
            Read(0x780),
            Read(0x284),
        ]),
        bic::seed(&[
            Write(0x90, 0x08E1_2000),
            Line(0x21, true),
            Line(0x22, true),
            Line(0x23, true),
            Line(0x24, true),
            Read(0xB0),
            Read(0xC8),
            Read(0x790),
            Write(0x0C, 0x1000_0000),
            Write(0x00, 0),
            Lines(groups),
            Read(0x7A8),
        ]),
    ]
}

/// The collective as kestrel_coll.ko uses it (devices/tests/linux_coll.rs): whole packets on
/// both VCs, drains, underruns, collisions, a full FIFO, the exception DCRs.
fn collective_seeds() -> Vec<Vec<u8>> {
    use collective::Op::*;
    vec![
        collective::seed(&[
            DcrWrite(0x45, 0xFFFF_FFFF),
            DcrWrite(0x49, 0xFFFF_FFFF),
            Packet(0, 0x0C00_000C, 1),
            Packet(1, 0x0400_0000, 2),
            Load(0, 0x40, 4),
            Load(0, 0x30, 4),
            Load(0, 0x20, 16),
            Load(0, 0x20, 8),
            Load(1, 0x50, 4),
            RoundTrip(1, 0x1234_5678),
            DcrRead(0x44),
            DcrRead(0x48),
        ]),
        collective::seed(&[
            Store(0, 0x00, 4, 1),
            Store(0, 0x10, 4, 7),
            Store(0, 0x00, 4, 1),
            Store(0, 0x08, 4, 1),
            Store(1, 0x10, 4, 8),
            Store(1, 0x00, 8, 2),
            Store(1, 0x10, 4, 9),
            Load(0, 0x30, 4),
            Load(1, 0x20, 4),
            Load(0, 0x60, 4),
            Store(0, 0x40, 8, 0),
            Full(true),
            Packet(0, 5, 0),
            Full(false),
            Load(2, 0, 4),
            DcrRead(0x48),
        ]),
    ]
}

/// The torus DMA as kestrel_torus.ko programs it (devices/tests/linux_torus.rs), plus
/// values outside the segment and the FIFO, and the fatal-error DCRs. The target's VM has
/// 4 MiB at guest-physical 16 MiB.
fn torus_seeds() -> Vec<Vec<u8>> {
    use torus::Op::*;
    let q = |gpa: u64| (gpa >> 4) as u32;
    let tx = q(torus::GPA + 0x1000);
    let rx = q(torus::GPA + 0x10000);
    vec![
        torus::seed(&[
            DcrWrite(0x81, 0x8000_0000),
            DcrWrite(0x82, q(torus::GPA)),
            DcrWrite(0x83, q(torus::GPA + torus::SEG - 1)),
            Write(0x228, 1),
            Write(0x1F0, tx),
            Write(0x1F4, tx + 512),
            Write(0x1F8, tx),
            Write(0x1FC, tx),
            Write(0x7F8, q(torus::GPA)),
            Write(0x7F0, 0),
            Write(0x870, rx),
            Write(0x874, rx + 512 * 16),
            Write(0x878, rx),
            Write(0x87C, rx),
            DcrWrite(0xAC + 3, 1),
            Write(0x224, 1),
            Write(0x7F4, 1500),
            Write(0x1FC, tx + 2),
            Read(0x1F8),
            Read(0x87C),
            DcrRead(0x83),
        ]),
        torus::seed(&[
            Write(0x1F0, tx),
            Write(0x1F4, tx + 2),
            Write(0x1FC, tx + 2),
            Write(0xCF8, q(torus::GPA + torus::SEG)),
            Write(0xCFC, 0xFFFF_FFFF),
            Write(0x000, 0),
            DcrRead(0x193),
            DcrRead(0x197),
            DcrWrite(0x193, 0xC000_0000),
            DcrWrite(0x9F, 0xFFFF_FFFF),
            DcrRead(0x9F),
            DcrWrite(0x02, 5),
            DcrRead(0x02),
        ]),
    ]
}

/// virtio-net after bring-up: RX buffers posted and filled, TX chains (one and two
/// descriptors), a loop, an index far ahead, a wrong-direction buffer.
fn virtio_net_seeds() -> Vec<Vec<u8>> {
    use virtio_net::Op::*;
    vec![
        virtio_net::seed(&[
            Desc(false, 0, 0x0000, 1530, 2, 0),
            Desc(false, 1, 0x0800, 1530, 2, 0),
            Slot(false, 0, 0),
            Slot(false, 1, 1),
            AvailIdx(false, 2),
            Kick(0),
            Frame(60),
            Frame(1514),
            Frame(100),
            Poll,
            Desc(true, 0, 0x2000, 12, 1, 1),
            Desc(true, 1, 0x3000, 1514, 0, 0),
            Slot(true, 0, 0),
            AvailIdx(true, 1),
            Kick(1),
            TxOnce(64),
        ]),
        virtio_net::seed(&[
            Desc(true, 0, 0x2000, 16, 1, 1),
            Desc(true, 1, 0x2000, 16, 1, 0),
            Slot(true, 0, 0),
            AvailIdx(true, 1),
            Kick(1),
            AvailIdx(false, 900),
            Kick(0),
            Desc(false, 0, 0x0000, 64, 0, 0),
        ]),
        virtio_net::seed(&[
            Desc(false, 0, 0x0000, 12, 3, 5),
            Desc(false, 5, 0x0100, 100, 2, 0),
            Slot(false, 0, 0),
            AvailIdx(false, 1),
            Frame(200),
            Frame(50),
            Kick(0),
            Desc(true, 3, 0x4000, 4000, 0, 0),
            Slot(true, 0, 3),
            AvailIdx(true, 1),
            Kick(1),
        ]),
    ]
}

fn elf_seeds() -> Vec<Vec<u8>> {
    const PT_LOAD: u32 = 1;
    // (type, offset, vaddr, paddr, filesz, memsz, flags): text and data as in elf.rs.
    let text = (PT_LOAD, 0x1000, 0x1000_0000, 0x1000_0000, 0x800, 0x800, 5);
    let data = (PT_LOAD, 0x2000, 0x1001_0000, 0x1001_0000, 0x100, 0x3000, 6);
    let with = |sel: u8, img: Vec<u8>| {
        let mut v = vec![sel];
        v.extend(img);
        v
    };
    let linux = (PT_LOAD, 0x1000, 0xC000_0000, 0, 0x2000, 0x3000, 7);
    let note = (4, 0x100, 0, 0, 0x20, 0x20, 4);
    let bss_only = (PT_LOAD, 0, 0x1002_0000, 0x1002_0000, 0, 0x1000, 6);
    vec![
        with(0, elf::image(0x1000_0000, &[text, data], 0x2100)),
        with(
            0,
            elf::image(0x1000_0010, &[text, note, data, bss_only], 0x2100),
        ),
        with(0x81, elf::image(0xC000_0010, &[linux], 0x3000)),
        with(0, elf::image(0x1000_0000, &[text; 2], 0x2100)),
        with(
            2,
            elf::image(
                0x1000_0000,
                &[(3, 0x100, 0, 0, 0x10, 0x10, 4), text],
                0x2100,
            ),
        ),
        with(0, elf::image(0x1001_0000, &[text, data], 0x2100)),
        with(0, elf::image(0x1000_0000, &[text; 9], 0x2100)),
        with(
            2,
            elf::image(
                0x2000,
                &[(PT_LOAD, 0x1000, 0x2000, 0x2000, 0x100, 0x200, 5)],
                0x1100,
            ),
        ),
        with(0x7F, {
            let mut v = vec![0, 0, 0x10, 0, 0x20, 0, 0, 0];
            v.extend(elf::image(0x1000_0000, &[text], 0x1800));
            v
        }),
    ]
}

fn archive_seeds() -> Vec<Vec<u8>> {
    let root_elf = elf::image(
        0x1000_0000,
        &[(1, 0x1000, 0x1000_0000, 0x1000_0000, 0x10, 0x10, 5)],
        0x1010,
    );
    let m = |name, data| Module { name, data };
    vec![
        archive::pack(&[m("root", b"\x7fELFroot"), m("guest", b"guest-image")]),
        archive::pack(&[
            m("kestrel-root", &root_elf),
            m("kestrel-vmm", b"vmm"),
            m("vmlinux", b""),
            m("vmm", b"x"),
        ]),
        archive::pack(&[
            m("a", b"1"),
            m("a", b"2"),
            m("exactly-24-bytes-long-nm", b"3"),
        ]),
        archive::pack(&[]),
        b"\x7fELF\x01\x02\x01".to_vec(),
    ]
}
