//! The demo's pager: a thread in the demo's space that gives ping and pong their
//! memory, one page fault at a time, with the shared pager helpers of
//! `kestrel_user::pager`.
//!
//! - Code and data of this binary are shared with them (`share_image`: code RX, the
//!   rest RW): ping and pong run functions of the demo's image.
//! - Stack pages get a fresh zeroed frame (`PrivatePages`), from RAM the root task
//!   hands out in 64 KiB chunks (`RootRam`).
//! - Any other fault is refused (the faulting thread stays blocked).
//!
//! It prints every stack page it maps and the first code and data page of each
//! thread, and answers [`STATS`] requests from the demo's main thread.

use crate::{main_thread, name_of, ping, pong, stack_top, STACK_SIZE};
use kestrel_abi::{Rights, ThreadId, PAGE_SIZE};
use kestrel_user::ipc::Msg;
use kestrel_user::mem::{self, PageFault};
use kestrel_user::pager::{image, share_image, PrivatePages, RootRam};
use kestrel_user::{println, sys};

/// Request label: → MR1 = faults served, MR2 = image pages, MR3 = stack pages.
pub const STATS: u16 = 0x0100;

/// Stack pages the pager keeps track of (both threads together).
const MAX_STACK_PAGES: usize = 16;
/// Where the stack frames live in the demo's own space (RAM from the root task).
const FRAMES_BASE: u32 = 0x2000_0000;
const FRAMES_END: u32 = 0x2010_0000;

struct Pager {
    frames: RootRam,
    stack: PrivatePages<MAX_STACK_PAGES>,
    /// Faults answered with a mapping, and how many of them were image pages.
    served: u32,
    image_pages: u32,
    /// Whether each player's first code / data page was announced: `[ping, pong]`.
    shown: [(bool, bool); 2],
}

pub extern "C" fn pager_main(_: u32) {
    // The name only appears in kernel messages.
    let _ = sys::set_name("pager");
    let mut pager = Pager {
        frames: RootRam::new(FRAMES_BASE, FRAMES_END),
        stack: PrivatePages::new(),
        served: 0,
        image_pages: 0,
        shown: [(false, false); 2],
    };
    mem::pager_loop(move |from, msg| pager.handle(from, msg))
}

impl Pager {
    fn handle(&mut self, from: ThreadId, msg: &Msg) -> Option<Msg> {
        if let Some(fault) = PageFault::parse(msg) {
            return self.fault(from, fault);
        }
        if from == main_thread() && msg.label() == STATS {
            return Some(Msg::with_words(
                STATS,
                &[self.served, self.image_pages, self.stack.len() as u32],
            ));
        }
        None
    }

    fn fault(&mut self, from: ThreadId, f: PageFault) -> Option<Msg> {
        let page = f.addr & !(PAGE_SIZE - 1);
        let reply = if let Some(reply) = share_image(&f) {
            self.image_pages += 1;
            self.announce_image(from, page, page < image().1);
            Some(reply)
        } else if (stack_top(from) - STACK_SIZE..stack_top(from)).contains(&page)
            && f.access != Rights::X
        {
            self.stack
                .get_or_alloc(from.0, page, &mut self.frames)
                .map(|frame| {
                    println!(
                        "pager: mapped {page:#010x} for {} (fresh stack page)",
                        name_of(from)
                    );
                    mem::map_reply(f.addr, frame, Rights::RW)
                })
        } else {
            None
        };
        if reply.is_some() {
            self.served += 1;
        } else {
            println!(
                "pager: refused {} fault at {:#010x} by {} (ip {:#010x})",
                access(f.access),
                f.addr,
                name_of(from),
                f.ip
            );
        }
        reply
    }

    /// Prints the first code and the first data page of each player.
    fn announce_image(&mut self, from: ThreadId, page: u32, code: bool) {
        let who = if from == ping() {
            0
        } else if from == pong() {
            1
        } else {
            return;
        };
        let shown = &mut self.shown[who];
        let first = if code {
            !core::mem::replace(&mut shown.0, true)
        } else {
            !core::mem::replace(&mut shown.1, true)
        };
        if first {
            let what = if code { "code, RX" } else { "data, RW" };
            println!(
                "pager: mapped {page:#010x} for {} (demo image {what}; more follow silently)",
                name_of(from)
            );
        }
    }
}

fn access(r: Rights) -> &'static str {
    match r {
        Rights::W => "write",
        Rights::X => "execute",
        _ => "read",
    }
}
