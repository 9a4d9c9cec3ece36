//! Writes the VMM's bamboo device tree to a file, to boot Linux natively with it.
//!
//! ```text
//! cargo run -p kestrel-devtree --example write-dtb -- OUT.dtb [--mem MB] [--append ARGS]
//!     [--initrd FILE | --initrd-range START:END] [--initrd-at ADDR] [--no-uart1]
//! ```
//!
//! `--initrd FILE` puts the initrd where QEMU's bamboo loads it (0x1900000, or `--initrd-at`)
//! with FILE's size; `--initrd-range` takes the guest-physical range in hex. The defaults
//! (256 MB, `console=ttyS0 panic=1`, no initrd) match `guests/linux/run-native.sh`.
//!
//! QEMU's `-M bamboo` ignores `-dtb`: it always loads `bamboo.dtb` from its data directory.
//! Write the tree as `DIR/bamboo.dtb` and pass `-L DIR` (QEMU then searches DIR first). QEMU
//! still rewrites /memory, /chosen's bootargs and initrd, and the CPU clocks, so give the same
//! values here as on QEMU's command line to boot exactly this blob.
use kestrel_devtree::{bamboo_dtb, BambooVm};
use std::process::ExitCode;

const QEMU_INITRD_GPA: u32 = 0x190_0000;

fn parse_hex(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|e| format!("bad hex '{s}': {e}"))
}

fn run() -> Result<(), String> {
    let mut out = None;
    let mut mem_mb: u32 = 256;
    let mut append = String::from("console=ttyS0 panic=1");
    let mut initrd_file = None;
    let mut initrd_range = None;
    let mut initrd_at = QEMU_INITRD_GPA;
    let mut uart1 = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--mem" => mem_mb = value()?.parse().map_err(|e| format!("--mem: {e}"))?,
            "--append" => append = value()?,
            "--initrd" => initrd_file = Some(value()?),
            "--initrd-at" => initrd_at = parse_hex(&value()?)?,
            "--initrd-range" => {
                let v = value()?;
                let (s, e) = v.split_once(':').ok_or("--initrd-range wants START:END")?;
                initrd_range = Some((parse_hex(s)?, parse_hex(e)?));
            }
            "--no-uart1" => uart1 = false,
            "-h" | "--help" => {
                println!("usage: write-dtb OUT.dtb [--mem MB] [--append ARGS] [--initrd FILE | --initrd-range START:END] [--initrd-at ADDR] [--no-uart1]");
                return Ok(());
            }
            _ if out.is_none() && !a.starts_with('-') => out = Some(a),
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    let out = out.ok_or("no output file given")?;
    if let Some(f) = initrd_file {
        let len = std::fs::metadata(&f)
            .map_err(|e| format!("{f}: {e}"))?
            .len();
        let len = u32::try_from(len).map_err(|_| format!("{f} is over 4 GiB"))?;
        let end = initrd_at.checked_add(len).ok_or("initrd end overflows")?;
        initrd_range = Some((initrd_at, end));
    }
    let ram_bytes = mem_mb.checked_mul(1 << 20).ok_or("--mem too large")?;
    let vm = BambooVm {
        initrd: initrd_range,
        uart1,
        ..BambooVm::new(ram_bytes, &append)
    };
    let dtb = bamboo_dtb(&vm).map_err(|e| e.to_string())?;
    std::fs::write(&out, &dtb).map_err(|e| format!("{out}: {e}"))?;
    eprintln!("write-dtb: {} bytes to {out}", dtb.len());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("write-dtb: {e}");
            ExitCode::FAILURE
        }
    }
}
