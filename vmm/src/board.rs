//! The board description: the one list of a VM's devices. It feeds the VMM's buses
//! (which model answers where), the guest's device tree (`kestrel-devtree` writes a node
//! per device) and the kernel's MMIO declarations ([`Board::mmio_declarations`]: the pages
//! the VMM declares device memory with `VcpuControl(DECLARE_MMIO)`).
//!
//! [`BAMBOO`] is QEMU's `-M bamboo` as the VMM models it: UIC0 on DCRs 0xC0..=0xC8 and two
//! 16550 UARTs at 0xEF600300 (UIC input 0) and 0xEF600400 (input 1). Its `device_space`
//! (0xE000_0000..0xF000_0000) is where an OS guest probes: pages there that no device
//! covers are declared on first touch and their accesses get data storage exceptions.
//!
//! [`BGP_VM`] is bamboo plus the Blue Gene/P interconnect of paper section 4.3 and a
//! paravirtual NIC (every address and number from `kestrel_bgp`, guest-physical 36-bit):
//!
//! | device | where | interrupt |
//! |---|---|---|
//! | BIC | MMIO 0x7_3000_0000, 4 KiB | cascaded into UIC0 input 30 (level, high) |
//! | collective VC0 / VC1 | MMIO 0x6_1000_0000 / 0x6_1100_0000, 0x400 each; DCRs 0xC00..0xC7F | BIC 0xB4..0xB7 |
//! | torus DMA, the VM's group (group 3) | MMIO 0x6_0000_3000, 4 KiB; DCRs 0xC80..0xCFF (torus), 0xD00..0xDFF (DMA) | BIC lines of the DMA |
//! | virtio-mmio network device | MMIO 0xE000_0000, 0x200 | UIC0 input 31 |
//!
//! A model with several windows (the collective, the torus) is one device entry per window,
//! all of the same [`Model`]; the VMM attaches one model instance to all of them
//! ([`Board::attach_with`]). The BG/P windows lie above 4 GiB, where the kernel treats every
//! guest-physical access as device memory, so they need no MMIO declaration.

use crate::bus::{BusError, Shifted};
use crate::fabric::{BgpDevices, Nic, Ram, SharedRam, VColl, VTorus, VmEndpoint};
use crate::fault::Buses;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use kestrel_bgp::{bic, coll, dma, torus};
use kestrel_devices::bus::DcrDevice;
use kestrel_devices::bus::{GuestRam, MmioDevice, NullSink, TxSink, UartPort, UicInput};
use kestrel_devices::collective::{Collective, VC_STRIDE};
use kestrel_devices::torus::TorusDma;
use kestrel_devices::virtio_net::VirtioNet;
use kestrel_devices::{BicCascade, Uic, UART_REGS, UIC_DCR_BASE, UIC_DCR_COUNT};
use kestrel_fabric::FabricApi;

/// The 4 KiB page: the granule of MMIO declarations.
pub const PAGE: u64 = 0x1000;

/// Which model a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// A 16550A UART (byte registers), `kestrel_devices::Uart16550`.
    Uart16550,
    /// The PPC440EP UIC, `kestrel_devices::Uic`: the interrupt controller the other
    /// devices' `irq` inputs belong to.
    Uic,
    /// The BG/P interrupt controller (a cascade: its `irq` is the UIC0 input it drives).
    Bic,
    /// The BG/P collective network (its VC windows and DCRs; interrupts on the BIC).
    Collective,
    /// The BG/P torus DMA group of the VM (its group page, torus and DMA DCRs; interrupts
    /// on the BIC).
    TorusDma,
    /// A virtio-mmio (version 2) network device.
    VirtioNet,
}

impl Model {
    /// Whether the VMM creates this model itself ([`Board::attach_with`]'s `other` does
    /// the rest): the UIC and the UARTs.
    pub const fn is_builtin(self) -> bool {
        matches!(self, Model::Uart16550 | Model::Uic)
    }
}

/// Where a device answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Guest-physical `[base, base + size)`.
    Mmio { base: u64, size: u64 },
    /// DCRs `base..base + count`.
    Dcr { base: u32, count: u32 },
}

/// One device of a board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Short name for log lines.
    pub name: &'static str,
    pub model: Model,
    pub window: Window,
    /// The UIC input of its interrupt output.
    pub irq: Option<u32>,
}

/// A board: its devices and the device space an OS guest may probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Board {
    pub devices: &'static [Device],
    /// Guest-physical `[start, end)` that traps as device memory for an OS guest even
    /// where no device is (accesses there get data storage exceptions).
    pub device_space: (u64, u64),
}

/// QEMU bamboo's UART0 (the console).
pub const UART0: Device = Device {
    name: "uart0",
    model: Model::Uart16550,
    window: Window::Mmio {
        base: 0xEF60_0300,
        size: UART_REGS as u64,
    },
    irq: Some(0),
};

/// QEMU bamboo's UART1 (no back end: its output is dropped, as with `-serial null`).
pub const UART1: Device = Device {
    name: "uart1",
    model: Model::Uart16550,
    window: Window::Mmio {
        base: 0xEF60_0400,
        size: UART_REGS as u64,
    },
    irq: Some(1),
};

/// UIC0.
pub const UIC0: Device = Device {
    name: "uic0",
    model: Model::Uic,
    window: Window::Dcr {
        base: UIC_DCR_BASE,
        count: UIC_DCR_COUNT,
    },
    irq: None,
};

/// The virtual bamboo board.
pub const BAMBOO: Board = Board {
    devices: &[UIC0, UART0, UART1],
    device_space: (0xE000_0000, 0xF000_0000),
};

/// The BG/P interrupt controller, cascaded into UIC0.
pub const BIC: Device = Device {
    name: "bic",
    model: Model::Bic,
    window: Window::Mmio {
        base: bic::BASE,
        size: bic::SIZE,
    },
    irq: Some(bic::UIC0_CASCADE_INPUT),
};

/// The collective network's virtual channel 0 window.
pub const COLL_VC0: Device = Device {
    name: "coll-vc0",
    model: Model::Collective,
    window: Window::Mmio {
        base: coll::VC0_BASE,
        size: coll::VC_SIZE,
    },
    irq: None,
};

/// The collective network's virtual channel 1 window.
pub const COLL_VC1: Device = Device {
    name: "coll-vc1",
    model: Model::Collective,
    window: Window::Mmio {
        base: coll::VC1_BASE,
        size: coll::VC_SIZE,
    },
    irq: None,
};

/// The collective network's DCRs.
pub const COLL_DCR: Device = Device {
    name: "coll-dcr",
    model: Model::Collective,
    window: Window::Dcr {
        base: coll::DCR_BASE,
        count: coll::DCR_COUNT,
    },
    irq: None,
};

/// The VM's torus DMA group page (it sees its group as group [`dma::VM_GROUP`]).
pub const TORUS_DMA: Device = Device {
    name: "torus-dma",
    model: Model::TorusDma,
    window: Window::Mmio {
        base: dma::BASE + dma::VM_GROUP as u64 * dma::GROUP_SIZE,
        size: dma::GROUP_SIZE,
    },
    irq: None,
};

/// The first torus DCR.
pub const TORUS_DCR_BASE: u32 = torus::DCR_BASE;

/// The torus DCRs.
pub const TORUS_DCR: Device = Device {
    name: "torus-dcr",
    model: Model::TorusDma,
    window: Window::Dcr {
        base: torus::DCR_BASE,
        count: torus::DCR_COUNT,
    },
    irq: None,
};

/// The torus DMA engine's DCRs.
pub const DMA_DCR: Device = Device {
    name: "dma-dcr",
    model: Model::TorusDma,
    window: Window::Dcr {
        base: dma::DCR_BASE,
        count: dma::DCR_COUNT,
    },
    irq: None,
};

/// Guest-physical address of the virtio-mmio network device (in bamboo's device space,
/// where QEMU's bamboo has nothing).
pub const VIRTIO_NET_GPA: u64 = 0xE000_0000;
/// Size of its register window (virtio-mmio version 2: registers and config space).
pub const VIRTIO_NET_SIZE: u64 = 0x200;
/// The UIC0 input of its interrupt (free in a VM: bamboo's UIC1 cascade, not modelled).
pub const VIRTIO_NET_UIC_INPUT: u32 = 31;

/// The paravirtual NIC.
pub const VIRTIO_NET: Device = Device {
    name: "virtio-net",
    model: Model::VirtioNet,
    window: Window::Mmio {
        base: VIRTIO_NET_GPA,
        size: VIRTIO_NET_SIZE,
    },
    irq: Some(VIRTIO_NET_UIC_INPUT),
};

/// The BG/P devices of a VM: BIC, collective, torus DMA.
pub const BGP_DEVICES: [Device; 7] = [
    BIC, COLL_VC0, COLL_VC1, COLL_DCR, TORUS_DMA, TORUS_DCR, DMA_DCR,
];

/// Bamboo with the BG/P interconnect and the virtio NIC: the board of every VM.
pub const BGP_VM: Board = Board {
    devices: &[
        UIC0, UART0, UART1, BIC, COLL_VC0, COLL_VC1, COLL_DCR, TORUS_DMA, TORUS_DCR, DMA_DCR,
        VIRTIO_NET,
    ],
    device_space: BAMBOO.device_space,
};

/// What creates the models that are not built in ([`Board::attach_with`]): called with the
/// device and the UIC (for interrupt inputs).
pub type ModelFactory<'a> = dyn FnMut(&Device, &Rc<RefCell<Uic>>) -> Option<Attachment> + 'a;

/// A model the VMM created for a device of the board ([`Board::attach_with`]).
#[derive(Clone)]
pub enum Attachment {
    Mmio(Rc<RefCell<dyn MmioDevice>>),
    Dcr(Rc<RefCell<dyn DcrDevice>>),
}

/// A board's devices, attached to its buses: what the VMM keeps typed handles to.
pub struct Machine<S: TxSink> {
    pub buses: Buses,
    /// The interrupt controller the devices' lines go to (its outputs drive the vCPU).
    pub uic: Rc<RefCell<Uic>>,
    /// The first UART: the console (the others' output is dropped, as with QEMU's
    /// `-serial null`).
    pub console: Rc<RefCell<UartPort<UicInput, S>>>,
}

/// What [`Board::attach_vm`] makes: the machine, and its BG/P devices if it has any.
pub type VmMachine<S, F, R> = (Machine<S>, Option<BgpDevices<F, R>>);

/// Why a board could not be attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachError {
    Bus(BusError),
    /// A device whose model and window do not go together, a UART without a line, or a
    /// device nothing attached a model to.
    Device(&'static str),
    /// No UART for the console.
    NoConsole,
}

impl Board {
    /// Creates the board's models and attaches them: the UIC (QEMU's, which ignores the
    /// polarity register) on the DCR bus, each UART on the MMIO bus with its UIC input;
    /// the first UART's output goes to `console`. Every device must be a UIC or a UART.
    pub fn attach<S: TxSink + 'static>(&self, console: S) -> Result<Machine<S>, AttachError> {
        self.attach_with(console, &mut |_, _| None)
    }

    /// [`Board::attach`], with `other` creating the models that are not built in
    /// ([`Model::is_builtin`]): it is called once per such device entry, after the UIC
    /// exists (for the interrupt inputs), and returns the model for that window (one
    /// model instance may serve several windows), or `None` for an error.
    pub fn attach_with<S: TxSink + 'static>(
        &self,
        console: S,
        other: &mut ModelFactory,
    ) -> Result<Machine<S>, AttachError> {
        self.check().map_err(AttachError::Bus)?;
        let mut buses = Buses::default();
        let uic = Rc::new(RefCell::new(Uic::without_polarity()));
        let mut sink = Some(console);
        let mut first = None;
        for d in self.devices {
            match (d.model, d.window) {
                (Model::Uic, Window::Dcr { base, count }) => buses
                    .dcr
                    .insert(base as u64, count as u64, d.name, uic.clone())
                    .map_err(AttachError::Bus)?,
                (Model::Uart16550, Window::Mmio { base, size }) => {
                    let input = d.irq.ok_or(AttachError::Device(d.name))?;
                    let line = UicInput {
                        uic: uic.clone(),
                        input,
                    };
                    let dev: Rc<RefCell<dyn MmioDevice>> = match sink.take() {
                        Some(s) => {
                            let c = Rc::new(RefCell::new(UartPort::new(line, s)));
                            first = Some(c.clone());
                            c
                        }
                        None => Rc::new(RefCell::new(UartPort::new(line, NullSink))),
                    };
                    buses
                        .mmio
                        .insert(base, size, d.name, dev)
                        .map_err(AttachError::Bus)?;
                }
                (m, window) if !m.is_builtin() => {
                    match (window, other(d, &uic).ok_or(AttachError::Device(d.name))?) {
                        (Window::Mmio { base, size }, Attachment::Mmio(dev)) => {
                            buses.mmio.insert(base, size, d.name, dev)
                        }
                        (Window::Dcr { base, count }, Attachment::Dcr(dev)) => {
                            buses.dcr.insert(base as u64, count as u64, d.name, dev)
                        }
                        _ => return Err(AttachError::Device(d.name)),
                    }
                    .map_err(AttachError::Bus)?;
                }
                _ => return Err(AttachError::Device(d.name)),
            }
        }
        Ok(Machine {
            buses,
            uic,
            console: first.ok_or(AttachError::NoConsole)?,
        })
    }

    /// [`Board::attach`], with the BG/P devices (BIC, collective, torus DMA, virtio NIC)
    /// in front of `fabric`'s endpoint, if given: the VM's endpoint and its RAM (guest-physical
    /// `[0, ram_len)`, the endpoint's window, Fig. 6). One model per kind serves all of its
    /// windows (the collective's VC1 window is `VC_STRIDE` into the model, the DMA DCRs
    /// follow the torus DCRs). Without `fabric`, a board with BG/P devices does not attach.
    pub fn attach_vm<S: TxSink + 'static, F: FabricApi + 'static, R: GuestRam + 'static>(
        &self,
        console: S,
        fabric: Option<(VmEndpoint<F>, Ram<R>, u64)>,
    ) -> Result<VmMachine<S, F, R>, AttachError> {
        let Some((endpoint, ram, ram_len)) = fabric else {
            return self.attach(console).map(|m| (m, None));
        };
        let mut bic = None;
        let mut coll: Option<Rc<RefCell<VColl<F>>>> = None;
        let mut torus: Option<Rc<RefCell<VTorus<F>>>> = None;
        let mut net = None;
        let machine = self.attach_with(console, &mut |d: &Device, uic: &Rc<RefCell<Uic>>| {
            match (d.model, d.window) {
                (Model::Bic, Window::Mmio { .. }) => {
                    let line = UicInput {
                        uic: uic.clone(),
                        input: d.irq?,
                    };
                    let b = Rc::new(RefCell::new(BicCascade::new(line)));
                    bic = Some(b.clone());
                    Some(Attachment::Mmio(b))
                }
                (Model::Collective, window) => {
                    let c = coll
                        .get_or_insert_with(|| {
                            Rc::new(RefCell::new(Collective::new(endpoint.clone())))
                        })
                        .clone();
                    Some(match window {
                        // The model spans both VC windows: VC1's is VC_STRIDE into it.
                        Window::Mmio { base, .. } if base == coll::VC1_BASE => {
                            Attachment::Mmio(Rc::new(RefCell::new(Shifted {
                                dev: c,
                                by: VC_STRIDE,
                            })))
                        }
                        Window::Mmio { .. } => Attachment::Mmio(c),
                        Window::Dcr { .. } => Attachment::Dcr(c),
                    })
                }
                (Model::VirtioNet, Window::Mmio { .. }) => {
                    let mac = endpoint.frame_mac();
                    let shared = SharedRam(ram.clone());
                    let n = Rc::new(RefCell::new(VirtioNet::new(shared, endpoint.clone(), mac)));
                    net = Some(Nic {
                        model: n.clone(),
                        uic_input: d.irq?,
                    });
                    Some(Attachment::Mmio(n))
                }
                (Model::TorusDma, window) => {
                    // Fig. 6: guest-physical [0, ram_len) is the fabric's bus window.
                    let t = torus
                        .get_or_insert_with(|| {
                            let (e, bus) = (endpoint.clone(), endpoint.bus_base());
                            Rc::new(RefCell::new(TorusDma::new(e, 0, ram_len, bus)))
                        })
                        .clone();
                    Some(match window {
                        Window::Mmio { .. } => Attachment::Mmio(t),
                        // The model's DCRs start at the torus DCRs; the DMA DCRs follow.
                        Window::Dcr { base, .. } => {
                            Attachment::Dcr(Rc::new(RefCell::new(Shifted {
                                dev: t,
                                by: (base - TORUS_DCR_BASE) as u64,
                            })))
                        }
                    })
                }
                _ => None,
            }
        })?;
        let bgp = BgpDevices {
            endpoint,
            bic: bic.ok_or(AttachError::Device("the board has no BIC"))?,
            coll,
            torus,
            net,
        };
        Ok((machine, Some(bgp)))
    }

    /// The devices of model `m`, in board order.
    pub fn of_model(&self, m: Model) -> impl Iterator<Item = &Device> + '_ {
        self.devices.iter().filter(move |d| d.model == m)
    }

    /// Whether guest-physical `gpa` lies in the board's device space.
    pub fn in_device_space(&self, gpa: u64) -> bool {
        (self.device_space.0..self.device_space.1).contains(&gpa)
    }

    /// The devices whose MMIO windows share a page with guest-physical `gpa` (the pages
    /// [`Board::mmio_declarations`] declares device memory), in board order: for log lines
    /// about an access no window answers, like an instruction fetch from such a page.
    pub fn devices_on_page(&self, gpa: u64) -> impl Iterator<Item = &'static Device> {
        let devices: &'static [Device] = self.devices;
        devices.iter().filter(move |d| match d.window {
            Window::Mmio { base, size } => {
                let start = base & !(PAGE - 1);
                let end = base.saturating_add(size).next_multiple_of(PAGE);
                (start..end).contains(&gpa)
            }
            Window::Dcr { .. } => false,
        })
    }

    /// The guest-physical pages to declare device memory: every MMIO window below 4 GiB,
    /// widened to whole pages, adjacent or overlapping pages merged, as `(base, size)`
    /// sorted by base. (Above 4 GiB every access is device memory already.)
    pub fn mmio_declarations(&self) -> Vec<(u64, u64)> {
        let mut pages: Vec<(u64, u64)> = self
            .devices
            .iter()
            .filter_map(|d| match d.window {
                Window::Mmio { base, size } if base < 1 << 32 => {
                    let start = base & !(PAGE - 1);
                    let end = (base + size).min(1 << 32).next_multiple_of(PAGE);
                    Some((start, end))
                }
                _ => None,
            })
            .collect();
        pages.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (start, end) in pages {
            match out.last_mut() {
                Some(last) if start <= last.0 + last.1 => last.1 = last.1.max(end - last.0),
                _ => out.push((start, end - start)),
            }
        }
        out
    }

    /// Checks that no two windows of one kind overlap, and that every interrupt input
    /// exists: the checks the buses make, before anything is built.
    pub fn check(&self) -> Result<(), BusError> {
        let windows: Vec<(bool, u64, u64, &'static str)> = self
            .devices
            .iter()
            .map(|d| match d.window {
                Window::Mmio { base, size } => (true, base, size, d.name),
                Window::Dcr { base, count } => (false, base as u64, count as u64, d.name),
            })
            .collect();
        for (i, &(mmio, base, size, _)) in windows.iter().enumerate() {
            if size == 0 || base.checked_add(size).is_none() {
                return Err(BusError::BadRange { base, size });
            }
            for &(m2, b2, s2, with) in &windows[..i] {
                if m2 == mmio && base < b2 + s2 && b2 < base + size {
                    return Err(BusError::Overlap { base, size, with });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fault::{handle, Outcome};
    use kestrel_abi::{FaultReply, VirtFault, VirtFaultMsg};
    use kestrel_devices::uart::{ier, iir, lsr, reg};
    use kestrel_ppc440::decode::{encode, AddrMode, Gpr, Insn, LoadStore, LsOp};
    use kestrel_ppc440::encode::{lwz, mfdcr, mtdcr};
    use std::vec;

    fn mmio(insn: u32, gpa: u64, rs_value: u32) -> VirtFaultMsg {
        VirtFaultMsg {
            class: VirtFault::Mmio,
            pc: 0x100,
            insn,
            gpa,
            msr: 0,
            mask: 0,
            rs_value,
        }
    }

    fn dcr(insn: u32, rs_value: u32) -> VirtFaultMsg {
        VirtFaultMsg {
            class: VirtFault::Instruction,
            pc: 0x100,
            insn,
            gpa: 0,
            msr: 0,
            mask: 0,
            rs_value,
        }
    }

    fn d_form(op: LsOp, rt: u8, d: i16, ra: u8) -> u32 {
        let ls = LoadStore::new(
            op,
            Gpr::new(rt).unwrap(),
            Gpr::new(ra).unwrap(),
            AddrMode::D { d },
        )
        .unwrap();
        encode(&Insn::LoadStore(ls))
    }

    fn stb(rs: u8, d: i16, ra: u8) -> u32 {
        d_form(LsOp::Stb, rs, d, ra)
    }

    fn lbz(rt: u8, d: i16, ra: u8) -> u32 {
        d_form(LsOp::Lbz, rt, d, ra)
    }

    /// The attached bamboo board driven through the fault loop as Linux's 8250 and UIC
    /// drivers drive it: console bytes come out, and the THR-empty interrupt reaches the
    /// UIC's output once the UIC enables UART0's input.
    #[test]
    fn attached_bamboo_works_as_linux_drives_it() {
        let m = BAMBOO.attach(Vec::<u8>::new()).unwrap();
        let uart0 = 0xEF60_0300u64;
        let mut log = |u| panic!("unmodelled: {u}");
        for &b in b"ok\n" {
            let out = handle(
                &mmio(stb(4, 0, 3), uart0 + reg::THR as u64, b as u32),
                None,
                None,
                &m.buses,
                &mut log,
            );
            assert_eq!(out, Outcome::Reply(FaultReply::resume(0x104)));
        }
        assert_eq!(m.console.borrow().tx, b"ok\n");
        let out = handle(
            &mmio(lbz(5, 5, 3), uart0 + reg::LSR as u64, 0),
            None,
            None,
            &m.buses,
            &mut log,
        );
        let Outcome::Reply(r) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            r.set_gpr.map(|(i, v)| (i, v as u8 & lsr::THRE)),
            Some((5, lsr::THRE))
        );
        // UIC: enable input 0 (UIC_ER, MSB-0 bit 0), then UART0's THR-empty interrupt.
        let er = UIC_DCR_BASE + kestrel_devices::uic::reg::ER;
        handle(
            &dcr(mtdcr(er, 4), 0x8000_0000),
            None,
            None,
            &m.buses,
            &mut log,
        );
        assert!(!m.uic.borrow().irq_output());
        handle(
            &mmio(stb(4, 1, 3), uart0 + reg::IER as u64, ier::THRI as u32),
            None,
            None,
            &m.buses,
            &mut log,
        );
        assert!(m.uic.borrow().irq_output());
        let out = handle(
            &dcr(mfdcr(6, UIC_DCR_BASE), 0),
            None,
            None,
            &m.buses,
            &mut log,
        );
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x104).set_gpr(6, 0x8000_0000))
        );
        // Reading IIR (THR empty) lowers the line.
        let out = handle(
            &mmio(lbz(5, 2, 3), uart0 + reg::IIR as u64, 0),
            None,
            None,
            &m.buses,
            &mut log,
        );
        let Outcome::Reply(r) = out else {
            panic!("{out:?}")
        };
        assert_eq!(r.set_gpr.map(|(_, v)| v as u8 & iir::ID), Some(iir::THRI));
        assert!(!m.uic.borrow().irq_output());
        // UART1 answers, its output goes nowhere; a word access to a UART does not.
        let uart1 = 0xEF60_0400u64;
        assert!(matches!(
            handle(
                &mmio(stb(4, 0, 3), uart1, 0x41),
                None,
                None,
                &m.buses,
                &mut log
            ),
            Outcome::Reply(_)
        ));
        let mut seen = 0;
        let out = handle(
            &mmio(lwz(5, 0, 3), uart0, 0),
            None,
            None,
            &m.buses,
            &mut |_| seen += 1,
        );
        assert!(matches!(out, Outcome::Reply(r) if r.inject.is_some()) && seen == 1);
    }

    #[test]
    fn bamboo_is_consistent() {
        assert_eq!(BAMBOO.check(), Ok(()));
        assert_eq!(BAMBOO.of_model(Model::Uart16550).count(), 2);
        assert_eq!(BAMBOO.of_model(Model::Uic).count(), 1);
        // Both UARTs share one page: one declaration.
        assert_eq!(BAMBOO.mmio_declarations(), [(0xEF60_0000, PAGE)]);
        assert!(BAMBOO.in_device_space(0xEF60_0300) && !BAMBOO.in_device_space(0xF000_0000));
        // An instruction fetch from that page names both UARTs (none is at 0x14 itself).
        let names: Vec<_> = BAMBOO
            .devices_on_page(0xEF60_0014)
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["uart0", "uart1"]);
        assert_eq!(BAMBOO.devices_on_page(0xEF60_1000).count(), 0);
        assert_eq!(BAMBOO.devices_on_page(0xEF5F_FFFF).count(), 0);
    }

    /// A register file of 32-bit words, for attaching something to every BG/P window.
    struct Words(Vec<u32>);
    impl MmioDevice for Words {
        fn mmio_read(
            &mut self,
            offset: u64,
            data: &mut [u8],
        ) -> Result<(), kestrel_devices::bus::Unanswered> {
            let w = self.0.get(offset as usize / 4).copied().unwrap_or(0);
            data.copy_from_slice(&w.to_be_bytes()[..data.len()]);
            Ok(())
        }
        fn mmio_write(
            &mut self,
            offset: u64,
            data: &[u8],
        ) -> Result<(), kestrel_devices::bus::Unanswered> {
            if let (Some(w), Ok(b)) = (self.0.get_mut(offset as usize / 4), data.try_into()) {
                *w = u32::from_be_bytes(b);
            }
            Ok(())
        }
    }
    impl DcrDevice for Words {
        fn dcr_read(&mut self, offset: u32) -> u32 {
            self.0.get(offset as usize).copied().unwrap_or(0)
        }
        fn dcr_write(&mut self, offset: u32, value: u32) {
            if let Some(w) = self.0.get_mut(offset as usize) {
                *w = value;
            }
        }
    }

    #[test]
    fn bgp_vm_is_consistent_and_attaches_one_model_per_kind() {
        assert_eq!(BGP_VM.check(), Ok(()));
        // The virtio NIC's page is declared; the BG/P windows are above 4 GiB.
        assert_eq!(
            BGP_VM.mmio_declarations(),
            [(VIRTIO_NET_GPA, PAGE), (0xEF60_0000, PAGE)]
        );
        assert!(BGP_VM.in_device_space(VIRTIO_NET_GPA));
        assert_eq!(
            TORUS_DMA.window,
            Window::Mmio {
                base: 0x6_0000_3000,
                size: 0x1000
            }
        );
        // Without models for the BG/P devices the board does not attach.
        assert_eq!(
            BGP_VM.attach(Vec::<u8>::new()).err(),
            Some(AttachError::Device("bic"))
        );
        // One model per kind, on all of its windows.
        let mut models: Vec<(Model, Rc<RefCell<Words>>)> = Vec::new();
        let mut inputs = Vec::new();
        let m = BGP_VM
            .attach_with(Vec::<u8>::new(), &mut |d, _uic| {
                inputs.push((d.name, d.irq));
                let w = match models.iter().find(|(m, _)| *m == d.model) {
                    Some((_, w)) => w.clone(),
                    None => {
                        let w = Rc::new(RefCell::new(Words(vec![0; 0x400])));
                        models.push((d.model, w.clone()));
                        w
                    }
                };
                Some(match d.window {
                    Window::Mmio { .. } => Attachment::Mmio(w),
                    Window::Dcr { .. } => Attachment::Dcr(w),
                })
            })
            .unwrap();
        assert_eq!(models.len(), 4);
        assert_eq!(inputs[0], ("bic", Some(30)));
        assert_eq!(inputs.last(), Some(&("virtio-net", Some(31))));
        // The collective's VC1 window and its DCRs reach the same model; DCRs above 1023.
        m.buses
            .mmio
            .write(coll::VC1_BASE + 4, &[0, 0, 0, 9])
            .unwrap();
        m.buses.dcr.write(coll::DCR_BASE + 2, 7).unwrap();
        let c = &models
            .iter()
            .find(|(m, _)| *m == Model::Collective)
            .unwrap()
            .1;
        assert_eq!(c.borrow().0[1..3], [9, 7]);
        assert_eq!(m.buses.dcr.read(dma::DCR_BASE + 0xFF), Ok(0));
        assert!(m.buses.dcr.read(dma::DCR_BASE + 0x100).is_err());
        // A model of the wrong kind for its window is refused.
        let e = BGP_VM.attach_with(Vec::<u8>::new(), &mut |_, _| {
            Some(Attachment::Dcr(Rc::new(RefCell::new(Words(vec![])))))
        });
        assert_eq!(e.err(), Some(AttachError::Device("bic")));
    }

    #[test]
    fn declarations_are_whole_pages_merged_and_below_4g() {
        const D: &[Device] = &[
            Device {
                name: "a",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x1ff8,
                    size: 0x10,
                },
                irq: None,
            },
            Device {
                name: "b",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x3000,
                    size: 0x10,
                },
                irq: None,
            },
            Device {
                name: "c",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x8000,
                    size: 1,
                },
                irq: None,
            },
            Device {
                name: "bgp",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x6_0000_0000,
                    size: 0x1000,
                },
                irq: None,
            },
        ];
        let b = Board {
            devices: D,
            device_space: (0, 0),
        };
        assert_eq!(b.mmio_declarations(), [(0x1000, 0x3000), (0x8000, PAGE)]);
        assert_eq!(b.check(), Ok(()));
    }

    #[test]
    fn overlapping_windows_are_refused() {
        const D: &[Device] = &[
            Device {
                name: "a",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x1000,
                    size: 0x10,
                },
                irq: None,
            },
            Device {
                name: "b",
                model: Model::Uart16550,
                window: Window::Mmio {
                    base: 0x100f,
                    size: 0x10,
                },
                irq: None,
            },
            // A DCR window does not collide with an MMIO one at the same number.
            Device {
                name: "u",
                model: Model::Uic,
                window: Window::Dcr {
                    base: 0x1000,
                    count: 9,
                },
                irq: None,
            },
        ];
        let b = Board {
            devices: D,
            device_space: (0, 0),
        };
        assert_eq!(
            b.check(),
            Err(BusError::Overlap {
                base: 0x100f,
                size: 0x10,
                with: "a"
            })
        );
    }
}
