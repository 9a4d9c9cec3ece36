//! `kestrel-fabric-ranks`: MPI-style ranks on the fabric service (the native-only half of
//! `tests/functional/test_fabric_echo.py`). Start it under two (or more) module names ending
//! in the rank (`kestrel-rank0`, `kestrel-rank1`, ...); each copy attaches one endpoint
//! (wherever the fabric puts it: `Comm::start` maps ranks to endpoints) and
//!
//! 1. waits until `ranks.n=N` ranks (default 2) have attached and joined the MPI layer's
//!    class (`Comm::start`), then in a barrier;
//! 2. sends rank `(r + 1) % N` a message of `ranks.bytes=B` bytes (default 3000) filled
//!    from a xorshift32 stream seeded with `r + 1`, receives the one from rank
//!    `(r + N - 1) % N`, and checks every byte;
//! 3. allreduces `[r + 1, (r + 1)^2, crc]` with Sum over the collective ALU (crc = CRC-32 of
//!    the message received) and checks the first two sums;
//! 4. prints one result line; with `ranks.rounds=R` (default 1) steps 2-4 run R times,
//!    `ranks.pause_ms=P` apart (so that they overlap something else that runs meanwhile,
//!    like the device attacker of tests/security/test_device_attacker.py);
//! 5. with `ranks.echo=A.B.C.D`, rank 0 is a bgnet client of `kestrel-echo` at that address:
//!    an ARP request as a collective broadcast (class 0, VC 0, bgnet's collective framing),
//!    the reply (point to point over the collective), then a UDP datagram of `ranks.bytes` bytes (at most 1472)
//!    to port 7 over the torus, whose echo it checks byte for byte, then the datagram
//!    `KESTREL-ECHO-QUIT` that ends the echo;
//! 6. with `ranks.revoke=1`, rank 0 plays a client that takes its memory back: it attaches
//!    a second endpoint, sets up its DMA group, unmaps that endpoint's window from its own
//!    space (which revokes the service's mapping too), and sends it a message from its first
//!    endpoint. The service must survive the write into the vanished window, detach the
//!    second endpoint, and go on serving the first one;
//! 7. with `ranks.bench=N`, rank 0 times N calls to the service (a DMA register read: one
//!    IPC round trip and one engine call) and N 240-byte messages to itself (descriptor,
//!    counter and TAIL writes, then the receive: five calls and the copies) and prints the
//!    average cost of each in time-base ticks;
//! 8. a final barrier, and detaches.
//!
//! Every line is checkable: `ranks r/N: received B bytes from rank s, ok; allreduce sum
//! [a, b, c]` (c = the sum of every rank's CRC).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use kestrel_abi::Timeout;
use kestrel_bgp::torus::LINK_PROTO_NET;
use kestrel_fabric::proto::FabricErr;
use kestrel_fabric::FabricApi;
use kestrel_fabric_client::service::{Service, Window};
use kestrel_mpi::{Datatype, Env, Mpi, Op, WORLD};
use kestrel_net::{self as net, Me, ECHO_PORT, QUIT};
use kestrel_spi::{link_header, tree, Coords, DmaGroup, Reassembly, LINK_HDR};
use kestrel_user::{println, root, sys};

const WINDOW: u32 = 0x2000_0000;
const WINDOW_LEN: u32 = kestrel_spi::layout::MIN_WINDOW;
const SHARED: u32 = 0x2010_0000;
const TAG: u32 = 0x4b45;
/// The second endpoint's window and shared page (`ranks.revoke=1`).
const WINDOW2: u32 = 0x2020_0000;
const SHARED2: u32 = 0x2030_0000;

/// The longest message this program sends (eager or rendezvous alike).
const MAX_DATA: usize = 9000;
static mut BUF: [u8; MAX_DATA] = [0; MAX_DATA];
static mut TORUS: Reassembly<2> = Reassembly::new();
static mut COLL: net::CollReassembly<2> = net::CollReassembly::new();

fn parse_ip(s: &str) -> Option<[u8; 4]> {
    let mut ip = [0u8; 4];
    let mut it = s.split('.');
    for b in ip.iter_mut() {
        *b = it.next()?.parse().ok()?;
    }
    it.next().is_none().then_some(ip)
}

/// Waits (up to ~5 s) for a bgnet frame over the torus or the collective (class 0, VC 0)
/// that `want` accepts.
fn frame<T>(
    port: &mut Service,
    dma: &mut DmaGroup,
    reasm: &mut Reassembly<2>,
    node_address: u32,
    mut want: impl FnMut(&[u8]) -> Option<T>,
) -> Result<Option<T>, kestrel_fabric_client::service::Error> {
    // SAFETY: the program's only thread; the only reference to this buffer.
    let coll = unsafe { &mut *core::ptr::addr_of_mut!(COLL) };
    for _ in 0..50 {
        let mut hit = None;
        dma.receive(port, |pkt| {
            reasm.add(pkt, |m| {
                let b = m.bytes;
                if u32::from(u16::from_be_bytes([b[8], b[9]])) == LINK_PROTO_NET && hit.is_none() {
                    hit = want(&b[LINK_HDR..]);
                }
            })
        })?;
        let mut p = [0u8; 256];
        while hit.is_none() {
            match port.tree_receive(dma.ep, 0, &mut p)? {
                Some(_) => coll.add(0, node_address, &p, |_, f| hit = want(f)),
                None => break,
            }
        }
        if hit.is_some() {
            return Ok(hit);
        }
        wait(port);
    }
    Ok(None)
}

/// Rank 0 as a client that takes its memory back (`ranks.revoke=1`).
fn revoke(
    port: &mut Service,
    dma: &mut DmaGroup,
) -> Result<(), kestrel_fabric_client::service::Error> {
    use kestrel_abi::{unmapflags, Fpage, Rights};
    if let Err(e) = root::ram(WINDOW2, WINDOW_LEN, 16).and_then(|_| root::ram(SHARED2, 4096, 12)) {
        println!("revoke: no memory for a second window: {e}");
        return Ok(());
    }
    let (b, b_bus) = port.attach(Window::new(WINDOW2, WINDOW_LEN, SHARED2))?;
    // The second endpoint joins no collective class (none at attach): no reduction waits
    // for it.
    let me = Coords { x: b.0, y: 0, z: 0 };
    DmaGroup::setup(port, b, b_bus, me)?;
    let window = Fpage::new(WINDOW2, WINDOW_LEN.trailing_zeros(), Rights::RWX)
        .expect("the window is a naturally aligned power of two");
    if let Err(e) = sys::unmap(window, unmapflags::FLUSH_OWN) {
        println!("revoke: cannot unmap the window: {}", e.as_str());
        return Ok(());
    }
    let mut msg = [0u8; 600];
    link_header(&mut msg, 0, 600, 1);
    let sent = dma.send(port, me, &msg);
    let gone = matches!(
        port.info(b),
        Err(kestrel_fabric_client::service::Error::Refused(
            FabricErr::NotOwner
        ))
    );
    let still = port.info(dma.ep).is_ok();
    println!(
        "revoke: sent to the unmapped endpoint {} ({sent:?}); the service {} it; endpoint {} {}",
        b.0,
        if gone { "detached" } else { "did NOT detach" },
        dma.ep.0,
        if still {
            "still served, ok"
        } else {
            "NOT served, WRONG"
        }
    );
    Ok(())
}

/// Rank 0 as a bgnet client of kestrel-echo at `ip`.
fn echo_client(
    port: &mut Service,
    dma: &mut DmaGroup,
    node_address: u32,
    ip: [u8; 4],
    bytes: usize,
) -> Result<(), kestrel_fabric_client::service::Error> {
    // SAFETY: the program's only thread; the only reference to this buffer.
    let reasm = unsafe { &mut *core::ptr::addr_of_mut!(TORUS) };
    let ep = dma.ep;
    let me = Me {
        mac: [6, 0, 0, dma.me.x, dma.me.y, dma.me.z],
        ip: [10, 1, 0, 200 + dma.me.x],
    };
    let mut f = [0u8; LINK_HDR + net::MAX_FRAME];
    let n = net::arp_request(&me, ip, &mut f);
    let mut r = Ok(());
    net::coll_packets(&f[..n], 0, node_address, 1, |p| {
        if r.is_ok() {
            r = port.tree_inject(ep, 0, tree::bcast(0, 0), p);
        }
    });
    r?;
    let Some(mac) = frame(port, dma, reasm, node_address, |fr| {
        net::arp_reply_mac(&me, ip, fr)
    })?
    else {
        println!(
            "echo: no ARP reply for {}.{}.{}.{}",
            ip[0], ip[1], ip[2], ip[3]
        );
        return Ok(());
    };
    println!(
        "echo: {}.{}.{}.{} is at {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        ip[0], ip[1], ip[2], ip[3], mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
    );
    let bytes = bytes.min(1472);
    let mut payload = [0u8; 1472];
    fill(0xec40, &mut payload[..bytes]);
    for (i, data) in [&payload[..bytes], QUIT].into_iter().enumerate() {
        let n = net::udp_datagram(
            &me,
            (&mac, ip, ECHO_PORT),
            4000 + i as u16,
            data,
            &mut f[LINK_HDR..],
        );
        link_header(&mut f, 0, LINK_HDR + n, LINK_PROTO_NET as u16);
        dma.send(port, Coords::of_mac(&mac), &f[..LINK_HDR + n])?;
        let got = frame(port, dma, reasm, node_address, |fr| {
            net::udp_payload(&me, 4000 + i as u16, fr).map(|p| p == data)
        })?;
        let what = if i == 0 {
            "UDP datagram"
        } else {
            "quit datagram"
        };
        match got {
            Some(true) => println!("echo: {what} of {} bytes echoed, ok", data.len()),
            Some(false) => println!("echo: {what} of {} bytes echoed WRONG", data.len()),
            None => println!("echo: no echo of the {what}"),
        }
    }
    Ok(())
}

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
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// What a run step can fail with: an MPI call or a direct use of the service.
enum RunError {
    Mpi(kestrel_mpi::Error),
    Service(kestrel_fabric_client::service::Error),
}

impl From<kestrel_mpi::Error> for RunError {
    fn from(e: kestrel_mpi::Error) -> Self {
        RunError::Mpi(e)
    }
}

impl From<kestrel_fabric_client::service::Error> for RunError {
    fn from(e: kestrel_fabric_client::service::Error) -> Self {
        RunError::Service(e)
    }
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match self {
            RunError::Mpi(e) => write!(f, "{e}"),
            RunError::Service(e) => write!(f, "{e}"),
        }
    }
}

/// The time base in nanoseconds (MPI_Wtime, the deadlock timeout).
fn now_ns() -> u64 {
    sys::now_ns()
}

fn wait(p: &mut Service) {
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
    let mut echo = None;
    let mut revoke_test = false;
    let mut bench = 0u32;
    let mut rounds = 1u32;
    let mut pause_ms = 0u32;
    for a in args.split_ascii_whitespace() {
        if let Some(v) = a.strip_prefix("ranks.n=").and_then(|v| v.parse().ok()) {
            size = v;
        }
        if let Some(v) = a.strip_prefix("ranks.bytes=").and_then(|v| v.parse().ok()) {
            bytes = v;
        }
        if let Some(v) = a.strip_prefix("ranks.echo=").and_then(parse_ip) {
            echo = Some(v);
        }
        if a == "ranks.revoke=1" {
            revoke_test = true;
        }
        if let Some(v) = a.strip_prefix("ranks.bench=").and_then(|v| v.parse().ok()) {
            bench = v;
        }
        if let Some(v) = a.strip_prefix("ranks.rounds=").and_then(|v| v.parse().ok()) {
            rounds = v;
        }
        if let Some(v) = a
            .strip_prefix("ranks.pause_ms=")
            .and_then(|v| v.parse().ok())
        {
            pause_ms = v;
        }
    }
    let bytes = bytes.min(MAX_DATA);
    if let Err(e) = root::ram(WINDOW, WINDOW_LEN, 16).and_then(|_| root::ram(SHARED, 4096, 12)) {
        println!("no memory for the window: {e}");
        return;
    }
    let mut port = match Service::connect() {
        Ok(s) => s,
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    let (ep, bus_base) = match port.attach(Window::new(WINDOW, WINDOW_LEN, SHARED)) {
        Ok(a) => a,
        Err(e) => {
            println!("cannot attach to the fabric: {e}");
            return;
        }
    };
    // SAFETY: the program's only thread; the only reference to this buffer.
    let buf = unsafe { &mut *core::ptr::addr_of_mut!(BUF) };
    let node_address = port.node_address(ep);
    // The rank is the number the module name ends with (kestrel-rank1: rank 1), else the
    // endpoint's; MPI_Init maps ranks to endpoints.
    let (name, n) = kestrel_user::rt::program_name();
    let digits = name[..n]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let rank = core::str::from_utf8(&name[n - digits..n])
        .ok()
        .and_then(|d| d.parse::<u32>().ok())
        .unwrap_or(u32::from(ep.0));
    // The echo client speaks bgnet: rank 0 joins its class too.
    if echo.is_some() && rank == 0 {
        if let Err(e) = port.join_classes(ep, 1 << kestrel_bgp::coll::BGNET_CLASS) {
            println!("cannot join bgnet's class: {e}");
            return;
        }
    }
    if rank >= size {
        println!(
            "rank {rank} is not below ranks.n={size}: name the ranks' modules ..0 to ..{}",
            size - 1
        );
        port.detach(ep);
        return;
    }
    let env = Env {
        wait,
        now_ns,
        deadlock_ns: 60_000_000_000,
    };
    let mut mpi = match Mpi::init(port, ep, bus_base, rank, size, env) {
        Ok(m) => m,
        Err(e) => {
            println!("rank {rank}: MPI_Init: {e}");
            return;
        }
    };
    let r = rank;
    // Everyone attached and joined the class (a reduction waits for every endpoint
    // sourcing it), then a barrier.
    let mut run = || -> Result<(), RunError> {
        mpi.barrier(WORLD)?;
        for round in 0..rounds {
            if round > 0 && pause_ms > 0 {
                // The root task only ever replies: a receive from it ends in its timeout.
                let _ = kestrel_user::ipc::receive(
                    kestrel_abi::ThreadId::ROOT,
                    Timeout::from_us(pause_ms.saturating_mul(1000)),
                );
            }
            let to = ((r + 1) % size) as u8;
            let from = ((r + size - 1) % size) as u8;
            fill(r + 1, &mut buf[..bytes]);
            let sreq = mpi.isend(WORLD, to as i32, TAG as i32, &buf[..bytes], false)?;
            let mut got = [0u8; MAX_DATA];
            let st = mpi.recv(WORLD, from as i32, TAG as i32, &mut got)?;
            mpi.wait(sreq)?;
            let (src, n) = (st.source as u8, st.bytes);
            fill(u32::from(src) + 1, &mut buf[..n]);
            let ok = src == from && n == bytes && got[..n] == buf[..n];
            let mut v = [
                u64::from(r + 1),
                u64::from((r + 1) * (r + 1)),
                u64::from(crc32(&got[..n])),
            ];
            let mut out = [0u8; 24];
            let mut inp = [0u8; 24];
            for (i, x) in v.iter().enumerate() {
                inp[8 * i..8 * i + 8].copy_from_slice(&x.to_ne_bytes());
            }
            mpi.allreduce(WORLD, &inp, &mut out, Datatype::U64, Op::Sum)?;
            for (i, x) in v.iter_mut().enumerate() {
                *x = u64::from_ne_bytes(out[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            }
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
        }
        if let (0, Some(ip)) = (r, echo) {
            let (port, dma) = mpi.dma();
            echo_client(port, dma, node_address, ip, bytes)?;
        }
        if r == 0 && revoke_test {
            let (port, dma) = mpi.dma();
            revoke(port, dma)?;
        }
        if r == 0 && bench > 0 {
            let (port, dma) = mpi.dma();
            let ep = dma.ep;
            let t0 = sys::timebase();
            for _ in 0..bench {
                port.dma_read(ep, kestrel_bgp::dma::INJ_ACTIVATED)?;
            }
            let t1 = sys::timebase();
            let me = dma.me;
            let mut msg = [0u8; 240];
            link_header(&mut msg, 0, 240, 1);
            let mut got = 0u32;
            for _ in 0..bench {
                dma.send(port, me, &msg)?;
                got += dma.receive(port, |_| {})? as u32;
            }
            let t2 = sys::timebase();
            println!(
                "bench: {bench} service calls, {} ticks each; {bench} 240-byte messages to self ({got} received), {} ticks each",
                (t1 - t0) / u64::from(bench),
                (t2 - t1) / u64::from(bench)
            );
        }
        mpi.barrier(WORLD)?;
        Ok(())
    };
    if let Err(e) = run() {
        match (&e, mpi.deadlock_report()) {
            (RunError::Mpi(_), Some(line)) => println!("{line}"),
            _ => println!("rank {r}: {e}"),
        }
    }
    mpi.fabric().detach(ep);
}
