//! Target `fdt`: the kernel's board-info reader (`kestrel_kcore::bootinfo`), which parses
//! the flattened device tree the boot loader (QEMU, or a VMM for its guest) hands over.
//!
//! Input: the blob. Checked: never panics; an accepted tree says how long it is
//! (`fdt_total_size`, within the blob) and reads the same without the bytes after that
//! end; its facts are sane (initrd start below end, bootargs within their bound, the UIC
//! with its 32 lines); a rejected one has a message.

use kestrel_kcore::bootinfo::{fdt_total_size, BoardInfo, BOOTARGS_LEN, UIC_LINES};

pub fn run(data: &[u8]) {
    match BoardInfo::from_fdt(data) {
        Err(e) => assert!(!e.as_str().is_empty()),
        Ok(info) => {
            let n = fdt_total_size(data).expect("an accepted tree has a size");
            assert!(n <= data.len(), "total size {n} beyond the blob");
            assert_eq!(
                BoardInfo::from_fdt(&data[..n]),
                Ok(info.clone()),
                "trailing bytes matter"
            );
            if let Some((start, end)) = info.initrd {
                assert!(start < end, "initrd {start:#x}..{end:#x}");
            }
            assert!(info.bootargs.len() <= BOOTARGS_LEN);
            if let Some(uic) = info.uic {
                assert_eq!(uic.num_irqs, UIC_LINES);
            }
        }
    }
}
