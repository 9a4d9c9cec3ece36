//! The VMM's BG/P back ends (`kestrel_vmm_core::fabric`) and the models in front of the
//! real fabric engine, wired as the VMM wires them: two or three "VMs", each with its RAM
//! (a `SegmentRam`, as on the target) as its endpoint's window (guest-physical 0 = window
//! offset 0), and the BG/P devices of the board description (`board::BGP_VM`, attached by
//! `Board::attach_vm`: BIC cascaded into the UIC, collective, torus DMA group, virtio-net)
//! on its buses, over one in-process engine. Each test drives the guest side register by
//! register through the buses, as the Linux drivers do, and checks what arrives at the other
//! VM: torus DMA, collective packets through the shadow FIFOs, back-pressure, frames and
//! interrupt lines.

use kestrel_abi::{VirtFault, VirtFaultMsg};
use kestrel_bgp::{bic, coll, dma};
use kestrel_devices::bus::GuestRam;
use kestrel_devices::collective::PAYLOAD;
use kestrel_devices::virtio_net;
use kestrel_fabric::{EpId, Fabric, FabricApi};
use kestrel_ppc440::decode::{encode, AddrMode, Gpr, Insn, LoadStore, LsOp};
use kestrel_vmm_core::board::{self, BGP_VM};
use kestrel_vmm_core::fabric::{
    attach_ram, is_collective_store, stall_after, still_stalled, touches_bgp, BgpDevices, Node,
    Ram, Stall, VmEndpoint, VmMemory, SHADOW_PACKETS,
};
use kestrel_vmm_core::segment::{GuestMemory, GuestPhysAddr, HostAddr, Segment, SegmentRam};
use std::cell::RefCell;
use std::rc::Rc;

const RAM: u64 = 1 << 20;

type Seg = SegmentRam<'static, 1>;
type Engine = Fabric<VmMemory<Seg>>;

/// The torus DMA group page of every VM.
const TORUS: u64 = match board::TORUS_DMA.window {
    board::Window::Mmio { base, .. } => base,
    board::Window::Dcr { .. } => 0,
};

fn fabric() -> Node<Engine> {
    Rc::new(RefCell::new(Fabric::new(VmMemory::default())))
}

/// Guest RAM of `len` bytes at guest-physical 0, as the VMM builds it (the host address
/// is only arithmetic here).
fn guest_ram(len: u64) -> Ram<Seg> {
    let host = 0x2000_0000;
    let mut map = GuestMemory::new();
    let seg = Segment::new(GuestPhysAddr::from_u32(0), len as u32, HostAddr::new(host));
    map.add(seg.expect("a valid segment")).expect("one segment");
    let bytes = Box::leak(vec![0u8; len as usize].into_boxed_slice());
    Rc::new(RefCell::new(SegmentRam::new(map, host, bytes)))
}

/// One VM: its RAM, its buses and its BG/P devices in front of its endpoint.
struct Vm {
    ram: Ram<Seg>,
    m: board::Machine<Vec<u8>>,
    bgp: BgpDevices<Engine, Seg>,
}

impl Vm {
    fn attach(f: &Node<Engine>) -> Vm {
        let ram = guest_ram(RAM);
        let (ep, bus) = attach_ram(&mut f.borrow_mut(), &ram, RAM, kestrel_fabric::Grant::ALL)
            .expect("a free endpoint");
        let e = VmEndpoint::new(f, ep, bus).expect("routes");
        let (m, bgp) = BGP_VM
            .attach_vm(Vec::new(), Some((e, ram.clone(), RAM)))
            .expect("the BG/P board attaches");
        Vm {
            ram,
            m,
            bgp: bgp.expect("BG/P devices"),
        }
    }

    fn ep(&self) -> EpId {
        self.bgp.endpoint.ep()
    }

    fn mem(&self, gpa: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.ram.borrow().read(gpa, &mut b).expect("in RAM");
        b
    }

    fn poke(&mut self, gpa: u64, data: &[u8]) {
        self.ram.borrow_mut().write(gpa, data).expect("in RAM");
    }

    /// What the VMM does after a fault that touched a BG/P device; returns the log lines.
    fn update(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.bgp
            .update(&self.m.uic, &mut |a| out.push(a.to_string()));
        out
    }

    /// The BIC's core 0 non-critical output (UIC0 input 30).
    fn bic_up(&self) -> bool {
        self.bgp.bic.borrow().bic.ncrit_output(0)
    }

    /// Routes BIC line `irq` to core 0's non-critical output, as Linux does.
    fn unmask(&mut self, irq: u32) {
        let (word, shift) = bic::target_slot(irq);
        let off = bic::group_reg(irq / 32, bic::TARGET + 4 * word);
        let v = bic::TARGET_NCRIT_CORE << shift;
        self.m
            .buses
            .mmio
            .write(bic::BASE + u64::from(off), &v.to_be_bytes())
            .unwrap();
    }

    fn wr(&mut self, off: u32, v: u32) {
        self.m
            .buses
            .mmio
            .write(TORUS + u64::from(off), &v.to_be_bytes())
            .unwrap();
    }

    fn rd(&mut self, off: u32) -> u32 {
        let mut w = [0u8; 4];
        self.m
            .buses
            .mmio
            .read(TORUS + u64::from(off), &mut w)
            .unwrap();
        u32::from_be_bytes(w)
    }

    fn mtdcrx(&mut self, dcr: u32, v: u32) {
        self.m.buses.dcr.write(dcr, v).unwrap();
    }

    fn mfdcrx(&mut self, dcr: u32) -> u32 {
        self.m.buses.dcr.read(dcr).unwrap()
    }

    fn coll_write(&mut self, vc: u64, reg: u32, data: &[u8]) {
        let base = [coll::VC0_BASE, coll::VC1_BASE][vc as usize];
        self.m
            .buses
            .mmio
            .write(base + u64::from(reg), data)
            .unwrap();
    }

    fn coll_read(&mut self, vc: u64, reg: u32, data: &mut [u8]) {
        let base = [coll::VC0_BASE, coll::VC1_BASE][vc as usize];
        self.m.buses.mmio.read(base + u64::from(reg), data).unwrap();
    }

    /// kestrel_coll.ko's send of one packet on `vc`: HI, then 64 word stores to DI.
    fn coll_send(&mut self, vc: u64, header: u32, payload: &[u8]) {
        self.coll_write(vc, coll::HI, &header.to_be_bytes());
        for (i, w) in payload.chunks(4).enumerate() {
            self.coll_write(vc, 4 * (i as u32 % 4), w);
        }
    }

    /// Received headers of `vc` in the status word S.
    fn coll_headers(&mut self, vc: u64) -> u32 {
        let mut w = [0u8; 4];
        self.coll_read(vc, coll::S, &mut w);
        (u32::from_be_bytes(w) >> coll::ST_RCV_HDRS_SHIFT) & coll::ST_HDRS_MASK
    }

    /// kestrel_coll.ko's receive of one packet on `vc`: HR, then 64 word loads of DR.
    fn coll_receive(&mut self, vc: u64) -> (u32, Vec<u8>) {
        let mut w = [0u8; 4];
        self.coll_read(vc, coll::HR, &mut w);
        let mut got = vec![0u8; PAYLOAD];
        for q in got.chunks_mut(4) {
            self.coll_read(vc, coll::DR, q);
        }
        (u32::from_be_bytes(w), got)
    }

    fn net_write(&mut self, off: u32, v: u32) {
        self.m
            .buses
            .mmio
            .write(board::VIRTIO_NET_GPA + u64::from(off), &v.to_le_bytes())
            .unwrap();
    }

    fn net_irq(&self) -> bool {
        self.bgp.net.as_ref().expect("a NIC").model.borrow().irq()
    }

    fn torus_diagnostic(&self) -> Option<(kestrel_devices::torus::Diagnostic, u32)> {
        self.bgp
            .torus
            .as_ref()
            .expect("a torus")
            .borrow_mut()
            .take_diagnostic()
    }
}

const TX: u32 = 0x1_0000 >> 4;
const TX_END: u32 = TX + 64 * 2;
const RX: u32 = 0x2_0000 >> 4;
const RX_END: u32 = RX + 64 * 16;
const FIFO: u32 = 31;
const RFIFO: u32 = 7;
const CTR: u32 = 63;

/// kestrel_torus.ko's bring-up, through the model.
fn torus_program(vm: &mut Vm) {
    use dma::*;
    vm.mtdcrx(DCR_BASE + DCR_BASE_CONTROL, BASE_CONTROL_USE_DMA);
    vm.wr(INJ_DEACTIVATE, 1 << (31 - FIFO));
    vm.wr(inj_fifo(FIFO, FIFO_START), TX);
    vm.wr(inj_fifo(FIFO, FIFO_END), TX_END);
    vm.wr(inj_fifo(FIFO, FIFO_HEAD), TX);
    vm.wr(inj_fifo(FIFO, FIFO_TAIL), TX);
    vm.wr(inj_ctr(CTR, CTR_BASE), 0);
    vm.wr(inj_ctr(CTR, CTR_COUNT), 0);
    vm.wr(INJ_CTR_ENABLE + 4, 1);
    vm.wr(rcv_fifo(RFIFO, FIFO_START), RX);
    vm.wr(rcv_fifo(RFIFO, FIFO_END), RX_END);
    vm.wr(rcv_fifo(RFIFO, FIFO_HEAD), RX);
    vm.wr(rcv_fifo(RFIFO, FIFO_TAIL), RX);
    let byte = (VM_GROUP << 3) | RFIFO;
    for pid in 0..PIDS {
        vm.mtdcrx(DCR_BASE + DCR_RCV_MAP + 2 * pid, byte * 0x0101_0101);
        vm.mtdcrx(DCR_BASE + DCR_RCV_MAP + 2 * pid + 1, byte * 0x0101_0101);
    }
    let ri = VM_GROUP * RCV_FIFOS + RFIFO;
    vm.mtdcrx(DCR_BASE + DCR_RCV_FIFO_ENABLE, 0x8000_0000 >> ri);
    let g = DCR_BASE + DCR_INJ_FIFO_ENABLE + VM_GROUP;
    let en = vm.mfdcrx(g);
    vm.mtdcrx(g, en | (1 << (31 - FIFO)));
    vm.wr(INJ_ACTIVATE, 1 << (31 - FIFO));
    assert_eq!(vm.torus_diagnostic(), None);
}

/// One memory-FIFO descriptor at TX slot `i`: `len` bytes at guest-physical `src` to X.
fn descriptor(vm: &mut Vm, i: u32, src: u32, len: u32, x: u8) {
    use dma::*;
    let hw0 =
        HW_SK | (HW_CHUNKS_MASK << HW_CHUNKS_SHIFT) | HW_PID0 | HW_PID1 | HW_DYNAMIC | u32::from(x);
    let words = [
        0,
        VM_GROUP * COUNTERS + CTR,
        src,
        len,
        hw0,
        0,
        0,
        0x0100_0000,
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    vm.poke(u64::from(TX + 2 * i) << 4, &bytes);
}

#[test]
fn torus_message_from_vm_to_vm_through_the_engine() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    torus_program(&mut a);
    torus_program(&mut b);
    let msg: Vec<u8> = (0..600u32).map(|i| (i * 7) as u8).collect();
    a.poke(0x8_0000, &msg);
    descriptor(&mut a, 0, 0x8_0000, msg.len() as u32, 1);
    a.wr(dma::inj_ctr(CTR, dma::CTR_INCREMENT), msg.len() as u32);
    a.wr(dma::inj_fifo(FIFO, dma::FIFO_TAIL), TX + 2);
    // The engine consumed the descriptor: HEAD reads back guest-physical.
    assert_eq!(a.rd(dma::inj_fifo(FIFO, dma::FIFO_HEAD)), TX + 2);
    assert_eq!(a.torus_diagnostic(), None);
    // B's reception FIFO: 3 packets (240 + 240 + 120), TAIL guest-physical.
    let tail = b.rd(dma::rcv_fifo(RFIFO, dma::FIFO_TAIL));
    assert!(tail > RX && tail < RX_END, "tail {tail:#x}");
    let mut got = Vec::new();
    let mut at = u64::from(RX) << 4;
    while at < u64::from(tail) << 4 {
        let hdr = b.mem(at, 16);
        let chunks = (u32::from_be_bytes(hdr[0..4].try_into().unwrap()) >> dma::HW_CHUNKS_SHIFT)
            & dma::HW_CHUNKS_MASK;
        let slot = u64::from((chunks + 1) * dma::CHUNK_BYTES);
        let n = (msg.len() - got.len()).min(dma::PKT_MAX_PAYLOAD as usize);
        got.extend(b.mem(at + 16, n));
        at += slot;
    }
    assert_eq!(got, msg);
    b.wr(dma::rcv_fifo(RFIFO, dma::FIFO_HEAD), tail);
    assert_eq!(b.torus_diagnostic(), None);
}

#[test]
fn torus_guest_errors_stop_at_the_model_and_raise_the_fatal_line() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    torus_program(&mut a);
    // A counter base past the VM's memory: not forwarded.
    a.wr(dma::inj_ctr(5, dma::CTR_BASE), (RAM >> 4) as u32);
    assert_eq!(
        f.borrow_mut()
            .dma_read(EpId(0), dma::inj_ctr(5, dma::CTR_BASE)),
        Ok(0)
    );
    // Linux unmasks the fatal line (BIC 0x3F) for core 0.
    a.unmask(dma::IRQ_FATAL);
    let log = a.update();
    assert!(a.bic_up());
    // The model's diagnostic reaches the VMM's log.
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_FATAL_STATUS),
        dma::ERR_RANGE
    );
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_BAD_ADDRESS),
        (RAM >> 4) as u32
    );
    a.mtdcrx(dma::DCR_BASE + dma::DCR_FATAL_STATUS, dma::ERR_RANGE);
    a.update();
    assert!(!a.bic_up());
    // The range windows the engine reports read guest-physical: the whole RAM at reset.
    assert_eq!(a.mfdcrx(dma::DCR_BASE + dma::DCR_INJ_MIN), 0);
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_INJ_MIN + 1),
        ((RAM - 1) >> 4) as u32
    );
}

#[test]
fn collective_p2p_from_vm_to_vm_through_the_engine_and_the_shadow() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let naddr_b = b.mfdcrx(coll::DCR_BASE + coll::DCR_NADDR);
    assert_eq!(naddr_b, f.borrow().node_address(EpId(1)));
    let header = coll::HDR_P2P | coll::HDR_IRQ | (naddr_b << coll::HDR_P2P_ADDR_SHIFT);
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 3) as u8).collect();
    a.coll_send(0, header, &payload);
    assert!(a.update().is_empty());
    // The VMM: B's endpoint changed; its update moves the packet to B's shadow FIFO.
    assert_ne!(
        f.borrow_mut().take_changed().unwrap() & b.bgp.endpoint.bit(),
        0
    );
    b.unmask(coll::IRQ_RCV_VC0);
    assert!(b.update().is_empty());
    assert_eq!(
        f.borrow().tree_status(b.ep(), 0) >> coll::ST_RCV_HDRS_SHIFT & coll::ST_HDRS_MASK,
        0
    );
    // B: the receive line of VC0 is up; S counts one header.
    assert!(b.bic_up());
    assert_eq!(b.coll_headers(0), 1);
    assert_eq!(b.coll_receive(0), (header, payload));
    b.update();
    assert!(!b.bic_up());
    // Nothing more: an HR read underruns, flagged by the model.
    let mut w = [0u8; 4];
    b.coll_read(0, coll::HR, &mut w);
    assert_eq!(
        b.mfdcrx(coll::DCR_BASE + coll::DCR_PRXF) & coll::PRX_HUR0,
        coll::PRX_HUR0
    );
}

#[test]
fn virtio_frames_from_vm_to_vm_through_the_engine() {
    use virtio_net::{reg, status, VIRTQ_DESC_F_WRITE};
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let w32 = |vm: &mut Vm, off: u32, v: u32| vm.net_write(off, v);
    for vm in [&mut a, &mut b] {
        w32(vm, reg::STATUS, status::ACKNOWLEDGE | status::DRIVER);
        w32(vm, reg::DRIVER_FEATURES_SEL, 1);
        w32(vm, reg::DRIVER_FEATURES, 1);
        w32(vm, reg::DRIVER_FEATURES_SEL, 0);
        w32(vm, reg::DRIVER_FEATURES, (1 << 5) | (1 << 16));
        w32(
            vm,
            reg::STATUS,
            status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
        );
        for (q, base) in [(0u32, 0x1_0000u64), (1, 0x2_0000)] {
            w32(vm, reg::QUEUE_SEL, q);
            w32(vm, reg::QUEUE_NUM, 16);
            w32(vm, reg::QUEUE_DESC_LOW, base as u32);
            w32(vm, reg::QUEUE_DRIVER_LOW, (base + 0x100) as u32);
            w32(vm, reg::QUEUE_DEVICE_LOW, (base + 0x1000) as u32);
            w32(vm, reg::QUEUE_READY, 1);
        }
        w32(vm, reg::STATUS, 0xF);
    }
    // B posts one RX buffer.
    let mut d = [0u8; 16];
    d[0..8].copy_from_slice(&0x4_0000u64.to_le_bytes());
    d[8..12].copy_from_slice(&1530u32.to_le_bytes());
    d[12..14].copy_from_slice(&VIRTQ_DESC_F_WRITE.to_le_bytes());
    b.poke(0x1_0000, &d);
    b.poke(0x1_0100 + 2, &1u16.to_le_bytes());
    w32(&mut b, reg::QUEUE_NOTIFY, 0);
    // A sends a frame to B's MAC.
    let mac_b = f.borrow().frame_mac(EpId(1));
    let mut frame = mac_b.to_vec();
    frame.extend(f.borrow().frame_mac(EpId(0)));
    frame.extend([0x08, 0x00]);
    frame.extend((0..100u8).collect::<Vec<_>>());
    let mut chain = vec![0u8; 12];
    chain.extend(&frame);
    a.poke(0x5_0000, &chain);
    let mut d = [0u8; 16];
    d[0..8].copy_from_slice(&0x5_0000u64.to_le_bytes());
    d[8..12].copy_from_slice(&(chain.len() as u32).to_le_bytes());
    a.poke(0x2_0000, &d);
    a.poke(0x2_0100 + 2, &1u16.to_le_bytes());
    w32(&mut a, reg::QUEUE_NOTIFY, 1);
    assert!(a.net_irq(), "TX used buffer");
    // The VMM sees B's frame queue changed and updates B: the NIC takes the frame and
    // raises UIC0 input 31.
    assert_ne!(f.borrow_mut().take_changed().unwrap() & 0b10, 0);
    assert_eq!(b.bgp.endpoint.frames_queued(), 1);
    assert!(b.update().is_empty());
    assert_eq!(b.bgp.endpoint.frames_queued(), 0);
    assert!(b.net_irq());
    assert_eq!(b.mem(0x4_0000 + 12, frame.len()), frame);
    let used_len = u32::from_le_bytes(b.mem(0x1_1000 + 8, 4).try_into().unwrap());
    assert_eq!(used_len as usize, 12 + frame.len());
    assert!(a.update().is_empty());
    assert!(b.update().is_empty());
}

/// The MAC the VMM gives a VM's virtio NIC (config space, `struct virtio_net_config`) is
/// its endpoint's fabric MAC, the only source MAC the fabric passes from it (issue 18).
#[test]
fn the_virtio_mac_is_the_endpoints_fabric_mac() {
    let f = fabric();
    let _a = Vm::attach(&f);
    let b = Vm::attach(&f);
    let mut mac = [0u8; 6];
    for (i, m) in mac.iter_mut().enumerate() {
        let mut x = [0u8; 1];
        b.m.buses
            .mmio
            .read(board::VIRTIO_NET_GPA + 0x100 + i as u64, &mut x)
            .unwrap();
        *m = x[0];
    }
    assert_eq!(mac, f.borrow().frame_mac(b.ep()));
    assert_eq!(mac, [6, 0, 0, 1, 0, 0]);
}

/// A fault of class `class` for instruction `insn` at guest-physical `gpa`.
fn fault(class: VirtFault, insn: u32, gpa: u64) -> VirtFaultMsg {
    VirtFaultMsg {
        class,
        pc: 0x100,
        insn,
        gpa,
        msr: 0,
        mask: 0,
        rs_value: 0,
    }
}

fn d_form(op: LsOp) -> u32 {
    let r = |n| Gpr::new(n).expect("a GPR");
    let ls = LoadStore::new(op, r(4), r(3), AddrMode::D { d: 0 }).expect("a D-form access");
    encode(&Insn::LoadStore(ls))
}

/// A sends `n` point-to-point packets to B on VC0; after each, the VMM updates B (as its
/// loop does for every VM whose endpoint changed). Returns the payloads.
fn burst(f: &Node<Engine>, a: &mut Vm, b: &mut Vm, n: usize, first: usize) -> Vec<Vec<u8>> {
    let naddr_b = f.borrow().node_address(b.ep());
    // With the header's interrupt bit, as bgnet sends: every delivery changes B's lines.
    let header = coll::HDR_P2P | coll::HDR_IRQ | (naddr_b << coll::HDR_P2P_ADDR_SHIFT);
    (first..first + n)
        .map(|k| {
            let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i + k) as u8).collect();
            a.coll_send(0, header, &payload);
            a.update();
            if f.borrow_mut().take_changed().unwrap() & b.bgp.endpoint.bit() != 0 {
                b.update();
            }
            payload
        })
        .collect()
}

#[test]
fn shadow_fifos_hold_what_the_engine_cannot_and_drain_in_order() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    // Far more than the engine's 8 packets: all of them wait in B's shadow, none dropped.
    let sent = burst(&f, &mut a, &mut b, 40, 0);
    assert_eq!(f.borrow().stats(b.ep()).drops, 0);
    assert!(!b.bgp.collective_rcv_full());
    // S counts the shadow's packets, saturated at the field's maximum.
    assert_eq!(b.coll_headers(0), 40.min(coll::ST_HDRS_MASK));
    for p in &sent {
        assert_eq!(&b.coll_receive(0).1, p);
    }
    assert_eq!(b.coll_headers(0), 0);
    assert!(b.update().is_empty());
}

#[test]
fn a_full_shadow_leaves_packets_in_the_engine_then_drops_and_logs() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let mut sent = burst(&f, &mut a, &mut b, SHADOW_PACKETS, 0);
    assert!(b.bgp.collective_rcv_full());
    assert!(b.bgp.endpoint.tree_rcv_full());
    // The engine's own FIFO (8 packets) takes the next ones; the ninth is dropped.
    sent.extend(burst(&f, &mut a, &mut b, 8, SHADOW_PACKETS));
    assert_eq!(f.borrow().stats(b.ep()).drops, 0);
    burst(&f, &mut a, &mut b, 1, SHADOW_PACKETS + 8);
    assert_eq!(f.borrow().stats(b.ep()).drops, 1);
    let log = b.update();
    assert_eq!(log, ["fabric: collective VC0 FIFO full: packet dropped"]);
    // Reading drains: the engine's packets follow the shadow's, in order.
    for p in &sent {
        assert_eq!(&b.coll_receive(0).1, p);
    }
    assert!(!b.bgp.collective_rcv_full());
}

#[test]
fn back_pressure_holds_a_sender_while_a_draining_receiver_has_a_full_shadow() {
    // Which faults may complete a packet: stores to a VC window, not loads, not the UART.
    let di = coll::VC0_BASE;
    assert!(is_collective_store(
        &BGP_VM,
        &fault(VirtFault::Mmio, d_form(LsOp::Stw), di)
    ));
    assert!(is_collective_store(
        &BGP_VM,
        &fault(VirtFault::Mmio, d_form(LsOp::Stw), coll::VC1_BASE + 8)
    ));
    assert!(!is_collective_store(
        &BGP_VM,
        &fault(VirtFault::Mmio, d_form(LsOp::Lwz), di)
    ));
    assert!(!is_collective_store(
        &BGP_VM,
        &fault(VirtFault::Mmio, d_form(LsOp::Stb), 0xEF60_0300)
    ));
    assert!(!is_collective_store(
        &board::BAMBOO,
        &fault(VirtFault::Mmio, d_form(LsOp::Stw), di)
    ));
    // The fabric's bookkeeping runs after BG/P and virtio exits only.
    assert!(touches_bgp(&fault(VirtFault::Mmio, d_form(LsOp::Stw), di)));
    assert!(touches_bgp(&fault(
        VirtFault::Mmio,
        d_form(LsOp::Stw),
        board::VIRTIO_NET_GPA
    )));
    assert!(!touches_bgp(&fault(
        VirtFault::Mmio,
        d_form(LsOp::Stb),
        0xEF60_0300
    )));
    // Over the engine: the store that completes the packet that fills B's shadow is held
    // (`stall_after` takes the packet the model injected); B reads, A goes on. A peer
    // that cannot drain (stalled or stopped) holds nobody.
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let store = fault(
        VirtFault::Mmio,
        d_form(LsOp::Stw),
        coll::VC0_BASE + u64::from(coll::DI) + 12,
    );
    let vms = |a: &Vm, b: &Vm, b_drains: bool| {
        let (ea, eb) = (a.bgp.endpoint.clone(), b.bgp.endpoint.clone());
        [(true, ea), (b_drains, eb)]
    };
    let held = |a: &Vm, b: &Vm| {
        let v = vms(a, b, true);
        stall_after(
            &BGP_VM,
            &store,
            &a.bgp.endpoint,
            v.iter().map(|(d, e)| (*d, e)),
        )
    };
    burst(&f, &mut a, &mut b, SHADOW_PACKETS - 1, 0);
    assert_eq!(held(&a, &b), None);
    burst(&f, &mut a, &mut b, 1, SHADOW_PACKETS);
    let stall = held(&a, &b).expect("held after the 128th packet");
    assert_eq!(held(&a, &b), None, "nothing sent since");
    let waits = |a: &Vm, b: &Vm, b_drains: bool| {
        let v = vms(a, b, b_drains);
        still_stalled(stall, &a.bgp.endpoint, v.iter().map(|(d, e)| (*d, e)))
    };
    assert!(waits(&a, &b, true));
    assert!(!waits(&a, &b, false), "a peer that cannot drain");
    // A load of the window completes nothing, and is never held.
    let load = fault(VirtFault::Mmio, d_form(LsOp::Lwz), coll::VC0_BASE);
    burst(&f, &mut a, &mut b, 1, SHADOW_PACKETS + 1);
    let v = vms(&a, &b, true);
    let e = v.iter().map(|(d, e)| (*d, e));
    assert_eq!(stall_after(&BGP_VM, &load, &a.bgp.endpoint, e), None);
    b.coll_receive(0);
    b.coll_receive(0);
    b.update();
    assert!(!waits(&a, &b, true));
    assert_eq!(f.borrow().stats(b.ep()).drops, 0);
}

/// The VMM's back-pressure decision after a store of VM `s` to collective register `reg`
/// of `vc` (`stall_after`, every VM able to drain).
fn held_after(vms: [&Vm; 3], s: usize, vc: u64, reg: u32) -> Option<Stall> {
    let gpa = [coll::VC0_BASE, coll::VC1_BASE][vc as usize] + u64::from(reg);
    let f = fault(VirtFault::Mmio, d_form(LsOp::Stw), gpa);
    stall_after(
        &BGP_VM,
        &f,
        &vms[s].bgp.endpoint,
        vms.map(|v| (true, &v.bgp.endpoint)),
    )
}

/// kestrel_coll.ko's send of one packet by VM `s` (HI, then 64 word stores to DI), fault
/// by fault as the VMM serves them: the store, the sender's update, the update of every
/// VM whose endpoint changed, then the back-pressure decision. Returns the stores (0 the
/// header, 1..=64 the payload words) after which the VMM would hold the sender.
fn held_stores(
    f: &Node<Engine>,
    mut vms: [&mut Vm; 3],
    s: usize,
    vc: u64,
    header: u32,
) -> Vec<usize> {
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 5) as u8).collect();
    let stores = std::iter::once((coll::HI, header.to_be_bytes())).chain(
        payload
            .chunks(4)
            .enumerate()
            .map(|(i, w)| (coll::DI + 4 * (i as u32 % 4), w.try_into().expect("a word"))),
    );
    let mut held = Vec::new();
    for (k, (reg, w)) in stores.enumerate() {
        vms[s].coll_write(vc, reg, &w);
        vms[s].update();
        let changed = f.borrow_mut().take_changed().unwrap();
        for (j, vm) in vms.iter_mut().enumerate() {
            if j != s && changed & vm.bgp.endpoint.bit() != 0 {
                vm.update();
            }
        }
        let [a, b, c] = &vms;
        if held_after([a, b, c], s, vc, reg).is_some() {
            held.push(k);
        }
    }
    held
}

#[test]
fn back_pressure_holds_a_sender_only_for_a_full_receiver_of_its_packet() {
    // Issue 18, finding 5: three VMs; VM 2 never reads its collective, its shadow FIFO
    // fills (from VM 1's packets).
    let f = fabric();
    let mut v0 = Vm::attach(&f);
    let mut v1 = Vm::attach(&f);
    let mut v2 = Vm::attach(&f);
    burst(&f, &mut v1, &mut v2, SHADOW_PACKETS, 0);
    assert!(v2.bgp.collective_rcv_full());
    // VM 0 and VM 1 also have class 1 (granted by the host side); VM 2 has class 0 only.
    for vm in [&v0, &v1] {
        let classes = 1 << 0 | 1 << 1;
        f.borrow_mut()
            .set_routes(vm.ep(), classes, classes)
            .expect("routes");
    }
    let p2p =
        |to: EpId| coll::HDR_P2P | coll::HDR_IRQ | (u32::from(to.0) << coll::HDR_P2P_ADDR_SHIFT);
    let bcast = |class: u32| (class << coll::HDR_CLASS_SHIFT) | coll::HDR_IRQ;
    // VM 0 to VM 1, point to point: no store of VM 0 is held.
    let to_v1 = p2p(v1.ep());
    let held = held_stores(&f, [&mut v0, &mut v1, &mut v2], 0, 0, to_v1);
    assert_eq!(held, [0usize; 0], "VM 0 to VM 1 held while VM 2 is full");
    assert_eq!(v1.coll_receive(0).0, to_v1);
    // A broadcast on class 1, which VM 2 is not a member of: not held either.
    let held = held_stores(&f, [&mut v0, &mut v1, &mut v2], 0, 0, bcast(1));
    assert_eq!(
        held, [0usize; 0],
        "class-1 broadcast held while VM 2 is full"
    );
    assert_eq!(v1.coll_receive(0).0, bcast(1));
    // VM 0 to the full VM 2: held only after the store that completes the packet.
    let to_v2 = p2p(v2.ep());
    let held = held_stores(&f, [&mut v0, &mut v1, &mut v2], 0, 0, to_v2);
    assert_eq!(held, [64], "VM 0 to the full VM 2");
    // The same for a class-0 broadcast, which VM 2 receives.
    let held = held_stores(&f, [&mut v0, &mut v1, &mut v2], 0, 0, bcast(0));
    assert_eq!(held, [64], "class-0 broadcast with VM 2 full");
    // VM 0 held for its packet to VM 2 stays held until VM 2 has room (its engine FIFO
    // refills the shadow as it reads), or while VM 2 cannot drain.
    v0.coll_send(0, to_v2, &[7; PAYLOAD]);
    v0.update();
    v2.update();
    let stall = held_after([&v0, &v1, &v2], 0, 0, coll::DI + 12);
    let stall = stall.expect("held");
    let waits = |vms: [&Vm; 3], drains: bool| {
        still_stalled(
            stall,
            &vms[0].bgp.endpoint,
            vms.map(|v| (drains || v.ep() != vms[2].ep(), &v.bgp.endpoint)),
        )
    };
    assert!(waits([&v0, &v1, &v2], true));
    assert!(!waits([&v0, &v1, &v2], false), "VM 2 cannot drain");
    // VM 2's engine FIFO holds VM 0's three packets: the fourth read makes room.
    for _ in 0..3 {
        v2.coll_receive(0);
        v2.update();
        assert!(waits([&v0, &v1, &v2], true));
    }
    v2.coll_receive(0);
    v2.update();
    assert!(!v2.bgp.collective_rcv_full());
    assert!(!waits([&v0, &v1, &v2], true));
    assert_eq!(f.borrow().stats(v2.ep()).drops, 0);
}

#[test]
fn a_detached_fabric_endpoint_is_a_dead_device_not_a_panic() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    f.borrow_mut().detach(a.ep());
    // Registers read 0, packets go nowhere, the models flag what the guest did wrong.
    assert_eq!(a.rd(dma::inj_fifo(FIFO, dma::FIFO_HEAD)), 0);
    a.coll_send(0, coll::HDR_P2P, &[0; PAYLOAD]);
    let mut w = [0u8; 4];
    a.coll_read(0, coll::HR, &mut w);
    assert_eq!(u32::from_be_bytes(w), 0);
    a.update();
    assert!(!a.bic_up());
}
