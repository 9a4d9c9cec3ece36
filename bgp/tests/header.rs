//! The generated C header is checked in; this test fails when it is stale (regenerate with
//! `KESTREL_BLESS=1 cargo test -p kestrel-bgp`), and checks facts the sources fix.

use kestrel_bgp::{bic, coll, dma, write_c_header, TABLES};

fn c_header() -> String {
    let mut s = String::new();
    write_c_header(&mut s).unwrap();
    s
}
use std::path::PathBuf;

fn header_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guests/linux/modules/include/kestrel_bgp.h")
}

#[test]
fn c_header_is_current() {
    let want = c_header();
    let path = header_path();
    if std::env::var_os("KESTREL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run KESTREL_BLESS=1 cargo test -p kestrel-bgp",
        path.display()
    );
}

#[test]
fn names_are_unique_across_tables() {
    let mut seen = std::collections::HashSet::new();
    for (_, t) in TABLES {
        for d in *t {
            assert!(seen.insert(d.c_name), "{} defined twice", d.c_name);
        }
    }
    assert!(seen.len() > 150);
}

#[test]
fn facts_from_the_sources() {
    // BIC: line 0 of a group is the MSB; 8 lines per TARGET word.
    assert_eq!(bic::line_mask(32), 0x8000_0000);
    assert_eq!(bic::line_mask(63), 1);
    assert_eq!(bic::target_slot(0), (0, 28));
    assert_eq!(bic::target_slot(9), (1, 24));
    assert_eq!(bic::group_reg(5, bic::STATUS_CLR), 0x288);
    // Collective: the class route of class 3 is the odd half of RDR1.
    assert_eq!(coll::rdr_of_class(3), (0xC01, 16));
    assert_eq!(coll::hdr_class(0xF000_0000), 15);
    assert_eq!(kestrel_bgp::bn(31), coll::PRX_WM1);
    assert_eq!(kestrel_bgp::bn(15), coll::RDR_LO_TGTL);
    // DMA: counter 63's BASE, reception FIFO 7's HEAD.
    assert_eq!(dma::inj_ctr(63, dma::CTR_BASE), 0x7F8);
    assert_eq!(dma::rcv_fifo(7, dma::FIFO_HEAD), 0x878);
    assert_eq!(
        dma::PKT_MAX_PAYLOAD + dma::PKT_HDR_BYTES,
        8 * dma::CHUNK_BYTES
    );
}
