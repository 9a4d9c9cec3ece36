//! The flattened device tree Kestrel's VMM hands a Linux guest on its virtual bamboo board.
//!
//! [`bamboo_dtb`] writes, with the `vm-fdt` crate, a tree that describes only what the VMM
//! models: one PowerPC 440 CPU, RAM from guest-physical 0, the UIC0 interrupt controller on
//! DCRs 0xC0..0xC8, the 16550 UARTs at 0xEF600300 (UIC input 0) and, optionally, 0xEF600400
//! (UIC input 1), and `/chosen` (command line, initrd, console). The root is compatible with
//! `amcc,bamboo`, so Linux 6.1 takes its `ppc44x_simple` platform (`uic_init_tree` for
//! interrupts, `of_platform_bus_probe` over the `ibm,plb4`/`ibm,opb` buses for the UARTs).
//! PCI, EMAC, MAL, I2C, GPIO, SDR/CPR and the second UIC of QEMU's own bamboo tree are left
//! out: a guest must not probe hardware the VMM does not emulate.
//!
//! Node names, paths and phandles follow QEMU's `bamboo.dtb` (which comes from Linux's
//! `arch/powerpc/boot/dts/bamboo.dts`), so the tree also boots natively in place of QEMU's:
//! QEMU's bamboo board rewrites `/memory` `reg`, `/chosen` (`bootargs`, `linux,initrd-start`,
//! `linux,initrd-end`) and `/cpus/cpu@0` (`clock-frequency`, `timebase-frequency`) in the tree
//! it loads, and exits when one of those nodes is missing.
//!
//! The devices come from the VMM's board description (`kestrel_vmm_core::board`, by default
//! [`board::BAMBOO`]): its UIC and UARTs, the same list the VMM's buses are built from.
//! With [`board::BGP_VM`] the tree also has, under `/plb` (two address cells, one size
//! cell, `ranges` empty: PLB addresses are guest-physical, 36 bits):
//!
//! - the BG/P interrupt controller `interrupt-controller@730000000` (`kestrel,bgp-bic`, one
//!   interrupt cell: the BIC line; cascaded into UIC0 input 30, `interrupts = <30 4>`);
//! - with [`BambooVm::fabric`] (the VM's place in the fabric): the collective
//!   `collective@610000000` (`kestrel,bgp-collective`, VC0 and VC1 windows, `dcr-reg`,
//!   BIC lines 0xB4..0xB7, `kestrel,node-address`), the torus `torus@600003000`
//!   (`kestrel,bgp-torus`, the VM's DMA group page, `dcr-reg` of the torus and DMA DCRs, the
//!   DMA's BIC lines [`TORUS_IRQS`], `kestrel,coordinates`, `kestrel,dma-group`) and the
//!   bgnet node `bgnet` (`kestrel,bgnet`, a torus-style MAC 06:00:00:X:Y:Z, phandles of the
//!   two networks, `tree-route`, `tree-channel`);
//! - the virtio-mmio network device `virtio@e0000000` (`virtio,mmio`, UIC0 input 31).
//!
//! Drivers find every address in `reg`/`dcr-reg` and every line in `interrupts`.
//!
//! The crate is pure (`no_std` + `alloc`, no `unsafe`): every input is checked and a bad one
//! comes back as an [`Error`], never a panic.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::fmt;
use kestrel_bgp::{coll, dma};
use kestrel_vmm_core::board::{self, Board, Device, Model, Window};
use vm_fdt::FdtWriter;

/// Facts of the board description ([`board::BAMBOO`]), for tests and tools.
const fn dcr_window(d: Device) -> (u32, u32) {
    match d.window {
        Window::Dcr { base, count } => (base, count),
        Window::Mmio { .. } => panic!("not a DCR device"),
    }
}
const fn mmio_window(d: Device) -> (u32, u32) {
    match d.window {
        Window::Mmio { base, size } => (base as u32, size as u32),
        Window::Dcr { .. } => panic!("not an MMIO device"),
    }
}
const fn irq_of(d: Device) -> u32 {
    match d.irq {
        Some(i) => i,
        None => panic!("no interrupt"),
    }
}
/// First DCR of UIC0 (`dcr-reg`).
pub const UIC0_DCR_BASE: u32 = dcr_window(board::UIC0).0;
/// DCRs UIC0 decodes (`dcr-reg` count): offsets 0 (SR) to 8 (VCR).
pub const UIC0_DCR_COUNT: u32 = dcr_window(board::UIC0).1;
/// Guest-physical address of UART0 (the console).
pub const UART0_GPA: u32 = mmio_window(board::UART0).0;
/// Guest-physical address of UART1.
pub const UART1_GPA: u32 = mmio_window(board::UART1).0;
/// Bytes of registers per UART (`reg` size): eight byte-wide registers.
pub const UART_REG_BYTES: u32 = mmio_window(board::UART0).1;
/// UIC0 input of UART0's interrupt.
pub const UART0_IRQ: u32 = irq_of(board::UART0);
/// UIC0 input of UART1's interrupt.
pub const UART1_IRQ: u32 = irq_of(board::UART1);
/// Path of UART0's node: `/chosen`'s `stdout-path` and alias `serial0`.
pub const UART0_PATH: &str = "/plb/opb/serial@ef600300";
/// Path of UART1's node: alias `serial1`.
pub const UART1_PATH: &str = "/plb/opb/serial@ef600400";
/// Phandle of the CPU node (the root's `dcr-parent`).
pub const CPU_PHANDLE: u32 = 1;
/// Phandle of UIC0 (the UARTs' `interrupt-parent`).
pub const UIC0_PHANDLE: u32 = 2;
/// Phandle of the BG/P interrupt controller (the collective's and torus's
/// `interrupt-parent`).
pub const BIC_PHANDLE: u32 = 3;
/// Phandle of the collective network (bgnet's `collective-device`).
pub const COLL_PHANDLE: u32 = 4;
/// Phandle of the torus (bgnet's `torus-device`).
pub const TORUS_PHANDLE: u32 = 5;
/// The collective's BIC lines in its `interrupts`: injection exception, reception
/// exception, reception on VC0, reception on VC1.
pub const COLL_IRQS: [u32; 4] = [
    coll::IRQ_INJ_EXC,
    coll::IRQ_RCV_EXC,
    coll::IRQ_RCV_VC0,
    coll::IRQ_RCV_VC1,
];
/// The torus DMA's BIC lines in its `interrupts`: fatal error, the injection FIFO
/// threshold of the VM's group, the reception FIFO thresholds of types 0-3, the injection
/// and reception counter hit-zero lines 0-3, and the write (range) error.
pub const TORUS_IRQS: [u32; 15] = [
    dma::IRQ_FATAL,
    dma::IRQ_INJ_FIFO_THRESHOLD + dma::VM_GROUP,
    dma::IRQ_RCV_FIFO_THRESHOLD,
    dma::IRQ_RCV_FIFO_THRESHOLD + 1,
    dma::IRQ_RCV_FIFO_THRESHOLD + 2,
    dma::IRQ_RCV_FIFO_THRESHOLD + 3,
    dma::IRQ_INJ_CTR_ZERO,
    dma::IRQ_INJ_CTR_ZERO + 1,
    dma::IRQ_INJ_CTR_ZERO + 2,
    dma::IRQ_INJ_CTR_ZERO + 3,
    dma::IRQ_RCV_CTR_ZERO,
    dma::IRQ_RCV_CTR_ZERO + 1,
    dma::IRQ_RCV_CTR_ZERO + 2,
    dma::IRQ_RCV_CTR_ZERO + 3,
    dma::IRQ_WRITE_ERROR,
];
/// PLB clock of QEMU's bamboo tree (133.33 MHz): the plb node's `clock-frequency`.
pub const PLB_HZ: u32 = 133_333_332;
/// OPB clock of QEMU's bamboo tree (66.67 MHz): the opb node's `clock-frequency`.
pub const OPB_HZ: u32 = 66_666_666;
/// RAM must end at or below this address: the OPB window (0x8000_0000 up, where the UARTs
/// are) starts there.
pub const RAM_LIMIT: u64 = 0x8000_0000;
/// Granule of the RAM size: the 4 KiB page.
pub const RAM_ALIGN: u32 = 0x1000;
/// Longest command line Linux keeps (powerpc's `COMMAND_LINE_SIZE` is 2048 with the NUL);
/// a longer one would be cut silently, so it is refused.
pub const BOOTARGS_MAX: usize = 2047;
/// The timebase and CPU clock of QEMU's bamboo (both 400 MHz).
pub const QEMU_TIMEBASE_HZ: u32 = 400_000_000;
/// The UART input clock of QEMU's bamboo tree (11.0592 MHz).
pub const QEMU_UART_CLOCK_HZ: u32 = 11_059_200;

/// What the guest's tree describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BambooVm<'a> {
    /// Bytes of guest RAM from guest-physical 0: non-zero, a multiple of [`RAM_ALIGN`], at
    /// most [`RAM_LIMIT`].
    pub ram_bytes: u32,
    /// The kernel command line (`/chosen/bootargs`): no NUL, at most [`BOOTARGS_MAX`] bytes.
    pub bootargs: &'a str,
    /// The initrd's guest-physical `[start, end)`, inside RAM, not empty; `None` leaves the
    /// `linux,initrd-*` properties out.
    pub initrd: Option<(u32, u32)>,
    /// Timebase frequency (`timebase-frequency`): Linux's clock source and tick.
    pub timebase_hz: u32,
    /// Core clock (`clock-frequency` of the CPU).
    pub cpu_hz: u32,
    /// Input clock of the UARTs (their `clock-frequency`): 8250 divisors are computed from it.
    pub uart_clock_hz: u32,
    /// Console speed in baud (UART0's `current-speed`), 0 to leave it out.
    pub console_baud: u32,
    /// Also describe the board's UARTs after the first (on bamboo: UART1, 0xEF600400, UIC
    /// input 1).
    pub uart1: bool,
    /// The devices: the UIC and UARTs of this board description get nodes, and its BG/P
    /// devices and virtio NIC if it has them.
    pub board: Board,
    /// The VM's place in the fabric (its collective node address and torus coordinates):
    /// needed for the collective, torus and bgnet nodes, which are left out without it.
    pub fabric: Option<FabricPlace>,
    /// Offer Linux's paravirtual interface (`kestrel_abi::pv`): a `/hypervisor` node,
    /// compatible `linux,kvm`, with the hypercall instructions and `has-idle`.
    pub paravirt: bool,
}

/// A VM's identity on the BG/P networks, as the fabric assigned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricPlace {
    /// Collective node address (`kestrel,node-address`, the NADDR DCR's value).
    pub node_address: u32,
    /// Torus coordinates (X, Y, Z).
    pub coords: [u8; 3],
}

impl FabricPlace {
    /// The torus-style MAC of bgnet: 06:00:00:X:Y:Z.
    pub const fn mac(&self) -> [u8; 6] {
        [6, 0, 0, self.coords[0], self.coords[1], self.coords[2]]
    }
}

impl<'a> BambooVm<'a> {
    /// A VM with QEMU bamboo's clocks (400 MHz timebase and core, 11.0592 MHz UART clock), a
    /// 115200-baud console, both UARTs and no initrd.
    pub const fn new(ram_bytes: u32, bootargs: &'a str) -> Self {
        BambooVm {
            ram_bytes,
            bootargs,
            initrd: None,
            timebase_hz: QEMU_TIMEBASE_HZ,
            cpu_hz: QEMU_TIMEBASE_HZ,
            uart_clock_hz: QEMU_UART_CLOCK_HZ,
            console_baud: 115_200,
            uart1: true,
            board: board::BAMBOO,
            fabric: None,
            paravirt: false,
        }
    }
}

/// Why no tree was written.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    /// `ram_bytes` is zero, not a multiple of [`RAM_ALIGN`], or above [`RAM_LIMIT`].
    RamSize(u32),
    /// The command line contains a NUL byte (at this offset).
    BootargsNul(usize),
    /// The command line is longer than [`BOOTARGS_MAX`] bytes (its length).
    BootargsTooLong(usize),
    /// The initrd range is empty or reversed (`start >= end`).
    InitrdEmpty { start: u32, end: u32 },
    /// The initrd range ends beyond RAM.
    InitrdOutsideRam {
        start: u32,
        end: u32,
        ram_bytes: u32,
    },
    /// The board description has no UIC or no UART, or a UART that is not a 32-bit
    /// MMIO device with an interrupt.
    Board(&'static str),
    /// A clock frequency is zero (the property's name).
    ZeroFrequency(&'static str),
    /// The FDT writer refused the tree (not expected once the inputs above are checked).
    Fdt(vm_fdt::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::RamSize(b) => write!(
                f,
                "RAM size {b:#x} is not a non-zero multiple of {RAM_ALIGN:#x} up to {RAM_LIMIT:#x}"
            ),
            Error::BootargsNul(at) => write!(f, "bootargs contain a NUL byte at offset {at}"),
            Error::BootargsTooLong(n) => {
                write!(
                    f,
                    "bootargs are {n} bytes, Linux keeps at most {BOOTARGS_MAX}"
                )
            }
            Error::InitrdEmpty { start, end } => {
                write!(f, "initrd range {start:#x}..{end:#x} is empty")
            }
            Error::InitrdOutsideRam {
                start,
                end,
                ram_bytes,
            } => write!(
                f,
                "initrd range {start:#x}..{end:#x} is not inside RAM (0..{ram_bytes:#x})"
            ),
            Error::ZeroFrequency(p) => write!(f, "{p} is zero"),
            Error::Board(why) => write!(f, "board description: {why}"),
            Error::Fdt(e) => write!(f, "FDT writer: {e}"),
        }
    }
}

impl From<vm_fdt::Error> for Error {
    fn from(e: vm_fdt::Error) -> Self {
        Error::Fdt(e)
    }
}

/// Checks `vm` and writes its device tree blob (FDT version 17, no memory reservations).
pub fn bamboo_dtb(vm: &BambooVm) -> Result<Vec<u8>, Error> {
    check(vm)?;
    let mut w = FdtWriter::new()?;

    let root = w.begin_node("")?;
    // Two address cells (the 440's 36-bit physical addresses) and one size cell, as on the
    // real board: QEMU's bamboo writes /memory's reg as three cells.
    w.property_u32("#address-cells", 2)?;
    w.property_u32("#size-cells", 1)?;
    w.property_string("model", "amcc,bamboo")?;
    w.property_string("compatible", "amcc,bamboo")?;
    w.property_u32("dcr-parent", CPU_PHANDLE)?;

    let aliases = w.begin_node("aliases")?;
    let uarts = uarts(vm)?;
    for (i, u) in uarts.iter().enumerate() {
        w.property_string(&format!("serial{i}"), &uart_path(u.gpa))?;
    }
    w.end_node(aliases)?;

    let cpus = w.begin_node("cpus")?;
    w.property_u32("#address-cells", 1)?;
    w.property_u32("#size-cells", 0)?;
    let cpu = w.begin_node("cpu@0")?;
    w.property_string("device_type", "cpu")?;
    w.property_string("model", "PowerPC,440EP")?;
    w.property_u32("reg", 0)?;
    w.property_u32("clock-frequency", vm.cpu_hz)?;
    w.property_u32("timebase-frequency", vm.timebase_hz)?;
    // The 440 core: 32 KiB instruction and data caches with 32-byte lines.
    w.property_u32("i-cache-line-size", 32)?;
    w.property_u32("d-cache-line-size", 32)?;
    w.property_u32("i-cache-size", 32 * 1024)?;
    w.property_u32("d-cache-size", 32 * 1024)?;
    // The CPU is the DCR bus master; mtdcr/mfdcr reach the UIC (the VMM emulates them).
    w.property_null("dcr-controller")?;
    w.property_string("dcr-access-method", "native")?;
    w.property_phandle(CPU_PHANDLE)?;
    w.end_node(cpu)?;
    w.end_node(cpus)?;

    let memory = w.begin_node("memory@0")?;
    w.property_string("device_type", "memory")?;
    w.property_array_u32("reg", &[0, 0, vm.ram_bytes])?;
    w.end_node(memory)?;

    // UIC0 is the only (hence top-level: no `interrupts`) UIC. Interrupt specifiers are
    // <input, sense>, sense 4 = level high.
    let uic = w.begin_node("interrupt-controller0")?;
    strings(&mut w, "compatible", &["ibm,uic-440ep", "ibm,uic"])?;
    w.property_null("interrupt-controller")?;
    w.property_u32("cell-index", 0)?;
    let (dcr_base, dcr_count) = match vm.board.of_model(Model::Uic).next().map(|d| d.window) {
        Some(Window::Dcr { base, count }) => (base, count),
        _ => return Err(Error::Board("no UIC on the DCR bus")),
    };
    w.property_array_u32("dcr-reg", &[dcr_base, dcr_count])?;
    w.property_u32("#address-cells", 0)?;
    w.property_u32("#size-cells", 0)?;
    w.property_u32("#interrupt-cells", 2)?;
    w.property_phandle(UIC0_PHANDLE)?;
    w.end_node(uic)?;

    let plb = w.begin_node("plb")?;
    strings(
        &mut w,
        "compatible",
        &["ibm,plb-440ep", "ibm,plb-440gp", "ibm,plb4"],
    )?;
    w.property_u32("#address-cells", 2)?;
    w.property_u32("#size-cells", 1)?;
    w.property_null("ranges")?;
    w.property_u32("clock-frequency", PLB_HZ)?;

    let opb = w.begin_node("opb")?;
    strings(
        &mut w,
        "compatible",
        &["ibm,opb-440ep", "ibm,opb-440gp", "ibm,opb"],
    )?;
    w.property_u32("#address-cells", 1)?;
    w.property_u32("#size-cells", 1)?;
    // OPB addresses 0x0000_0000 and 0x8000_0000 (2 GiB each) are PLB 0x0_0000_0000 and
    // 0x0_8000_0000: the UARTs sit at their guest-physical addresses.
    w.property_array_u32(
        "ranges",
        &[
            0,
            0,
            0,
            0x8000_0000,
            0x8000_0000,
            0,
            0x8000_0000,
            0x8000_0000,
        ],
    )?;
    w.property_u32("clock-frequency", OPB_HZ)?;
    for (i, u) in uarts.iter().enumerate() {
        uart(&mut w, vm, u, if i == 0 { vm.console_baud } else { 0 })?;
    }
    w.end_node(opb)?;
    bgp_nodes(&mut w, vm)?;
    w.end_node(plb)?;

    let chosen = w.begin_node("chosen")?;
    w.property_string("bootargs", vm.bootargs)?;
    if let Some((start, end)) = vm.initrd {
        w.property_u32("linux,initrd-start", start)?;
        w.property_u32("linux,initrd-end", end)?;
    }
    // Linux's powerpc legacy serial code reads `linux,stdout-path` first, generic code
    // `stdout-path`.
    let console = uart_path(uarts[0].gpa);
    w.property_string("linux,stdout-path", &console)?;
    w.property_string("stdout-path", &console)?;
    w.end_node(chosen)?;

    if vm.paravirt {
        // Linux: `check_kvm_guest` (firmware.c) wants /hypervisor compatible with
        // `linux,kvm`; `epapr_paravirt.c` copies `hcall-instructions` over its hypercall
        // stubs and idles through EV_IDLE with `has-idle` (ePAPR 1.1 §6.6).
        let hv = w.begin_node("hypervisor")?;
        w.property_string("compatible", kestrel_abi::pv::COMPATIBLE)?;
        w.property_array_u32("hcall-instructions", &kestrel_abi::pv::HCALL_INSNS)?;
        w.property_null("has-idle")?;
        w.end_node(hv)?;
    }

    w.end_node(root)?;
    Ok(w.finish()?)
}

fn check(vm: &BambooVm) -> Result<(), Error> {
    if vm.ram_bytes == 0
        || !vm.ram_bytes.is_multiple_of(RAM_ALIGN)
        || u64::from(vm.ram_bytes) > RAM_LIMIT
    {
        return Err(Error::RamSize(vm.ram_bytes));
    }
    if let Some(at) = vm.bootargs.bytes().position(|b| b == 0) {
        return Err(Error::BootargsNul(at));
    }
    if vm.bootargs.len() > BOOTARGS_MAX {
        return Err(Error::BootargsTooLong(vm.bootargs.len()));
    }
    if let Some((start, end)) = vm.initrd {
        if start >= end {
            return Err(Error::InitrdEmpty { start, end });
        }
        if end > vm.ram_bytes {
            return Err(Error::InitrdOutsideRam {
                start,
                end,
                ram_bytes: vm.ram_bytes,
            });
        }
    }
    for (hz, name) in [
        (vm.timebase_hz, "timebase-frequency"),
        (vm.cpu_hz, "cpu clock-frequency"),
        (vm.uart_clock_hz, "UART clock-frequency"),
    ] {
        if hz == 0 {
            return Err(Error::ZeroFrequency(name));
        }
    }
    Ok(())
}

/// A UART of the board as its node describes it.
struct UartNode {
    gpa: u32,
    size: u32,
    irq: u32,
}

/// The board's UARTs the tree describes (the first, the console; the others with
/// `vm.uart1`).
fn uarts(vm: &BambooVm) -> Result<Vec<UartNode>, Error> {
    let mut out = Vec::new();
    for d in vm.board.of_model(Model::Uart16550) {
        let (Window::Mmio { base, size }, Some(irq)) = (d.window, d.irq) else {
            return Err(Error::Board(
                "a UART is not an MMIO device with an interrupt",
            ));
        };
        if base + size > 1 << 32 {
            return Err(Error::Board(
                "a UART lies above 4 GiB, outside the OPB window",
            ));
        }
        out.push(UartNode {
            gpa: base as u32,
            size: size as u32,
            irq,
        });
        if !vm.uart1 {
            break;
        }
    }
    if out.is_empty() {
        return Err(Error::Board("no UART"));
    }
    Ok(out)
}

/// Path of the node of the UART at `gpa`.
pub fn uart_path(gpa: u32) -> alloc::string::String {
    format!("/plb/opb/serial@{gpa:x}")
}

/// One `ns16550` node on the OPB.
fn uart(w: &mut FdtWriter, vm: &BambooVm, u: &UartNode, baud: u32) -> Result<(), Error> {
    let (gpa, irq) = (u.gpa, u.irq);
    let node = w.begin_node(&format!("serial@{gpa:x}"))?;
    w.property_string("device_type", "serial")?;
    w.property_string("compatible", "ns16550")?;
    w.property_array_u32("reg", &[gpa, u.size])?;
    w.property_u32("clock-frequency", vm.uart_clock_hz)?;
    if baud != 0 {
        w.property_u32("current-speed", baud)?;
    }
    w.property_u32("interrupt-parent", UIC0_PHANDLE)?;
    w.property_array_u32("interrupts", &[irq, 4])?;
    w.end_node(node)?;
    Ok(())
}

/// The `reg` cells (two address cells, one size cell) of `d`'s MMIO window.
fn plb_reg(d: &Device) -> Result<[u32; 3], Error> {
    match d.window {
        Window::Mmio { base, size } if size <= u32::MAX as u64 => {
            Ok([(base >> 32) as u32, base as u32, size as u32])
        }
        _ => Err(Error::Board(
            "a BG/P or virtio device without a PLB MMIO window",
        )),
    }
}

/// `(base, count)` of `d`'s DCR window.
fn dcr_reg(d: &Device) -> Result<[u32; 2], Error> {
    match d.window {
        Window::Dcr { base, count } => Ok([base, count]),
        _ => Err(Error::Board("a BG/P device without its DCR window")),
    }
}

/// The board's devices of model `m` with an MMIO window, and with a DCR window.
fn windows(vm: &BambooVm, m: Model) -> (Vec<Device>, Vec<Device>) {
    vm.board
        .of_model(m)
        .partition(|d| matches!(d.window, Window::Mmio { .. }))
}

/// The PLB's BG/P and virtio nodes (see the crate documentation).
fn bgp_nodes(w: &mut FdtWriter, vm: &BambooVm) -> Result<(), Error> {
    let uic0 = |w: &mut FdtWriter, input: u32| -> Result<(), Error> {
        w.property_u32("interrupt-parent", UIC0_PHANDLE)?;
        // Level, active high (sense 4).
        w.property_array_u32("interrupts", &[input, 4])?;
        Ok(())
    };
    let bic = vm.board.of_model(Model::Bic).next();
    if let Some(d) = bic {
        let reg = plb_reg(d)?;
        let node = w.begin_node(&format!("interrupt-controller@{:x}", mmio_base(d)))?;
        w.property_string("compatible", "kestrel,bgp-bic")?;
        w.property_array_u32("reg", &reg)?;
        w.property_null("interrupt-controller")?;
        w.property_u32("#interrupt-cells", 1)?;
        w.property_u32("#address-cells", 0)?;
        uic0(w, d.irq.ok_or(Error::Board("the BIC has no UIC0 input"))?)?;
        w.property_phandle(BIC_PHANDLE)?;
        w.end_node(node)?;
    }
    let (coll_mmio, coll_dcr) = windows(vm, Model::Collective);
    let (torus_mmio, torus_dcr) = windows(vm, Model::TorusDma);
    if let (Some(place), Some(_)) = (vm.fabric, bic) {
        if !coll_mmio.is_empty() {
            let mut reg = Vec::new();
            for d in &coll_mmio {
                reg.extend_from_slice(&plb_reg(d)?);
            }
            let mut dcrs = Vec::new();
            for d in &coll_dcr {
                dcrs.extend_from_slice(&dcr_reg(d)?);
            }
            let node = w.begin_node(&format!("collective@{:x}", mmio_base(&coll_mmio[0])))?;
            w.property_string("compatible", "kestrel,bgp-collective")?;
            w.property_array_u32("reg", &reg)?;
            w.property_array_u32("dcr-reg", &dcrs)?;
            w.property_u32("interrupt-parent", BIC_PHANDLE)?;
            w.property_array_u32("interrupts", &COLL_IRQS)?;
            w.property_u32("kestrel,node-address", place.node_address)?;
            w.property_phandle(COLL_PHANDLE)?;
            w.end_node(node)?;
        }
        if let Some(page) = torus_mmio.first() {
            let mut dcrs = Vec::new();
            for d in &torus_dcr {
                dcrs.extend_from_slice(&dcr_reg(d)?);
            }
            let node = w.begin_node(&format!("torus@{:x}", mmio_base(page)))?;
            w.property_string("compatible", "kestrel,bgp-torus")?;
            w.property_array_u32("reg", &plb_reg(page)?)?;
            w.property_array_u32("dcr-reg", &dcrs)?;
            w.property_u32("interrupt-parent", BIC_PHANDLE)?;
            w.property_array_u32("interrupts", &TORUS_IRQS)?;
            let [x, y, z] = place.coords;
            w.property_array_u32("kestrel,coordinates", &[x.into(), y.into(), z.into()])?;
            w.property_u32("kestrel,dma-group", dma::VM_GROUP)?;
            w.property_phandle(TORUS_PHANDLE)?;
            w.end_node(node)?;
        }
        if !coll_mmio.is_empty() && !torus_mmio.is_empty() {
            let node = w.begin_node("bgnet")?;
            w.property_string("compatible", "kestrel,bgnet")?;
            w.property_string("device_type", "network")?;
            w.property("local-mac-address", &place.mac())?;
            w.property_u32("torus-device", TORUS_PHANDLE)?;
            w.property_u32("collective-device", COLL_PHANDLE)?;
            w.property_u32("tree-route", kestrel_bgp::coll::BGNET_CLASS)?;
            w.property_u32("tree-channel", 0)?;
            w.end_node(node)?;
        }
    }
    for d in vm.board.of_model(Model::VirtioNet) {
        let node = w.begin_node(&format!("virtio@{:x}", mmio_base(d)))?;
        w.property_string("compatible", "virtio,mmio")?;
        w.property_array_u32("reg", &plb_reg(d)?)?;
        uic0(
            w,
            d.irq
                .ok_or(Error::Board("the virtio NIC has no UIC0 input"))?,
        )?;
        w.end_node(node)?;
    }
    Ok(())
}

/// The base of `d`'s MMIO window (0 for a DCR device, which [`plb_reg`] refuses).
fn mmio_base(d: &Device) -> u64 {
    match d.window {
        Window::Mmio { base, .. } => base,
        Window::Dcr { .. } => 0,
    }
}

/// A string-list property (`"a\0b\0"`).
fn strings(w: &mut FdtWriter, name: &str, values: &[&str]) -> Result<(), Error> {
    let mut bytes = Vec::new();
    for v in values {
        bytes.extend_from_slice(v.as_bytes());
        bytes.push(0);
    }
    Ok(w.property(name, &bytes)?)
}
