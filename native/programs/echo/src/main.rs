//! `kestrel-echo`: a native bgnet peer on the fabric (`docs/adr/0020-fabric-service.md`).
//! It attaches one endpoint to the fabric service (`kestrel-fabric`), takes the IPv4
//! address 10.1.0.100 (`echo.ip=A.B.C.D` on the kernel command line) and its endpoint's
//! MAC 06:00:00:X:Y:Z, and answers
//!
//! - ARP requests for its address,
//! - ICMP echo requests (ping),
//! - UDP datagrams to port 7, echoed back unchanged; the payload `KESTREL-ECHO-QUIT` is
//!   echoed and then ends the program (so a test run can end),
//!
//! arriving over the torus (memory-FIFO messages in bgnet's torus framing), over the
//! collective (bgnet's framing on class 0, VC 0: broadcasts such as ARP requests, and
//! point-to-point packets) or over the pv NIC frame path; each answer goes back the way its
//! request came (over the collective point to point to the sender's node address). The network id (bgnet's `network-id`) is 0 (`echo.netid=N`).
//! Between events from the service it sleeps; it prints one line per kind of answer the
//! first time, and a count at the end.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use kestrel_abi::Timeout;
use kestrel_bgp::coll;
use kestrel_bgp::torus::LINK_PROTO_NET;
use kestrel_fabric::FabricApi;
use kestrel_fabric_client::service::{Service, Window};
use kestrel_net::{self as net, answer, Answer, CollReassembly, Me, MAX_FRAME};
use kestrel_spi::{layout, link_header, tree, Coords, DmaGroup, Reassembly, LINK_HDR};
use kestrel_user::{println, root, sys};

/// The DMA window (64 KiB of RAM from the root task) and the shared page.
const WINDOW: u32 = 0x2000_0000;
const WINDOW_LEN: u32 = layout::MIN_WINDOW;
const SHARED: u32 = 0x2010_0000;
/// bgnet's collective channel and class (the device tree's `tree-channel`, `tree-route`).
const TREE_VC: usize = 0;

/// The reassembly buffers (large: kept out of the stack).
static mut TORUS: Reassembly<4> = Reassembly::new();
static mut COLL: CollReassembly<4> = CollReassembly::new();

/// Frames to answer, collected while the receive paths hold the port.
struct Inbox {
    n: usize,
    len: [usize; 8],
    via: [Via; 8],
    buf: [[u8; MAX_FRAME]; 8],
}

/// How a frame came, and so how its answer goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Torus,
    /// From this node address over the collective.
    Coll(u32),
    Nic,
}

impl Inbox {
    fn push(&mut self, f: &[u8], via: Via) {
        if self.n < self.buf.len() && f.len() <= MAX_FRAME {
            self.buf[self.n][..f.len()].copy_from_slice(f);
            self.len[self.n] = f.len();
            self.via[self.n] = via;
            self.n += 1;
        }
    }
}

fn parse_ip(s: &str) -> Option<[u8; 4]> {
    let mut ip = [0u8; 4];
    let mut it = s.split('.');
    for b in ip.iter_mut() {
        *b = it.next()?.parse().ok()?;
    }
    it.next().is_none().then_some(ip)
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("echo");
    let mut args = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut args);
    let args = core::str::from_utf8(&args[..n]).unwrap_or("");
    let mut ip = [10, 1, 0, 100];
    let mut netid = 0u32;
    for a in args.split_ascii_whitespace() {
        if let Some(v) = a.strip_prefix("echo.ip=").and_then(parse_ip) {
            ip = v;
        }
        if let Some(v) = a.strip_prefix("echo.netid=").and_then(|v| v.parse().ok()) {
            netid = v;
        }
    }
    if let Err(e) = root::ram(WINDOW, WINDOW_LEN, 16).and_then(|_| root::ram(SHARED, 4096, 12)) {
        println!("no memory for the window: {e}");
        return;
    }
    let service = match Service::connect() {
        Ok(s) => s,
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    let mut port = service;
    let (ep, bus_base) = match port.attach(Window::new(WINDOW, WINDOW_LEN, SHARED)) {
        Ok(a) => a,
        Err(e) => {
            println!("cannot attach to the fabric: {e}");
            return;
        }
    };
    let node_address = port.node_address(ep);
    let at = port.coords(ep);
    let c = Coords {
        x: at.x,
        y: at.y,
        z: at.z,
    };
    let mac = [
        kestrel_bgp::torus::MAC_TORUS_KIND as u8,
        0,
        0,
        c.x,
        c.y,
        c.z,
    ];
    let me = Me { mac, ip };
    let mut dma = match DmaGroup::setup(&mut port, ep, bus_base, c) {
        Ok(d) => d,
        Err(e) => {
            println!("cannot set up the DMA group: {e}");
            return;
        }
    };
    // Take part in bgnet's class only: a reduction on any other class (the MPI layer's)
    // completes without us.
    if let Err(e) = port.set_routes(ep, 1 << coll::BGNET_CLASS, 1 << coll::BGNET_CLASS) {
        println!("cannot set the class routes: {e}");
        return;
    }
    println!(
        "{}.{}.{}.{} at {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} (endpoint {}, torus ({},{},{}), node address {}), UDP echo on port 7",
        ip[0], ip[1], ip[2], ip[3], mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], ep.0, c.x, c.y, c.z, node_address
    );
    // SAFETY: this is the program's only thread, and these are the only references to the
    // reassembly buffers for the rest of its life.
    let (torus, coll) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(TORUS),
            &mut *core::ptr::addr_of_mut!(COLL),
        )
    };
    let mut inbox = Inbox {
        n: 0,
        len: [0; 8],
        via: [Via::Torus; 8],
        buf: [[0; MAX_FRAME]; 8],
    };
    let mut counts = [0u32; 3]; // arp, ping, udp
    let mut out = [0u8; LINK_HDR + MAX_FRAME];
    let mut quit = false;
    let mut conn = 0u16;
    while !quit {
        // Torus: memory-FIFO messages with bgnet's link header.
        let r = dma.receive(&mut port, |pkt| {
            torus.add(pkt, |m| {
                let b = m.bytes;
                let proto = u16::from_be_bytes([b[8], b[9]]);
                let key = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                if u32::from(proto) == LINK_PROTO_NET && key == netid {
                    inbox.push(&b[LINK_HDR..], Via::Torus);
                }
            })
        });
        if let Err(e) = r {
            println!("the fabric failed: {e}; exiting");
            return;
        }
        // Collective: bgnet's broadcasts.
        let mut p = [0u8; 256];
        while inbox.n < inbox.buf.len() {
            match port.tree_receive(ep, TREE_VC, &mut p) {
                Ok(Some(_)) => coll.add(netid, node_address, &p, |src, f| {
                    inbox.push(f, Via::Coll(src))
                }),
                _ => break,
            }
        }
        // The pv NIC's frames.
        let mut f = [0u8; MAX_FRAME];
        while inbox.n < inbox.buf.len() {
            match port.frame_receive(ep, &mut f) {
                Ok(Some(n)) => inbox.push(&f[..n.min(MAX_FRAME)], Via::Nic),
                _ => break,
            }
        }
        for i in 0..core::mem::take(&mut inbox.n) {
            let frame = &inbox.buf[i][..inbox.len[i]];
            let (len, kind) = match answer(&me, frame, &mut out[LINK_HDR..]) {
                Answer::None => continue,
                Answer::Arp(n) => (n, 0),
                Answer::Ping(n) => (n, 1),
                Answer::Udp { len, quit: q } => {
                    quit |= q;
                    (len, 2)
                }
            };
            if counts[kind] == 0 {
                println!(
                    "first {} answered (from {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x})",
                    ["ARP request", "ping", "UDP datagram"][kind],
                    frame[6],
                    frame[7],
                    frame[8],
                    frame[9],
                    frame[10],
                    frame[11]
                );
            }
            counts[kind] += 1;
            let dst = [
                out[LINK_HDR],
                out[LINK_HDR + 1],
                out[LINK_HDR + 2],
                out[LINK_HDR + 3],
                out[LINK_HDR + 4],
                out[LINK_HDR + 5],
            ];
            let sent = if inbox.via[i] == Via::Nic {
                port.frame_send(ep, &out[LINK_HDR..LINK_HDR + len])
                    .map(|_| true)
            } else if let Via::Coll(src) = inbox.via[i] {
                // Back the way it came: point to point to the sender's node address.
                conn = conn.wrapping_add(1);
                let mut r = Ok(true);
                net::coll_packets(
                    &out[LINK_HDR..LINK_HDR + len],
                    netid,
                    node_address,
                    conn,
                    |p| {
                        if matches!(r, Ok(true)) {
                            r = port
                                .tree_inject(ep, TREE_VC, tree::p2p(0, src), p)
                                .map(|_| true);
                        }
                    },
                );
                r
            } else if u32::from(dst[0] & 7) == kestrel_bgp::torus::MAC_TORUS_KIND {
                link_header(&mut out, netid, LINK_HDR + len, LINK_PROTO_NET as u16);
                dma.send(&mut port, Coords::of_mac(&dst), &out[..LINK_HDR + len])
            } else {
                Ok(false)
            };
            if !matches!(sent, Ok(true)) {
                println!("could not answer a frame ({sent:?})");
            }
        }
        if !quit {
            // Sleep until the service has news (at most a second: a lost event only costs
            // latency).
            port.wait(Timeout::from_us(1_000_000));
        }
    }
    println!(
        "quit: answered {} ARP requests, {} pings, {} UDP datagrams",
        counts[0], counts[1], counts[2]
    );
    port.detach(ep);
}
