//! The FPU for native threads: every native thread may use it, the kernel switches it
//! lazily, and one thread's registers never show in another's (docs/adr/0034).
//!
//! ktest itself is soft-float, so the registers are moved by hand-encoded `lfd`/`stfd`
//! (`kestrel_ppc440::encode`); nothing compiled in between touches the FPU.

use crate::common::{lbl, report, report_from, TestResult, WAIT};
use crate::threads::{Thread, CHILD_PRIORITY};
use core::arch::asm;
use kestrel_abi::ThreadId;
use kestrel_ppc440::encode;
use kestrel_user::ipc::{self, Msg};

/// f0..f31 and the FPSCR (low word of the 33rd double).
type Fp = [u64; 33];

/// Loads the FPSCR and f0..f31 from `r`.
fn fp_load(r: &Fp) {
    // SAFETY: r3 points at 33 readable doubles; only FP registers (and the FPSCR) change,
    // which no compiled code of this soft-float program uses.
    unsafe {
        asm!(
            ".long {0}",
            ".long {1}",
            ".long {2}",
            ".long {3}",
            ".long {4}",
            ".long {5}",
            ".long {6}",
            ".long {7}",
            ".long {8}",
            ".long {9}",
            ".long {10}",
            ".long {11}",
            ".long {12}",
            ".long {13}",
            ".long {14}",
            ".long {15}",
            ".long {16}",
            ".long {17}",
            ".long {18}",
            ".long {19}",
            ".long {20}",
            ".long {21}",
            ".long {22}",
            ".long {23}",
            ".long {24}",
            ".long {25}",
            ".long {26}",
            ".long {27}",
            ".long {28}",
            ".long {29}",
            ".long {30}",
            ".long {31}",
            ".long {32}",
            ".long {33}",
            const encode::lfd(0, 256, 3),
            const encode::mtfsf(0xff, 0),
            const encode::lfd(0, 0, 3),
            const encode::lfd(1, 8, 3),
            const encode::lfd(2, 16, 3),
            const encode::lfd(3, 24, 3),
            const encode::lfd(4, 32, 3),
            const encode::lfd(5, 40, 3),
            const encode::lfd(6, 48, 3),
            const encode::lfd(7, 56, 3),
            const encode::lfd(8, 64, 3),
            const encode::lfd(9, 72, 3),
            const encode::lfd(10, 80, 3),
            const encode::lfd(11, 88, 3),
            const encode::lfd(12, 96, 3),
            const encode::lfd(13, 104, 3),
            const encode::lfd(14, 112, 3),
            const encode::lfd(15, 120, 3),
            const encode::lfd(16, 128, 3),
            const encode::lfd(17, 136, 3),
            const encode::lfd(18, 144, 3),
            const encode::lfd(19, 152, 3),
            const encode::lfd(20, 160, 3),
            const encode::lfd(21, 168, 3),
            const encode::lfd(22, 176, 3),
            const encode::lfd(23, 184, 3),
            const encode::lfd(24, 192, 3),
            const encode::lfd(25, 200, 3),
            const encode::lfd(26, 208, 3),
            const encode::lfd(27, 216, 3),
            const encode::lfd(28, 224, 3),
            const encode::lfd(29, 232, 3),
            const encode::lfd(30, 240, 3),
            const encode::lfd(31, 248, 3),
            in("r3") r.as_ptr(),
            options(nostack, readonly)
        );
    }
}

/// Stores f0..f31 and the FPSCR to `r` (f0 is reloaded after the FPSCR went through it).
fn fp_store(r: &mut Fp) {
    // SAFETY: r3 points at 33 writable doubles; as in `fp_load`.
    unsafe {
        asm!(
            ".long {0}",
            ".long {1}",
            ".long {2}",
            ".long {3}",
            ".long {4}",
            ".long {5}",
            ".long {6}",
            ".long {7}",
            ".long {8}",
            ".long {9}",
            ".long {10}",
            ".long {11}",
            ".long {12}",
            ".long {13}",
            ".long {14}",
            ".long {15}",
            ".long {16}",
            ".long {17}",
            ".long {18}",
            ".long {19}",
            ".long {20}",
            ".long {21}",
            ".long {22}",
            ".long {23}",
            ".long {24}",
            ".long {25}",
            ".long {26}",
            ".long {27}",
            ".long {28}",
            ".long {29}",
            ".long {30}",
            ".long {31}",
            ".long {32}",
            ".long {33}",
            ".long {34}",
            const encode::stfd(0, 0, 3),
            const encode::stfd(1, 8, 3),
            const encode::stfd(2, 16, 3),
            const encode::stfd(3, 24, 3),
            const encode::stfd(4, 32, 3),
            const encode::stfd(5, 40, 3),
            const encode::stfd(6, 48, 3),
            const encode::stfd(7, 56, 3),
            const encode::stfd(8, 64, 3),
            const encode::stfd(9, 72, 3),
            const encode::stfd(10, 80, 3),
            const encode::stfd(11, 88, 3),
            const encode::stfd(12, 96, 3),
            const encode::stfd(13, 104, 3),
            const encode::stfd(14, 112, 3),
            const encode::stfd(15, 120, 3),
            const encode::stfd(16, 128, 3),
            const encode::stfd(17, 136, 3),
            const encode::stfd(18, 144, 3),
            const encode::stfd(19, 152, 3),
            const encode::stfd(20, 160, 3),
            const encode::stfd(21, 168, 3),
            const encode::stfd(22, 176, 3),
            const encode::stfd(23, 184, 3),
            const encode::stfd(24, 192, 3),
            const encode::stfd(25, 200, 3),
            const encode::stfd(26, 208, 3),
            const encode::stfd(27, 216, 3),
            const encode::stfd(28, 224, 3),
            const encode::stfd(29, 232, 3),
            const encode::stfd(30, 240, 3),
            const encode::stfd(31, 248, 3),
            const encode::mffs(0),
            const encode::stfd(0, 256, 3),
            const encode::lfd(0, 0, 3),
            in("r3") r.as_mut_ptr(),
            options(nostack)
        );
    }
}

/// A distinct register file per `seed`; the FPSCR gets rounding mode `seed & 3`.
fn pattern(seed: u64) -> Fp {
    let mut r = [0u64; 33];
    for (i, w) in r.iter_mut().enumerate().take(32) {
        *w = 0x4000_0000_0000_0000 | seed << 40 | ((i as u64) * 0x0101_0101);
    }
    r[32] = seed & 3;
    r
}

/// The FPSCR as stored by `mffs`/`stfd` (its low word; the high word is undefined).
fn same(a: &Fp, b: &Fp) -> bool {
    a[..32] == b[..32] && a[32] as u32 == b[32] as u32
}

/// Helper: waits for GO, checks it starts with a clean FPU, loads pattern 2, reports;
/// waits for GO again and reports whether pattern 2 survived the root's FP use.
extern "C" fn fp_child(_: u32) {
    let go = || ipc::receive(ThreadId::ROOT, WAIT).is_ok();
    if !go() {
        return;
    }
    let mut seen = [0u64; 33];
    fp_store(&mut seen);
    let clean = same(&seen, &[0; 33]) as u32;
    let mine = pattern(2);
    fp_load(&mine);
    report(&[clean]);
    if !go() {
        return;
    }
    fp_store(&mut seen);
    report(&[same(&seen, &mine) as u32]);
}

/// Two native threads use the FPU in turn: each keeps its registers, and the second
/// starts with zeroes rather than the first one's values.
pub fn native_threads_switch_fpu() -> TestResult {
    let mine = pattern(1);
    fp_load(&mine);
    let t = Thread::local(fp_child, 0, CHILD_PRIORITY)?;
    let go = || {
        ipc::send(t.id(), &Msg::with_words(lbl::GO, &[]), WAIT)
            .map_err(|e| crate::common::ipc_failed("send GO", e))
    };
    go()?;
    let m = report_from(t.id())?;
    ensure!(
        m.mr(1) == 1,
        "a new thread saw another thread's FP registers",
        "clean {}",
        m.mr(1)
    );
    let mut back = [0u64; 33];
    fp_store(&mut back);
    ensure!(
        same(&back, &mine),
        "the root's FP registers changed while the helper used the FPU",
        "f1 {:#x} (wanted {:#x})",
        back[1],
        mine[1]
    );
    go()?;
    let m = report_from(t.id())?;
    ensure!(
        m.mr(1) == 1,
        "the helper's FP registers changed while the root used the FPU",
        "same {}",
        m.mr(1)
    );
    Ok(())
}
