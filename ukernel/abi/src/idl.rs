//! IPC protocols stated once: [`ipc_protocol!`](crate::ipc_protocol) turns a table of
//! operations (name, op number, request words, reply words) into both sides of a protocol,
//! as `sprs!` and `regs!` do for registers (Hubris's IDL is the model):
//!
//! - `op::NAME`: the op numbers, `op::ALL` in table order;
//! - `Request`: one variant per op, `encode` to label + words, `decode` (total: `None` for
//!   an unknown label, a wrong word count or a value [`Wire::take`] or the protocol's
//!   `valid` check refuses);
//! - `reply::Name`: one struct per op with the reply's fields, `encode` and `decode`, and
//!   `Reply` (any op's reply) with `encode_reply` / `decode_reply`;
//! - `Client`: one method per op over a [`Transport`] (the target's IPC call, or an
//!   in-memory one in host tests), blanket-implemented for every transport;
//! - `Server`: one method per op, and `dispatch` / `Request::serve`, which decode, call the
//!   method and encode its answer.
//!
//! The wire shape is the one every Kestrel protocol has: a request is an IPC call with label
//! `LABEL + op` and at most [`MAX_WORDS`] untyped words (registers only); the reply has the
//! protocol's OK label and the op's words, or its ERROR label and one word, the refusal's
//! code ([`WireError`]). A reply with more words than its op defines is accepted (the
//! extra ones are ignored); one with fewer is malformed. Map items travel beside the words,
//! as the transport and the server's caller context handle them.

use crate::ipc::MapItem;
use crate::thread::ThreadId;

/// Most untyped words in a request or reply (MR1..MR6, the register part of a message).
pub const MAX_WORDS: usize = 6;

/// Whether `n` words fit in a message's registers (the generated tables' check).
pub const fn fits(n: usize) -> bool {
    n <= MAX_WORDS
}

/// A request or reply as label and untyped words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    pub label: u16,
    pub len: usize,
    pub w: [u32; MAX_WORDS],
}

impl Words {
    /// `label` with `words` (cut to [`MAX_WORDS`]).
    pub fn new(label: u16, words: &[u32]) -> Words {
        let mut w = [0; MAX_WORDS];
        let len = words.len().min(MAX_WORDS);
        w[..len].copy_from_slice(&words[..len]);
        Words { label, len, w }
    }
    /// The words in use.
    pub fn words(&self) -> &[u32] {
        &self.w[..self.len]
    }
}

/// A value that travels as a fixed number of message words.
pub trait Wire: Sized {
    /// How many words the value takes.
    const WORDS: usize;
    /// Writes the value into `out` (exactly [`Wire::WORDS`] words).
    fn put(&self, out: &mut [u32]);
    /// Reads a value from `words` (exactly [`Wire::WORDS`] words); `None` if they hold none.
    fn take(words: &[u32]) -> Option<Self>;
}

impl Wire for u32 {
    const WORDS: usize = 1;
    fn put(&self, out: &mut [u32]) {
        out[0] = *self;
    }
    fn take(words: &[u32]) -> Option<u32> {
        words.first().copied()
    }
}

/// A byte (an endpoint number, say): a word whose value fits.
impl Wire for u8 {
    const WORDS: usize = 1;
    fn put(&self, out: &mut [u32]) {
        out[0] = u32::from(*self);
    }
    fn take(words: &[u32]) -> Option<u8> {
        u8::try_from(*words.first()?).ok()
    }
}

/// A 64-bit value (a bus address) as two words, high first.
impl Wire for u64 {
    const WORDS: usize = 2;
    fn put(&self, out: &mut [u32]) {
        out[0] = (*self >> 32) as u32;
        out[1] = *self as u32;
    }
    fn take(words: &[u32]) -> Option<u64> {
        match *words {
            [hi, lo, ..] => Some(u64::from(hi) << 32 | u64::from(lo)),
            _ => None,
        }
    }
}

impl Wire for ThreadId {
    const WORDS: usize = 1;
    fn put(&self, out: &mut [u32]) {
        out[0] = self.0;
    }
    fn take(words: &[u32]) -> Option<ThreadId> {
        words.first().copied().map(ThreadId)
    }
}

impl<const N: usize> Wire for [u32; N] {
    const WORDS: usize = N;
    fn put(&self, out: &mut [u32]) {
        out[..N].copy_from_slice(self);
    }
    fn take(words: &[u32]) -> Option<[u32; N]> {
        words.get(..N)?.try_into().ok()
    }
}

/// Reads [`Wire`] values one after the other (generated decoders).
pub struct Reader<'a> {
    words: &'a [u32],
}

impl<'a> Reader<'a> {
    pub fn new(words: &'a [u32]) -> Reader<'a> {
        Reader { words }
    }
    /// The next value; `None` if the words run out or hold no `T`.
    pub fn take<T: Wire>(&mut self) -> Option<T> {
        let w = self.words.get(..T::WORDS)?;
        self.words = &self.words[T::WORDS..];
        T::take(w)
    }
}

/// Writes [`Wire`] values one after the other (generated encoders).
pub struct Writer {
    w: [u32; MAX_WORDS],
    len: usize,
}

impl Writer {
    pub const fn new() -> Writer {
        Writer {
            w: [0; MAX_WORDS],
            len: 0,
        }
    }
    /// Appends `v`. A table whose words exceed [`MAX_WORDS`] fails its generated
    /// `const` check, so this never runs out of room.
    pub fn put<T: Wire>(&mut self, v: &T) {
        v.put(&mut self.w[self.len..self.len + T::WORDS]);
        self.len += T::WORDS;
    }
    /// The message: `label` with the words written.
    pub fn finish(&self, label: u16) -> Words {
        Words::new(label, &self.w[..self.len])
    }
}

impl Default for Writer {
    fn default() -> Writer {
        Writer::new()
    }
}

/// A protocol's refusal: its error enum as the one word of an ERROR reply.
pub trait WireError: Sized + Copy {
    /// The refusal of a message that fits no shape of the protocol (and the reading of a
    /// reply that fits none: it cannot come from a working server).
    const MALFORMED: Self;
    /// The wire code.
    fn code(self) -> u32;
    /// The refusal with wire code `c`.
    fn from_code(c: u32) -> Option<Self>;
}

/// The ERROR reply carrying `e`.
pub fn encode_error<E: WireError>(error_label: u16, e: E) -> Words {
    Words::new(error_label, &[e.code()])
}

/// The first `want` words of a reply with label `ok_label`, or the refusal an
/// `error_label` reply carries; anything else is [`WireError::MALFORMED`].
pub fn decode_result<E: WireError>(
    ok_label: u16,
    error_label: u16,
    want: usize,
    label: u16,
    words: &[u32],
) -> Result<&[u32], E> {
    if label == error_label {
        return Err(words
            .first()
            .and_then(|&c| E::from_code(c))
            .unwrap_or(E::MALFORMED));
    }
    match words.get(..want) {
        Some(w) if label == ok_label && want <= MAX_WORDS => Ok(w),
        _ => Err(E::MALFORMED),
    }
}

/// How a generated `Client` reaches its server: one IPC call (request words and map items
/// out, reply words back). `E` is the protocol's refusal; the transport's own error type
/// carries it beside its own failures (the IPC's).
pub trait Transport<E> {
    type Error: From<E>;
    fn call(&self, request: &Words, items: &[MapItem]) -> Result<Words, Self::Error>;
}

/// States an IPC protocol once and generates both sides of it (see [the module](self)).
///
/// ```ignore
/// kestrel_abi::ipc_protocol! {
///     protocol { label: LABEL, ok: OK, error: ERROR, refusal: MyError, valid: |_: &Request| true }
///     ops {
///         /// Doc of the op (on the request variant, the client and the server method).
///         READ = 1: Read, read { ep: u8, offset: u32 } -> { value: u32 };
///     }
/// }
/// ```
///
/// Field types implement [`Wire`]; `refusal` implements [`WireError`]; `valid` is a check
/// every decoded request must pass beyond its word count (an endpoint number's range, say).
#[macro_export]
macro_rules! ipc_protocol {
    (
        protocol {
            label: $label:expr,
            ok: $ok:expr,
            error: $error:expr,
            refusal: $Err:ty,
            valid: $valid:expr $(,)?
        }
        ops {
            $(
                $(#[$attr:meta])*
                $OP:ident = $n:literal : $Name:ident, $method:ident
                    { $($f:ident : $t:ty),* $(,)? } -> { $($rf:ident : $rt:ty),* $(,)? };
            )*
        }
    ) => {
        /// Request ops (label − the protocol's base label).
        pub mod op {
            $( pub const $OP: u16 = $n; )*
            /// Every op, in table order.
            pub const ALL: &[u16] = &[$($OP),*];
        }

        /// A request: one variant per op, its fields the request's words in order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Request {
            $( $(#[$attr])* $Name { $($f: $t),* }, )*
        }

        impl Request {
            /// The request's op.
            pub const fn op(&self) -> u16 {
                match self {
                    $( Request::$Name { .. } => op::$OP, )*
                }
            }

            /// How many words a request with op `o` carries (`None`: no such op).
            pub const fn words_of(o: u16) -> Option<usize> {
                match o {
                    $( op::$OP => Some(0 $(+ <$t as $crate::idl::Wire>::WORDS)*), )*
                    _ => None,
                }
            }

            /// The request as label and words.
            pub fn encode(&self) -> $crate::idl::Words {
                let mut w = $crate::idl::Writer::new();
                match self {
                    $( Request::$Name { $($f),* } => {
                        $( w.put($f); )*
                    } )*
                }
                w.finish($label + self.op())
            }

            /// Decodes a received message; `None` if the label is no request, the word
            /// count does not match the op, or a value is out of range.
            pub fn decode(label: u16, words: &[u32]) -> Option<Request> {
                let o = label.checked_sub($label)?;
                if Request::words_of(o)? != words.len() {
                    return None;
                }
                #[allow(unused_mut, unused_variables)]
                let mut r = $crate::idl::Reader::new(words);
                let req = match o {
                    $( op::$OP => Request::$Name { $($f: r.take::<$t>()?),* }, )*
                    _ => return None,
                };
                let valid: fn(&Request) -> bool = $valid;
                valid(&req).then_some(req)
            }

            /// Whether the request survives the wire: its words fit and decode to it again
            /// (for property tests; a request the protocol's `valid` refuses does not).
            pub fn round_trips(&self) -> bool {
                let w = self.encode();
                w.len <= $crate::idl::MAX_WORDS && Request::decode(w.label, w.words()) == Some(*self)
            }

            /// Runs the request on `server` and encodes its answer (`Err`: the refusal,
            /// for the server to log before it sends [`encode_error`]'s words).
            pub fn serve<S: Server + ?Sized>(
                self,
                server: &mut S,
                caller: &mut S::Caller,
            ) -> Result<$crate::idl::Words, $Err> {
                match self {
                    $( Request::$Name { $($f),* } => {
                        server.$method(caller, $($f),*).map(|r| r.encode())
                    } )*
                }
            }
        }

        /// The words of a refusal.
        pub fn encode_error(e: $Err) -> $crate::idl::Words {
            $crate::idl::encode_error($error, e)
        }

        /// Each op's reply: its fields are the reply's words in order.
        pub mod reply {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[derive(Clone, Copy, Debug, PartialEq, Eq)]
                pub struct $Name { $(pub $rf: $rt),* }

                impl $Name {
                    /// How many words the reply carries.
                    pub const WORDS: usize = 0 $(+ <$rt as $crate::idl::Wire>::WORDS)*;

                    /// The reply as the OK label and its words.
                    pub fn encode(&self) -> $crate::idl::Words {
                        #[allow(unused_mut)]
                        let mut w = $crate::idl::Writer::new();
                        $( w.put(&self.$rf); )*
                        w.finish($ok)
                    }

                    /// Decodes the reply to this op (or the refusal it carries).
                    pub fn decode(label: u16, words: &[u32]) -> Result<$Name, $Err> {
                        let w = $crate::idl::decode_result::<$Err>(
                            $ok, $error, Self::WORDS, label, words,
                        )?;
                        #[allow(unused_mut, unused_variables)]
                        let mut r = $crate::idl::Reader::new(w);
                        Ok($Name {
                            $( $rf: r.take::<$rt>().ok_or(
                                <$Err as $crate::idl::WireError>::MALFORMED,
                            )?, )*
                        })
                    }
                }
            )*
        }

        $( const _: () = assert!(
            $crate::idl::fits(0 $(+ <$t as $crate::idl::Wire>::WORDS)*)
                && $crate::idl::fits(reply::$Name::WORDS)
        ); )*

        /// Any op's successful reply.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Reply {
            $( $Name(reply::$Name), )*
        }

        /// How many words the reply to op `o` carries (0 for an unknown op).
        pub const fn reply_words(o: u16) -> usize {
            match o {
                $( op::$OP => reply::$Name::WORDS, )*
                _ => 0,
            }
        }

        /// Encodes a server's answer.
        pub fn encode_reply(r: &Result<Reply, $Err>) -> $crate::idl::Words {
            match r {
                $( Ok(Reply::$Name(x)) => x.encode(), )*
                Err(e) => encode_error(*e),
            }
        }

        /// Decodes the reply to a request with op `o` (an unknown op's reply is malformed).
        pub fn decode_reply(o: u16, label: u16, words: &[u32]) -> Result<Reply, $Err> {
            match o {
                $( op::$OP => reply::$Name::decode(label, words).map(Reply::$Name), )*
                _ => Err(<$Err as $crate::idl::WireError>::MALFORMED),
            }
        }

        /// Whether the codec holds on any message (for property tests and fuzz targets): a
        /// request that decodes re-encodes to exactly `label` and `words`, and a reply that
        /// decodes for an op encodes to words that decode to it again.
        pub fn codec_holds(label: u16, words: &[u32]) -> bool {
            if let Some(r) = Request::decode(label, words) {
                let w = r.encode();
                if (w.label, w.words()) != (label, words) {
                    return false;
                }
            }
            op::ALL.iter().all(|&o| match decode_reply(o, label, words) {
                Ok(r) => {
                    let w = encode_reply(&Ok(r));
                    decode_reply(o, w.label, w.words()) == Ok(r)
                }
                Err(_) => true,
            })
        }

        /// The protocol's calls over a transport, one method per op.
        pub trait Client: $crate::idl::Transport<$Err> {
            $(
                $(#[$attr])*
                fn $method(&self, $($f: $t),*) -> Result<reply::$Name, Self::Error> {
                    let w = self.call(&Request::$Name { $($f),* }.encode(), &[])?;
                    Ok(reply::$Name::decode(w.label, w.words())?)
                }
            )*
        }

        impl<T: $crate::idl::Transport<$Err> + ?Sized> Client for T {}

        /// The server's side: one method per op. `Caller` is what the server needs to know
        /// about the message beside its words (the sender, its map items).
        pub trait Server {
            type Caller: ?Sized;
            $(
                $(#[$attr])*
                // One argument per request word: a six-word request has eight.
                #[allow(clippy::too_many_arguments)]
                fn $method(
                    &mut self,
                    caller: &mut Self::Caller,
                    $($f: $t),*
                ) -> Result<reply::$Name, $Err>;
            )*
        }

        /// Decodes a request, runs it on `server` and encodes the answer (a message that is
        /// no request is refused as malformed).
        pub fn dispatch<S: Server + ?Sized>(
            server: &mut S,
            caller: &mut S::Caller,
            label: u16,
            words: &[u32],
        ) -> $crate::idl::Words {
            match Request::decode(label, words) {
                Some(r) => r.serve(server, caller).unwrap_or_else(encode_error),
                None => encode_error(<$Err as $crate::idl::WireError>::MALFORMED),
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum TestError {
        Bad,
        Full,
    }

    impl WireError for TestError {
        const MALFORMED: TestError = TestError::Bad;
        fn code(self) -> u32 {
            self as u32 + 1
        }
        fn from_code(c: u32) -> Option<TestError> {
            [TestError::Bad, TestError::Full]
                .get(c.checked_sub(1)? as usize)
                .copied()
        }
    }

    mod proto {
        use super::TestError;
        use crate::ThreadId;
        crate::ipc_protocol! {
            protocol {
                label: 0x0700,
                ok: 0,
                error: 0x07ff,
                refusal: TestError,
                valid: |r: &Request| !matches!(r, Request::Put { ep, .. } if *ep > 15),
            }
            ops {
                /// Reads a word.
                GET = 1: Get, get { ep: u8, at: u32 } -> { value: u32 };
                PUT = 2: Put, put { ep: u8, at: u32, value: u32 } -> {};
                WHO = 3: Who, who {} -> { id: ThreadId, base: u64, name: [u32; 2] };
            }
        }
    }
    use proto::{reply, Client, Request, Server};

    /// A server over an array, reached through an in-memory transport.
    struct Memory([u32; 4]);

    impl Server for Memory {
        type Caller = u32;
        fn get(&mut self, calls: &mut u32, _ep: u8, at: u32) -> Result<reply::Get, TestError> {
            *calls += 1;
            let value = *self.0.get(at as usize).ok_or(TestError::Full)?;
            Ok(reply::Get { value })
        }
        fn put(
            &mut self,
            calls: &mut u32,
            _: u8,
            at: u32,
            v: u32,
        ) -> Result<reply::Put, TestError> {
            *calls += 1;
            *self.0.get_mut(at as usize).ok_or(TestError::Full)? = v;
            Ok(reply::Put {})
        }
        fn who(&mut self, _: &mut u32) -> Result<reply::Who, TestError> {
            Ok(reply::Who {
                id: ThreadId(7),
                base: 0x1_2345_6789,
                name: [1, 2],
            })
        }
    }

    struct Link(core::cell::RefCell<(Memory, u32)>);

    impl Transport<TestError> for Link {
        type Error = TestError;
        fn call(&self, request: &Words, _: &[MapItem]) -> Result<Words, TestError> {
            let (m, calls) = &mut *self.0.borrow_mut();
            Ok(proto::dispatch(m, calls, request.label, request.words()))
        }
    }

    #[test]
    fn client_reaches_server_through_a_transport() {
        let t = Link(core::cell::RefCell::new((Memory([0; 4]), 0)));
        t.put(0, 2, 99).unwrap();
        assert_eq!(t.get(0, 2).unwrap().value, 99);
        assert_eq!(t.get(0, 9), Err(TestError::Full));
        assert_eq!(t.put(16, 0, 1), Err(TestError::Bad));
        let w = t.who().unwrap();
        assert_eq!((w.id, w.base, w.name), (ThreadId(7), 0x1_2345_6789, [1, 2]));
        assert_eq!(t.0.borrow().1, 3);
    }

    #[test]
    fn wire_shape() {
        let w = Request::Put {
            ep: 3,
            at: 4,
            value: 5,
        }
        .encode();
        assert_eq!((w.label, w.words()), (0x0702, &[3, 4, 5][..]));
        assert_eq!(Request::decode(0x0702, &[3, 4]), None);
        assert!(Request::Who {}.round_trips());
        assert!(!Request::Put {
            ep: 16,
            at: 0,
            value: 0
        }
        .round_trips());
        assert_eq!(Request::decode(0x0701, &[256, 4]), None);
        assert_eq!(Request::decode(0x0702, &[16, 4, 5]), None);
        assert_eq!(Request::decode(0x0704, &[]), None);
        let r = reply::Who {
            id: ThreadId(1),
            base: 0xAAAA_BBBB_CCCC_DDDD,
            name: [3, 4],
        };
        assert_eq!(r.encode().words(), &[1, 0xAAAA_BBBB, 0xCCCC_DDDD, 3, 4]);
        assert_eq!(proto::reply_words(proto::op::WHO), 5);
        assert_eq!(reply::Get::decode(0, &[1, 2]), Ok(reply::Get { value: 1 }));
        assert_eq!(reply::Get::decode(0, &[]), Err(TestError::Bad));
        assert_eq!(reply::Get::decode(0x07ff, &[2]), Err(TestError::Full));
        assert_eq!(reply::Get::decode(0x07ff, &[9]), Err(TestError::Bad));
        assert_eq!(reply::Get::decode(5, &[1]), Err(TestError::Bad));
    }

    proptest! {
        #[test]
        fn decode_is_total_and_exact(label in any::<u16>(), words in proptest::collection::vec(any::<u32>(), 0..8)) {
            prop_assert!(proto::codec_holds(label, &words));
            prop_assert!(proto::decode_reply(9, label, &words).is_err());
        }
    }
}
