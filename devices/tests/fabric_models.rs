//! The models in front of the real fabric engine (`kestrel-fabric`, a dev-dependency only):
//! two "VMs" (endpoints 0 and 1), each with its RAM as the endpoint's window (guest-physical
//! 0 = window offset 0), a BIC, a collective, a torus DMA group and a virtio-net device,
//! talking over one in-process `Fabric` the way the VMM wires them. Each test drives the
//! guest side register by register, as the Linux drivers do, and checks what arrives at
//! the other VM; the backends here are the thin adapters the VMM writes.

use kestrel_bgp::{bic, coll, dma};
use kestrel_devices::bic::Bic;
use kestrel_devices::bus::{GuestRam, MmioDevice, OutOfRam};
use kestrel_devices::collective::{Collective, TreeBackend, TreeError, PAYLOAD};
use kestrel_devices::torus::{DmaBackend, TorusDma, TORUS_DCR_BASE};
use kestrel_devices::virtio_net::{self, FrameBackend, VirtioNet};
use kestrel_fabric::{EpId, Fabric, FabricError, VecMemory};
use std::cell::RefCell;
use std::rc::Rc;

const RAM: u64 = 1 << 20;

type Shared = Rc<RefCell<Fabric<VecMemory>>>;

/// One endpoint of the shared fabric: every backend trait of the models.
#[derive(Clone)]
struct Ep {
    f: Shared,
    ep: EpId,
}

impl DmaBackend for Ep {
    fn read(&mut self, offset: u32) -> u32 {
        self.f.borrow_mut().dma_read(self.ep, offset).unwrap_or(0)
    }
    fn write(&mut self, offset: u32, value: u32) {
        let _ = self.f.borrow_mut().dma_write(self.ep, offset, value);
    }
    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.f.borrow_mut().dcr_read(self.ep, dcr).unwrap_or(0)
    }
    fn dcr_write(&mut self, dcr: u32, value: u32) {
        let _ = self.f.borrow_mut().dcr_write(self.ep, dcr, value);
    }
}

impl TreeBackend for Ep {
    fn inject(&mut self, vc: usize, header: u32, payload: &[u8; PAYLOAD]) -> Result<(), TreeError> {
        match self
            .f
            .borrow_mut()
            .tree_inject(self.ep, vc, header, payload)
        {
            Ok(()) => Ok(()),
            Err(FabricError::InjectionFull) => Err(TreeError::Full),
            Err(_) => Err(TreeError::Refused),
        }
    }
    fn receive(&mut self, vc: usize, payload: &mut [u8; PAYLOAD]) -> Option<u32> {
        self.f.borrow_mut().tree_receive(self.ep, vc, payload)
    }
    fn status(&self, vc: usize) -> u32 {
        self.f.borrow().tree_status(self.ep, vc)
    }
    fn dcr_read(&mut self, dcr: u32) -> u32 {
        self.f.borrow_mut().dcr_read(self.ep, dcr).unwrap_or(0)
    }
    fn dcr_write(&mut self, dcr: u32, value: u32) {
        let _ = self.f.borrow_mut().dcr_write(self.ep, dcr, value);
    }
}

impl FrameBackend for Ep {
    fn send(&mut self, frame: &[u8]) {
        let _ = self.f.borrow_mut().frame_send(self.ep, frame);
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.f.borrow_mut().frame_receive(self.ep, buf)
    }
}

/// The VM's RAM is the endpoint's window.
impl GuestRam for Ep {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> Result<(), OutOfRam> {
        let f = self.f.borrow();
        let w = f.memory().window(self.ep);
        let bad = OutOfRam {
            gpa,
            len: buf.len(),
        };
        let s = usize::try_from(gpa).map_err(|_| bad)?;
        buf.copy_from_slice(w.get(s..s.checked_add(buf.len()).ok_or(bad)?).ok_or(bad)?);
        Ok(())
    }
    fn write(&mut self, gpa: u64, data: &[u8]) -> Result<(), OutOfRam> {
        let mut f = self.f.borrow_mut();
        let w = f.memory_mut().window_mut(self.ep);
        let bad = OutOfRam {
            gpa,
            len: data.len(),
        };
        let s = usize::try_from(gpa).map_err(|_| bad)?;
        w.get_mut(s..s.checked_add(data.len()).ok_or(bad)?)
            .ok_or(bad)?
            .copy_from_slice(data);
        Ok(())
    }
}

struct Vm {
    ep: Ep,
    bic: Bic,
    coll: Collective<Ep>,
    torus: TorusDma<Ep>,
    net: VirtioNet<Ep, Ep>,
}

impl Vm {
    fn attach(f: &Shared) -> Vm {
        let (id, bus) = f.borrow_mut().attach(RAM).expect("a free endpoint");
        f.borrow_mut().memory_mut().set_window(id, RAM as usize);
        let ep = Ep {
            f: f.clone(),
            ep: id,
        };
        let mac = f.borrow().frame_mac(id);
        Vm {
            bic: Bic::new(),
            coll: Collective::new(ep.clone()),
            torus: TorusDma::new(ep.clone(), 0, RAM, bus),
            net: VirtioNet::new(ep.clone(), ep.clone(), mac),
            ep,
        }
    }

    fn mem(&self, gpa: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        GuestRam::read(&self.ep, gpa, &mut b).expect("in RAM");
        b
    }

    fn poke(&mut self, gpa: u64, data: &[u8]) {
        GuestRam::write(&mut self.ep, gpa, data).expect("in RAM");
    }

    /// What the VMM does after a fault: the fabric's lines and the models' into the BIC.
    fn update_bic(&mut self) {
        let mut lines = self.ep.f.borrow().irq_lines(self.ep.ep);
        self.coll.irq_lines(&mut lines);
        self.torus.irq_lines(&mut lines);
        self.bic.set_lines(&lines);
    }

    fn wr(&mut self, off: u32, v: u32) {
        self.torus
            .mmio_write(u64::from(off), &v.to_be_bytes())
            .unwrap();
    }

    fn rd(&mut self, off: u32) -> u32 {
        let mut w = [0u8; 4];
        self.torus.mmio_read(u64::from(off), &mut w).unwrap();
        u32::from_be_bytes(w)
    }

    fn mtdcrx(&mut self, dcr: u32, v: u32) {
        self.torus.write_dcr(dcr - TORUS_DCR_BASE, v);
    }

    fn mfdcrx(&mut self, dcr: u32) -> u32 {
        self.torus.read_dcr(dcr - TORUS_DCR_BASE)
    }
}

fn fabric() -> Shared {
    Rc::new(RefCell::new(Fabric::new(VecMemory::new())))
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
    assert_eq!(vm.torus.take_diagnostic(), None);
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
    assert_eq!(a.torus.take_diagnostic(), None);
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
    assert_eq!(b.torus.take_diagnostic(), None);
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
    let (word, shift) = bic::target_slot(dma::IRQ_FATAL);
    a.bic.write(
        bic::group_reg(dma::IRQ_FATAL / 32, bic::TARGET + 4 * word),
        bic::TARGET_NCRIT_CORE << shift,
    );
    a.update_bic();
    assert!(a.bic.ncrit_output(0));
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_FATAL_STATUS),
        dma::ERR_RANGE
    );
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_BAD_ADDRESS),
        (RAM >> 4) as u32
    );
    a.mtdcrx(dma::DCR_BASE + dma::DCR_FATAL_STATUS, dma::ERR_RANGE);
    a.update_bic();
    assert!(!a.bic.ncrit_output(0));
    // The range windows the engine reports read guest-physical: the whole RAM at reset.
    assert_eq!(a.mfdcrx(dma::DCR_BASE + dma::DCR_INJ_MIN), 0);
    assert_eq!(
        a.mfdcrx(dma::DCR_BASE + dma::DCR_INJ_MIN + 1),
        ((RAM - 1) >> 4) as u32
    );
}

#[test]
fn collective_p2p_from_vm_to_vm_through_the_engine() {
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let naddr_b = b.coll.read_dcr(coll::DCR_NADDR);
    assert_eq!(naddr_b, f.borrow().node_address(EpId(1)));
    let header = coll::HDR_P2P | coll::HDR_IRQ | (naddr_b << coll::HDR_P2P_ADDR_SHIFT);
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 3) as u8).collect();
    a.coll
        .mmio_write(u64::from(coll::HI), &header.to_be_bytes())
        .unwrap();
    for (i, w) in payload.chunks(4).enumerate() {
        a.coll.mmio_write(4 * (i as u64 % 4), w).unwrap();
    }
    assert_eq!(a.coll.take_diagnostic(), None);
    // B: the receive line of VC0 is up; S counts one header.
    let (word, shift) = bic::target_slot(coll::IRQ_RCV_VC0);
    b.bic.write(
        bic::group_reg(5, bic::TARGET + 4 * word),
        bic::TARGET_NCRIT_CORE << shift,
    );
    b.update_bic();
    assert!(b.bic.ncrit_output(0));
    let mut w = [0u8; 4];
    b.coll.mmio_read(u64::from(coll::S), &mut w).unwrap();
    assert_eq!(
        (u32::from_be_bytes(w) >> coll::ST_RCV_HDRS_SHIFT) & coll::ST_HDRS_MASK,
        1
    );
    b.coll.mmio_read(u64::from(coll::HR), &mut w).unwrap();
    assert_eq!(u32::from_be_bytes(w), header);
    let mut got = vec![0u8; PAYLOAD];
    for q in got.chunks_mut(4) {
        b.coll.mmio_read(u64::from(coll::DR), q).unwrap();
    }
    assert_eq!(got, payload);
    b.update_bic();
    assert!(!b.bic.ncrit_output(0));
    // Nothing more: an HR read underruns, flagged by the model.
    b.coll.mmio_read(u64::from(coll::HR), &mut w).unwrap();
    assert_eq!(
        b.coll.read_dcr(coll::DCR_PRXF) & coll::PRX_HUR0,
        coll::PRX_HUR0
    );
}

#[test]
fn virtio_frames_from_vm_to_vm_through_the_engine() {
    use virtio_net::{reg, status, VIRTQ_DESC_F_WRITE};
    let f = fabric();
    let mut a = Vm::attach(&f);
    let mut b = Vm::attach(&f);
    let w32 = |vm: &mut Vm, off: u32, v: u32| {
        vm.net.mmio_write(u64::from(off), &v.to_le_bytes()).unwrap()
    };
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
    assert!(a.net.irq(), "TX used buffer");
    // The VMM sees B's frame queue changed and polls.
    assert_ne!(f.borrow_mut().take_changed() & 0b10, 0);
    assert_eq!(b.net.poll_rx(), 1);
    assert!(b.net.irq());
    assert_eq!(b.mem(0x4_0000 + 12, frame.len()), frame);
    let used_len = u32::from_le_bytes(b.mem(0x1_1000 + 8, 4).try_into().unwrap());
    assert_eq!(used_len as usize, 12 + frame.len());
    assert_eq!(a.net.take_diagnostic(), None);
    assert_eq!(b.net.take_diagnostic(), None);
}
