//! The demo's pager: a thread in the root space that gives ping and pong their
//! memory, one page fault at a time.
//!
//! - Code and data of this binary are mapped 1:1 from the root's own pages (code
//!   RX, the rest RW): ping and pong run functions of the root task's image.
//! - Stack pages get a fresh zeroed frame from the root's free memory.
//! - Any other fault is refused (the faulting thread stays blocked).
//!
//! It prints every stack page it maps and the first code and data page of each
//! thread, and answers [`STATS`] requests from the root.

use crate::{name_of, stack_top, PING, PONG, STACK_SIZE};
use kestrel_abi::{Rights, ThreadId, PAGE_SIZE};
use kestrel_user::ipc::Msg;
use kestrel_user::mem::{self, FrameAllocator, PageFault};
use kestrel_user::{println, sys};

/// Request label: → MR1 = faults served, MR2 = image pages, MR3 = stack pages.
pub const STATS: u16 = 0x0100;

extern "C" {
    static __image_start: u8;
    /// End of the code, page aligned (`sections.ld`).
    static __text_end: u8;
    static __image_end: u8;
}

/// Stack pages the pager keeps track of (both threads together).
const MAX_STACK_PAGES: usize = 16;

struct Pager {
    frames: FrameAllocator,
    /// `(thread, page, frame)` of every stack page handed out.
    stack: [(ThreadId, u32, u32); MAX_STACK_PAGES],
    nstack: usize,
    /// Faults answered with a mapping, and how many of them were image pages.
    served: u32,
    image_pages: u32,
    /// Whether each player's first code / data page was announced: `[ping, pong]`.
    shown: [(bool, bool); 2],
}

pub extern "C" fn pager_main(_: u32) {
    // The name only appears in kernel messages.
    let _ = sys::set_name("pager");
    let Some(frames) = FrameAllocator::from_kernel() else {
        println!("pager: no memory to hand out");
        return;
    };
    let mut pager = Pager {
        frames,
        stack: [(ThreadId::NIL, 0, 0); MAX_STACK_PAGES],
        nstack: 0,
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
        if from == ThreadId::ROOT && msg.label() == STATS {
            return Some(Msg::with_words(STATS, &[self.served, self.image_pages, self.nstack as u32]));
        }
        None
    }

    fn fault(&mut self, from: ThreadId, f: PageFault) -> Option<Msg> {
        let page = f.addr & !(PAGE_SIZE - 1);
        let (start, text_end, end) =
            (&raw const __image_start as u32, &raw const __text_end as u32, &raw const __image_end as u32);
        let reply = if (start..end).contains(&page) {
            let code = page < text_end;
            let rights = if code { Rights::RX } else { Rights::RW };
            if !rights.contains(f.access) {
                None
            } else {
                // SAFETY: the page is part of our own image, mapped in the root space
                // since boot; reading a byte of it has no effect.
                unsafe { (page as *const u8).read_volatile() };
                self.image_pages += 1;
                self.announce_image(from, page, code);
                Some(mem::map_reply(f.addr, page, rights))
            }
        } else if (stack_top(from) - STACK_SIZE..stack_top(from)).contains(&page) && f.access != Rights::X {
            self.stack_frame(from, page).map(|frame| {
                println!("pager: mapped {page:#010x} for {} (fresh stack page)", name_of(from));
                mem::map_reply(f.addr, frame, Rights::RW)
            })
        } else {
            None
        };
        if reply.is_some() {
            self.served += 1;
        } else {
            println!("pager: refused {} fault at {:#010x} by {} (ip {:#010x})", access(f.access), f.addr, name_of(from), f.ip);
        }
        reply
    }

    /// Prints the first code and the first data page of each player.
    fn announce_image(&mut self, from: ThreadId, page: u32, code: bool) {
        let who = match from {
            PING => 0,
            PONG => 1,
            _ => return,
        };
        let shown = &mut self.shown[who];
        let first = if code { !core::mem::replace(&mut shown.0, true) } else { !core::mem::replace(&mut shown.1, true) };
        if first {
            let what = if code { "code, RX" } else { "data, RW" };
            println!("pager: mapped {page:#010x} for {} (root image {what}; more follow silently)", name_of(from));
        }
    }

    /// The frame behind stack `page` of `thread`, allocated on first use.
    fn stack_frame(&mut self, thread: ThreadId, page: u32) -> Option<u32> {
        if let Some(&(_, _, frame)) = self.stack[..self.nstack].iter().find(|&&(t, p, _)| t == thread && p == page) {
            return Some(frame);
        }
        if self.nstack == MAX_STACK_PAGES {
            return None;
        }
        let frame = self.frames.alloc()?;
        self.stack[self.nstack] = (thread, page, frame);
        self.nstack += 1;
        Some(frame)
    }
}

fn access(r: Rights) -> &'static str {
    match r {
        Rights::W => "write",
        Rights::X => "execute",
        _ => "read",
    }
}
