//! The fault loop's decisions, without a kernel: decode the instruction a virtualization
//! fault reports, run it against the board's buses, and say how to answer.
//!
//! - `Mmio`: a load or store (byte, halfword or word; byte-reversed, sign-extending and
//!   update forms; FP single and double loads and stores) is dispatched to the [`MmioBus`]
//!   at the fault's 64-bit guest-physical address. A load result goes to its register, a
//!   store takes its data from the register the message carries (`rs_value`), so the
//!   common device exit needs no register file. FP accesses use the FP registers the
//!   kernel sends with them (`xfer::FPRS`); a load's result goes back with them. Anything the bus does not answer (no device there, a width or offset
//!   the device does not decode, a multiple, something that is not a load or store) gets
//!   a data storage exception.
//! - `Instruction`: `mfdcr`/`mtdcr` and the indexed `mfdcrx`/`mtdcrx` (DCR number (RA),
//!   which the kernel sends in the message's `gpa`: BG/P's DCRs from 0xC00 on are beyond
//!   `mfdcr`'s 10 bits) go to the [`DcrBus`]; an unmodelled DCR gets a machine check, any
//!   other instruction a program exception.
//! - `Idle` resumes at the reported pc (the instruction after the one that asked to wait)
//!   once the VMM lets the guest run again; `Halt`
//!   stops the VM.
//!
//! The caller adds the interrupt-line levels to the reply and sends it (the `kestrel-vmm`
//! task's `machine.rs`).

use crate::bus::{DcrBus, MmioBus};
use core::fmt;
use kestrel_abi::{FaultReply, Inject, VirtFault, VirtFaultMsg};
use kestrel_ppc440::decode::{decode, AccessKind, Insn, LoadStore};

/// The board's buses.
#[derive(Default)]
pub struct Buses {
    pub mmio: MmioBus,
    pub dcr: DcrBus,
}

/// How to answer a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send this reply (after adding the interrupt-line levels). With registers given to
    /// [`handle`], results are in them instead of in the reply.
    Reply(FaultReply),
    /// The instruction also writes its base register (an update form) and the message
    /// carried no register file: call [`handle`] again with the vCPU's registers.
    NeedRegisters,
    /// The guest waits for an interrupt: send this reply when it may continue.
    Idle(FaultReply),
    /// The guest asked for a reset or stopped: stop the VM.
    Halt,
}

/// A guest access nothing on the board answers, for the VMM's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmodelled {
    /// A load or store (`load`, `store`, or `access` for other instructions) at an
    /// unmodelled device address: the guest gets a data storage exception.
    Device {
        what: &'static str,
        gpa: u64,
        insn: u32,
        pc: u32,
    },
    /// `mfdcr`/`mtdcr` of an unmodelled DCR: machine check.
    Dcr { dcr: u32, insn: u32, pc: u32 },
    /// An instruction the VMM does not emulate: program exception.
    Instruction { word: u32, insn: Insn, pc: u32 },
}

impl Unmodelled {
    /// Its counter in the VMM's log limit (every kind is limited: a guest can repeat any
    /// of them in a loop).
    pub const fn kind(&self) -> crate::diag::Kind {
        match self {
            Unmodelled::Device { .. } => crate::diag::Kind::Device,
            Unmodelled::Dcr { .. } => crate::diag::Kind::Dcr,
            Unmodelled::Instruction { .. } => crate::diag::Kind::Instruction,
        }
    }
}

impl fmt::Display for Unmodelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Unmodelled::Device { what, gpa, insn, pc } => write!(
                f,
                "{what} at unmodelled device address {gpa:#010x} by instruction {insn:#010x} at pc {pc:#010x}: data storage exception"
            ),
            Unmodelled::Dcr { dcr, insn, pc } => {
                write!(f, "access to unmodelled DCR {dcr:#x} by instruction {insn:#010x} at pc {pc:#010x}: machine check")
            }
            Unmodelled::Instruction { word, insn, pc } => {
                write!(f, "unhandled instruction {word:#010x} ({insn:?}) at pc {pc:#010x}: program exception")
            }
        }
    }
}

/// Handles fault `f`. `gpr` is the vCPU's register file if the VMM has it (the message
/// carried it, or the VMM read the vCPU's state): then results and base-register updates
/// are written there and the reply only names the pc; without it, a result rides in the
/// reply (`set_gpr`). `log` hears of every access nothing on the board answers.
///
/// `fpr` is the vCPU's FP state (FPR0..31, FPSCR) if the message carried it: an FP load
/// or store needs it (without it, it gets a data storage exception), and an FP load's
/// result is written there (the reply says `with_fprs`).
pub fn handle(
    f: &VirtFaultMsg,
    mut gpr: Option<&mut [u32; 32]>,
    fpr: Option<&mut [u64; 33]>,
    buses: &Buses,
    log: &mut dyn FnMut(Unmodelled),
) -> Outcome {
    let next = f.pc.wrapping_add(4);
    match f.class {
        VirtFault::Mmio => {
            let insn = decode(f.insn);
            if let Insn::LoadStore(ls) = insn {
                // FP loads and stores need the FPRs (the kernel sends them along).
                if !ls.op().multiple() && (!ls.is_fp() || fpr.is_some()) {
                    if ls.update() && gpr.is_none() {
                        return Outcome::NeedRegisters;
                    }
                    let r = ls.rt_rs().index();
                    let data = match (ls.is_fp(), gpr.as_deref(), fpr.as_deref()) {
                        (true, _, Some(fp)) => ls.fp_store_data(fp[r]),
                        (_, Some(g), _) => ls.store_data(g[r]) as u64,
                        _ => ls.store_data(f.rs_value) as u64,
                    };
                    if let Some(raw) = access(&buses.mmio, &ls, f.gpa, data) {
                        let mut reply = FaultReply::resume(next);
                        let mut result = raw.map(|raw| ls.load_result(raw as u32));
                        if let (Some(raw), Some(fp)) = (raw.filter(|_| ls.is_fp()), fpr) {
                            fp[r] = ls.fp_load_result(raw);
                            reply = reply.with_fprs();
                            result = None;
                        }
                        if let Some(g) = gpr.as_deref_mut() {
                            // The base register gets the effective address before the
                            // result lands (RA = RT is an invalid form; the result wins).
                            if ls.update() {
                                g[ls.ra().index()] = ls.effective_address(g);
                            }
                            if let Some(v) = result {
                                g[ls.rt_rs().index()] = v;
                            }
                        } else if let Some(v) = result {
                            reply = reply.set_gpr(ls.rt_rs().number(), v);
                        }
                        return Outcome::Reply(reply);
                    }
                }
            }
            let what = match insn {
                Insn::LoadStore(ls) => match ls.kind() {
                    AccessKind::Load => "load",
                    AccessKind::Store => "store",
                },
                _ => "access",
            };
            log(Unmodelled::Device {
                what,
                gpa: f.gpa,
                insn: f.insn,
                pc: f.pc,
            });
            Outcome::Reply(FaultReply::resume(f.pc).inject(Inject::Dsi))
        }
        VirtFault::Instruction => match decode(f.insn) {
            Insn::Mfdcr { rt, dcr } => match buses.dcr.read(dcr.number() as u32) {
                Ok(v) => Outcome::Reply(match gpr {
                    Some(g) => {
                        g[rt.index()] = v;
                        FaultReply::resume(next)
                    }
                    None => FaultReply::resume(next).set_gpr(rt.number(), v),
                }),
                Err(_) => unmodelled_dcr(dcr.number() as u32, f, log),
            },
            Insn::Mtdcr { dcr, rs } => {
                let v = gpr.as_deref().map_or(f.rs_value, |g| g[rs.index()]);
                match buses.dcr.write(dcr.number() as u32, v) {
                    Ok(()) => Outcome::Reply(FaultReply::resume(next)),
                    Err(_) => unmodelled_dcr(dcr.number() as u32, f, log),
                }
            }
            // The indexed forms: the DCR number is (RA), which the kernel sends in `gpa`.
            Insn::Mfdcrx { rt, ra } => {
                let dcr = gpr.as_deref().map_or(f.gpa as u32, |g| g[ra.index()]);
                match buses.dcr.read(dcr) {
                    Ok(v) => Outcome::Reply(match gpr {
                        Some(g) => {
                            g[rt.index()] = v;
                            FaultReply::resume(next)
                        }
                        None => FaultReply::resume(next).set_gpr(rt.number(), v),
                    }),
                    Err(_) => unmodelled_dcr(dcr, f, log),
                }
            }
            Insn::Mtdcrx { ra, rs } => {
                let (dcr, v) = gpr.as_deref().map_or((f.gpa as u32, f.rs_value), |g| {
                    (g[ra.index()], g[rs.index()])
                });
                match buses.dcr.write(dcr, v) {
                    Ok(()) => Outcome::Reply(FaultReply::resume(next)),
                    Err(_) => unmodelled_dcr(dcr, f, log),
                }
            }
            insn => {
                log(Unmodelled::Instruction {
                    word: f.insn,
                    insn,
                    pc: f.pc,
                });
                Outcome::Reply(FaultReply::resume(f.pc).inject(Inject::Program))
            }
        },
        // The kernel reports the pc after the `mtmsr`/`wrtee` that asked to wait (or the
        // `rfi` target) and has cleared MSR[WE]: the guest resumes there, and an interrupt
        // pending by then is delivered with SRR0 = that pc, as after a wait state on the 440.
        VirtFault::Idle => Outcome::Idle(FaultReply::resume(f.pc)),
        VirtFault::Halt => Outcome::Halt,
    }
}

fn unmodelled_dcr(dcr: u32, f: &VirtFaultMsg, log: &mut dyn FnMut(Unmodelled)) -> Outcome {
    log(Unmodelled::Dcr {
        dcr,
        insn: f.insn,
        pc: f.pc,
    });
    Outcome::Reply(FaultReply::resume(f.pc).inject(Inject::MachineCheck))
}

/// Runs load/store `ls` at `gpa` on `bus`; `data` is what a store writes (its low
/// `width` bytes, big-endian). `None` if the bus did not answer; `Some(Some(raw))` the
/// bytes a load read (as a big-endian number), `Some(None)` a store done.
fn access(bus: &MmioBus, ls: &LoadStore, gpa: u64, data: u64) -> Option<Option<u64>> {
    let n = ls.width().bytes() as usize;
    let mut buf = [0u8; 8];
    match ls.kind() {
        AccessKind::Load => {
            bus.read(gpa, &mut buf[8 - n..]).ok()?;
            Some(Some(u64::from_be_bytes(buf)))
        }
        AccessKind::Store => {
            bus.write(gpa, &data.to_be_bytes()[8 - n..]).ok()?;
            Some(None)
        }
    }
}

/// Whether a `Halt` fault is the guest's reset request: its instruction is `mtspr DBCR0`
/// (DBCR0[RST] is the 440's one way to ask for a reset). Any other `Halt` is the kernel
/// stopping a vCPU it cannot continue, which it explains in a line of its own.
pub fn halt_is_reset_request(insn: u32) -> bool {
    matches!(decode(insn), Insn::Mtspr { spr, .. } if spr.number() as u32 == kestrel_ppc440::spr::DBCR0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::rc::Rc;
    use alloc::vec::Vec;
    use core::cell::RefCell;
    use kestrel_abi::xfer;
    use kestrel_devices::bus::{DcrDevice, MmioDevice, Unanswered};
    use kestrel_ppc440::decode::{encode, AddrMode, Dcr, Fpr, Gpr, LsOp};
    use std::vec;

    /// Big-endian registers: 16 bytes at offset 0.
    struct Regs {
        bytes: [u8; 16],
        writes: Vec<(u64, Vec<u8>)>,
    }

    impl MmioDevice for Regs {
        fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Unanswered> {
            let o = offset as usize;
            data.copy_from_slice(self.bytes.get(o..o + data.len()).ok_or(Unanswered)?);
            Ok(())
        }
        fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Unanswered> {
            self.writes.push((offset, data.to_vec()));
            Ok(())
        }
    }

    struct OneDcr(u32);
    impl DcrDevice for OneDcr {
        fn dcr_read(&mut self, _: u32) -> u32 {
            self.0
        }
        fn dcr_write(&mut self, _: u32, v: u32) {
            self.0 = v;
        }
    }

    const DEV: u64 = 0x6_0000_1000;

    fn buses() -> (Buses, Rc<RefCell<Regs>>) {
        let regs = Rc::new(RefCell::new(Regs {
            bytes: [0x81, 0x82, 0x83, 0x84, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0],
            writes: vec![],
        }));
        let mut b = Buses::default();
        b.mmio.insert(DEV, 16, "regs", regs.clone()).unwrap();
        b.dcr
            .insert(0x80, 1, "one", Rc::new(RefCell::new(OneDcr(0x1234))))
            .unwrap();
        (b, regs)
    }

    fn ls(op: LsOp, rt: u8, ra: u8, d: i16) -> u32 {
        let (ra, addr) = (Gpr::new(ra).unwrap(), AddrMode::D { d });
        let ls = if op.is_fp() {
            LoadStore::new_fp(op, Fpr::new(rt).unwrap(), ra, addr)
        } else {
            LoadStore::new(op, Gpr::new(rt).unwrap(), ra, addr)
        }
        .unwrap();
        encode(&Insn::LoadStore(ls))
    }

    fn fault(class: VirtFault, insn: u32, gpa: u64, rs_value: u32) -> VirtFaultMsg {
        VirtFaultMsg {
            class,
            pc: 0x1000,
            insn,
            gpa,
            msr: 0,
            mask: 0,
            rs_value,
        }
    }

    fn no_log(u: Unmodelled) {
        panic!("unexpected unmodelled access: {u}");
    }

    #[test]
    fn loads_of_every_width_come_back_in_the_reply() {
        let (b, _) = buses();
        for (op, want) in [
            (LsOp::Lbz, 0x81),
            (LsOp::Lhz, 0x8182),
            (LsOp::Lha, 0xffff_8182),
            (LsOp::Lwz, 0x8182_8384),
        ] {
            let out = handle(
                &fault(VirtFault::Mmio, ls(op, 5, 3, 0), DEV, 0),
                None,
                None,
                &b,
                &mut no_log,
            );
            assert_eq!(
                out,
                Outcome::Reply(FaultReply::resume(0x1004).set_gpr(5, want)),
                "{op:?}"
            );
        }
    }

    #[test]
    fn stores_take_the_register_from_the_message() {
        let (b, regs) = buses();
        let out = handle(
            &fault(
                VirtFault::Mmio,
                ls(LsOp::Sth, 4, 3, 0),
                DEV + 2,
                0xaabb_ccdd,
            ),
            None,
            None,
            &b,
            &mut no_log,
        );
        assert_eq!(out, Outcome::Reply(FaultReply::resume(0x1004)));
        assert_eq!(regs.borrow().writes, [(2, vec![0xcc, 0xdd])]);
    }

    #[test]
    fn update_forms_need_and_use_the_register_file() {
        let (b, regs) = buses();
        let f = fault(VirtFault::Mmio, ls(LsOp::Stbu, 4, 3, 4), DEV + 4, 0);
        assert_eq!(
            handle(&f, None, None, &b, &mut no_log),
            Outcome::NeedRegisters
        );
        let mut g = [0u32; 32];
        g[3] = 0x3000_0000;
        g[4] = 0x77;
        assert_eq!(
            handle(&f, Some(&mut g), None, &b, &mut no_log),
            Outcome::Reply(FaultReply::resume(0x1004))
        );
        assert_eq!(g[3], 0x3000_0004);
        assert_eq!(regs.borrow().writes, [(4, vec![0x77])]);
    }

    #[test]
    fn unmodelled_addresses_get_a_data_storage_exception() {
        let (b, _) = buses();
        let mut seen = Vec::new();
        let f = fault(VirtFault::Mmio, ls(LsOp::Lwz, 5, 3, 0), DEV + 16, 0);
        let out = handle(&f, None, None, &b, &mut |u| seen.push(u));
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x1000).inject(Inject::Dsi))
        );
        assert_eq!(
            seen,
            [Unmodelled::Device {
                what: "load",
                gpa: DEV + 16,
                insn: f.insn,
                pc: 0x1000
            }]
        );
        assert_eq!(seen[0].kind(), crate::diag::Kind::Device);
        assert!(std::format!("{}", seen[0])
            .starts_with("load at unmodelled device address 0x600001010"));
    }

    #[test]
    fn dcrs_go_to_the_dcr_bus() {
        let (b, _) = buses();
        let mf = encode(&Insn::Mfdcr {
            rt: Gpr::new(6).unwrap(),
            dcr: Dcr::new(0x80).unwrap(),
        });
        let mt = encode(&Insn::Mtdcr {
            dcr: Dcr::new(0x80).unwrap(),
            rs: Gpr::new(7).unwrap(),
        });
        let out = handle(
            &fault(VirtFault::Instruction, mf, 0, 0),
            None,
            None,
            &b,
            &mut no_log,
        );
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x1004).set_gpr(6, 0x1234))
        );
        handle(
            &fault(VirtFault::Instruction, mt, 0, 0x55),
            None,
            None,
            &b,
            &mut no_log,
        );
        let mut g = [0u32; 32];
        assert_eq!(
            handle(
                &fault(VirtFault::Instruction, mf, 0, 0),
                Some(&mut g),
                None,
                &b,
                &mut no_log
            ),
            Outcome::Reply(FaultReply::resume(0x1004))
        );
        assert_eq!(g[6], 0x55);
        let other = encode(&Insn::Mfdcr {
            rt: Gpr::new(6).unwrap(),
            dcr: Dcr::new(0x81).unwrap(),
        });
        let mut seen = Vec::new();
        let out = handle(
            &fault(VirtFault::Instruction, other, 0, 0),
            None,
            None,
            &b,
            &mut |u| seen.push(u),
        );
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x1000).inject(Inject::MachineCheck))
        );
        assert_eq!(
            seen,
            [Unmodelled::Dcr {
                dcr: 0x81,
                insn: other,
                pc: 0x1000
            }]
        );
    }

    /// `mfdcrx`/`mtdcrx` reach DCRs above 1023 (BG/P's) with the number from RA: in the
    /// message's `gpa` without a register file, from the register file with one.
    #[test]
    fn indexed_dcrs_go_to_the_dcr_bus() {
        use kestrel_ppc440::encode::{mfdcrx, mtdcrx};
        let (mut b, _) = buses();
        b.dcr
            .insert(0xD00, 1, "dma", Rc::new(RefCell::new(OneDcr(7))))
            .unwrap();
        let mf = fault(VirtFault::Instruction, mfdcrx(3, 4), 0xD00, 0);
        assert_eq!(
            handle(&mf, None, None, &b, &mut no_log),
            Outcome::Reply(FaultReply::resume(0x1004).set_gpr(3, 7))
        );
        // mtdcrx r4,r5: RS (r5) rides in rs_value.
        let mt = fault(VirtFault::Instruction, mtdcrx(4, 5), 0xD00, 0x99);
        assert_eq!(
            handle(&mt, None, None, &b, &mut no_log),
            Outcome::Reply(FaultReply::resume(0x1004))
        );
        let mut g = [0u32; 32];
        g[4] = 0xD00;
        assert_eq!(
            handle(&mf, Some(&mut g), None, &b, &mut no_log),
            Outcome::Reply(FaultReply::resume(0x1004))
        );
        assert_eq!(g[3], 0x99);
        // With a register file the numbers come from it: r4 = 0x80 (the other device).
        g[4] = 0x80;
        g[5] = 0x4242;
        handle(&mt, Some(&mut g), None, &b, &mut no_log);
        assert_eq!(b.dcr.read(0x80), Ok(0x4242));
        // An unmodelled DCR (any 32-bit number) is a machine check, logged with its number.
        let mut seen = Vec::new();
        let far = fault(VirtFault::Instruction, mfdcrx(3, 4), 0xFFFF_FFFF, 0);
        assert_eq!(
            handle(&far, None, None, &b, &mut |u| seen.push(u)),
            Outcome::Reply(FaultReply::resume(0x1000).inject(Inject::MachineCheck))
        );
        assert_eq!(
            seen,
            [Unmodelled::Dcr {
                dcr: 0xFFFF_FFFF,
                insn: far.insn,
                pc: 0x1000
            }]
        );
    }

    #[test]
    fn other_instructions_get_a_program_exception() {
        let (b, _) = buses();
        let mut seen = Vec::new();
        let out = handle(
            &fault(VirtFault::Instruction, 0, 0, 0),
            None,
            None,
            &b,
            &mut |u| seen.push(u),
        );
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x1000).inject(Inject::Program))
        );
        assert_eq!(seen[0].kind(), crate::diag::Kind::Instruction);
        assert_eq!(
            handle(
                &fault(VirtFault::Idle, 0, 0, 0),
                None,
                None,
                &b,
                &mut no_log
            ),
            Outcome::Idle(FaultReply::resume(0x1000))
        );
        assert_eq!(
            handle(
                &fault(VirtFault::Halt, 0, 0, 0),
                None,
                None,
                &b,
                &mut no_log
            ),
            Outcome::Halt
        );
        let _ = xfer::GPRS;
        // A Halt is a reset request only for mtspr DBCR0 (hostile guest finding H2: the
        // kernel's halt of a split-mode lwarx was reported as a reset request).
        use kestrel_ppc440::{encode, spr};
        assert!(halt_is_reset_request(encode::mtspr(spr::DBCR0, 3)));
        assert!(halt_is_reset_request(encode::mtspr(spr::DBCR0, 31)));
        assert!(!halt_is_reset_request(encode::mtspr(spr::DBCR1, 3)));
        assert!(!halt_is_reset_request(encode::lwarx(9, 8, 6)));
        assert!(!halt_is_reset_request(0));
    }

    /// FP loads and stores to a device (BG/P's collective network moves its payload
    /// through the FPU): they use the FP registers the fault carries.
    #[test]
    fn fp_loads_and_stores_use_the_fp_registers() {
        let (b, regs) = buses();
        let mut fp = [0u64; 33];
        let lfd = ls(LsOp::Lfd, 1, 3, 0);
        let out = handle(
            &fault(VirtFault::Mmio, lfd, DEV, 0),
            None,
            Some(&mut fp),
            &b,
            &mut no_log,
        );
        assert_eq!(out, Outcome::Reply(FaultReply::resume(0x1004).with_fprs()));
        assert_eq!(fp[1], 0x8182_8384_0506_0708);
        fp[2] = 1.5f64.to_bits();
        let stfs = ls(LsOp::Stfs, 2, 3, 8);
        let out = handle(
            &fault(VirtFault::Mmio, stfs, DEV + 8, 0),
            None,
            Some(&mut fp),
            &b,
            &mut no_log,
        );
        assert_eq!(out, Outcome::Reply(FaultReply::resume(0x1004)));
        assert_eq!(
            regs.borrow().writes,
            [(8, 1.5f32.to_bits().to_be_bytes().to_vec())]
        );
        let stfd = ls(LsOp::Stfd, 1, 3, 0);
        handle(
            &fault(VirtFault::Mmio, stfd, DEV, 0),
            None,
            Some(&mut fp),
            &b,
            &mut no_log,
        );
        assert_eq!(
            regs.borrow().writes[1],
            (0, 0x8182_8384_0506_0708u64.to_be_bytes().to_vec())
        );
        // Without the FP registers there is nothing to emulate with.
        let mut seen = Vec::new();
        let out = handle(
            &fault(VirtFault::Mmio, lfd, DEV, 0),
            None,
            None,
            &b,
            &mut |u| seen.push(u),
        );
        assert_eq!(
            out,
            Outcome::Reply(FaultReply::resume(0x1000).inject(Inject::Dsi))
        );
        assert_eq!(seen.len(), 1);
    }
}
