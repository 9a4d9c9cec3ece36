//! `kestrel-fabric-ranks`: MPI-style ranks on the fabric service (the native-only half of
//! `scripts/fabric-echo-test.py`). Start it under two (or more) module names; each copy
//! attaches one endpoint (its rank) and
//!
//! 1. waits in a barrier until `ranks.n=N` ranks (default 2) have attached and arrived;
//! 2. sends rank `(r + 1) % N` a message of `ranks.bytes=B` bytes (default 3000) filled
//!    from a xorshift32 stream seeded with `r + 1`, receives the one from rank
//!    `(r + N - 1) % N`, and checks every byte;
//! 3. allreduces `[r + 1, (r + 1)^2, crc]` with Sum over the collective ALU (crc = CRC-32 of
//!    the message received) and checks the first two sums;
//! 4. prints one result line, a final barrier, and detaches.
//!
//! Every line is checkable: `ranks r/N: received B bytes from rank s, ok; allreduce sum
//! [a, b, c]` (c = the sum of every rank's CRC).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use kestrel_abi::Timeout;
use kestrel_fabric_client::mpi::{Comm, Op, MAX_DATA};
use kestrel_fabric_client::service::{Native, Service};
use kestrel_user::{println, root, sys};

const WINDOW: u32 = 0x2000_0000;
const WINDOW_LEN: u32 = kestrel_fabric_client::spi::layout::MIN_WINDOW;
const SHARED: u32 = 0x2010_0000;
const TAG: u32 = 0x4b45;

static mut COMM: Comm = Comm::new();
static mut BUF: [u8; MAX_DATA] = [0; MAX_DATA];

fn fill(seed: u32, out: &mut [u8]) {
    let mut x = seed;
    for b in out.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
        }
    }
    !c
}

fn wait(p: &mut Native) {
    p.wait(Timeout::from_us(100_000));
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("ranks");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let mut size = 2u32;
    let mut bytes = 3000usize;
    for a in args.split_ascii_whitespace() {
        if let Some(v) = a.strip_prefix("ranks.n=").and_then(|v| v.parse().ok()) {
            size = v;
        }
        if let Some(v) = a.strip_prefix("ranks.bytes=").and_then(|v| v.parse().ok()) {
            bytes = v;
        }
    }
    let bytes = bytes.min(MAX_DATA);
    if let Err(e) = root::ram(WINDOW, WINDOW_LEN, 16).and_then(|_| root::ram(SHARED, 4096, 12)) {
        println!("no memory for the window: {e}");
        return;
    }
    let mut port = match Service::connect() {
        Ok(s) => Native::new(s),
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    let a = match port.attach(WINDOW, WINDOW_LEN, SHARED, sys::my_id()) {
        Ok(a) => a,
        Err(e) => {
            println!("cannot attach to the fabric: {e}");
            return;
        }
    };
    // SAFETY: the program's only thread; the only references to these buffers.
    let (comm, buf) = unsafe { (&mut *core::ptr::addr_of_mut!(COMM), &mut *core::ptr::addr_of_mut!(BUF)) };
    if let Err(e) = comm.open(&mut port, a.ep, a.bus_base) {
        println!("cannot open the communicator: {e}");
        return;
    }
    let r = u32::from(comm.rank);
    if r >= size {
        println!("rank {r} is not below ranks.n={size}: endpoints 0.. must be the ranks");
        let _ = port.service.detach(a.ep);
        return;
    }
    // Everyone attached (a reduction waits for every endpoint sourcing the class).
    let mut run = || -> Result<(), kestrel_fabric_client::service::Error> {
        comm.barrier(&mut port, wait)?;
        let to = ((r + 1) % size) as u8;
        let from = ((r + size - 1) % size) as u8;
        fill(r + 1, &mut buf[..bytes]);
        comm.send(&mut port, to, TAG, &buf[..bytes])?;
        let mut got = [0u8; MAX_DATA];
        let (src, n) = comm.recv(&mut port, Some(from), TAG, &mut got, wait)?;
        fill(u32::from(src) + 1, &mut buf[..n]);
        let ok = src == from && n == bytes && got[..n] == buf[..n];
        let mut v = [u64::from(r + 1), u64::from((r + 1) * (r + 1)), u64::from(crc32(&got[..n]))];
        comm.allreduce(&mut port, Op::Sum, &mut v, wait)?;
        let k = u64::from(size);
        let sums_ok = v[0] == k * (k + 1) / 2 && v[1] == k * (k + 1) * (2 * k + 1) / 6;
        println!(
            "ranks {r}/{size}: received {n} bytes from rank {src}, {}; allreduce sum [{}, {}, {:#x}], {}",
            if ok { "ok" } else { "WRONG" },
            v[0],
            v[1],
            v[2],
            if sums_ok { "ok" } else { "WRONG" }
        );
        comm.barrier(&mut port, wait)?;
        Ok(())
    };
    if let Err(e) = run() {
        println!("rank {r}: {e}");
    }
    let _ = port.service.detach(a.ep);
}
