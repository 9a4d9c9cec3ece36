//! Messages and the common IPC shapes.
//!
//! MR1..MR6 travel in registers (kept in [`Msg::regs`]); MR7 and up are read from and
//! written to the UTCB directly, so a [`Msg`] is cheap to copy.

use crate::sys::{syscall, utcb};
use kestrel_abi::idl::{Words, MAX_WORDS};
use kestrel_abi::{
    Fpage, IpcError, IpcPhase, MapItem, MsgTag, Syscall, ThreadId, Timeout, Timeouts, REG_MRS,
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    pub tag: MsgTag,
    /// MR1..MR6.
    pub regs: [u32; REG_MRS - 1],
}

/// An IPC failure and the phase it happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcErr {
    pub error: IpcError,
    pub phase: IpcPhase,
}

impl Msg {
    /// An empty message with `label`.
    pub const fn new(label: u16) -> Msg {
        Msg {
            tag: MsgTag::new(label, 0, 0),
            regs: [0; REG_MRS - 1],
        }
    }

    /// A message with `label` and untyped `words` (MR1.., at most 63).
    pub fn with_words(label: u16, words: &[u32]) -> Msg {
        let mut m = Msg::new(label);
        for &w in words {
            m.push(w);
        }
        m
    }

    /// A protocol message (`kestrel_abi::idl`): its label and words.
    pub fn from_words(w: &Words) -> Msg {
        Msg::with_words(w.label, w.words())
    }

    /// The message as a protocol's label and untyped words (the first
    /// [`idl::MAX_WORDS`](kestrel_abi::idl::MAX_WORDS) of them).
    pub fn words(&self) -> Words {
        let n = self.tag.untyped().min(MAX_WORDS);
        let w: [u32; MAX_WORDS] = core::array::from_fn(|i| self.mr(i + 1));
        Words::new(self.label(), &w[..n])
    }

    /// Message register `i` (1-based; MR0 is the tag).
    pub fn mr(&self, i: usize) -> u32 {
        if i == 0 {
            self.tag.0
        } else if i < REG_MRS {
            self.regs[i - 1]
        } else {
            utcb().mr[i]
        }
    }

    pub fn set_mr(&mut self, i: usize, v: u32) {
        if i == 0 {
            self.tag = MsgTag(v);
        } else if i < REG_MRS {
            self.regs[i - 1] = v;
        } else if i < kestrel_abi::NUM_MRS {
            utcb().mr[i] = v;
        }
    }

    pub fn label(&self) -> u16 {
        self.tag.label()
    }

    /// Appends an untyped word (before any typed items).
    pub fn push(&mut self, w: u32) {
        let u = self.tag.untyped();
        let t = self.tag.typed();
        // Shift typed words up by one if there are any (rare; keeps the API simple).
        for i in (u + 1..=u + t).rev() {
            let v = self.mr(i);
            self.set_mr(i + 1, v);
        }
        self.set_mr(u + 1, w);
        self.tag = MsgTag((self.tag.0 & 0xffff_f000) | ((t as u32) << 6) | (u as u32 + 1));
    }

    /// Appends a map or grant item.
    pub fn push_item(&mut self, item: MapItem) {
        let n = self.tag.words();
        let [a, b] = item.encode();
        self.set_mr(n + 1, a);
        self.set_mr(n + 2, b);
        let t = self.tag.typed() as u32 + 2;
        self.tag = MsgTag((self.tag.0 & 0xffff_f03f) | (t << 6));
    }

    /// The `k`-th typed item, if present and well-formed.
    pub fn item(&self, k: usize) -> Option<MapItem> {
        let base = self.tag.untyped() + 1 + 2 * k;
        if 2 * k + 2 > self.tag.typed() {
            return None;
        }
        MapItem::decode(self.mr(base), self.mr(base + 1))
    }
}

/// The raw `Ipc` system call. Returns the partner (sender for a receive) and the
/// received message (or the sent one's echo for send-only operations).
pub fn ipc(
    to: ThreadId,
    from: ThreadId,
    timeouts: Timeouts,
    msg: &Msg,
) -> (ThreadId, Msg, Result<(), IpcErr>) {
    let r = syscall(
        Syscall::Ipc,
        [
            to.0,
            from.0,
            timeouts.0,
            msg.tag.0,
            msg.regs[0],
            msg.regs[1],
            msg.regs[2],
            msg.regs[3],
            msg.regs[4],
            msg.regs[5],
        ],
    );
    let out = Msg {
        tag: MsgTag(r[3]),
        regs: [r[4], r[5], r[6], r[7], r[8], r[9]],
    };
    let res = if out.tag.is_error() {
        match IpcError::decode(r[1]) {
            Some((error, phase)) => Err(IpcErr { error, phase }),
            None => Err(IpcErr {
                error: IpcError::MsgOverflow,
                phase: IpcPhase::Send,
            }),
        }
    } else {
        Ok(())
    };
    (ThreadId(r[0]), out, res)
}

/// Send `msg` to `to` and wait for its reply.
pub fn call(to: ThreadId, msg: &Msg) -> Result<Msg, IpcErr> {
    let (_, m, r) = ipc(to, to, Timeouts::NEVER, msg);
    r.map(|_| m)
}

/// A protocol's call (`kestrel_abi::idl::Transport`): the request's words and map items to
/// `to`, the reply's words back.
pub fn call_words(to: ThreadId, request: &Words, items: &[MapItem]) -> Result<Words, IpcErr> {
    let mut m = Msg::from_words(request);
    for &it in items {
        m.push_item(it);
    }
    call(to, &m).map(|r| r.words())
}

/// Send with a timeout.
pub fn send(to: ThreadId, msg: &Msg, timeout: Timeout) -> Result<(), IpcErr> {
    let (_, _, r) = ipc(
        to,
        ThreadId::NIL,
        Timeouts::new(timeout, Timeout::ZERO),
        msg,
    );
    r
}

/// Receive from `from` (or [`ThreadId::ANY`]) with a timeout.
pub fn receive(from: ThreadId, timeout: Timeout) -> Result<(ThreadId, Msg), IpcErr> {
    let (f, m, r) = ipc(
        ThreadId::NIL,
        from,
        Timeouts::new(Timeout::ZERO, timeout),
        &Msg::new(0),
    );
    r.map(|_| (f, m))
}

/// Reply to `to` without blocking, then wait for the next message from anyone.
pub fn reply_wait(to: ThreadId, msg: &Msg) -> Result<(ThreadId, Msg), IpcErr> {
    let (f, m, r) = ipc(
        to,
        ThreadId::ANY,
        Timeouts::new(Timeout::ZERO, Timeout::NEVER),
        msg,
    );
    r.map(|_| (f, m))
}

/// Reply without waiting.
pub fn reply(to: ThreadId, msg: &Msg) -> Result<(), IpcErr> {
    send(to, msg, Timeout::ZERO)
}

/// Sets this thread's receive window for map/grant items.
pub fn set_acceptor(window: Fpage) {
    utcb().acceptor = window.0;
}
