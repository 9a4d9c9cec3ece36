//! The handle tables of the C face: communicators (each with its error handler) and requests
//! (each with what its completion needs). Handles are mpi.h's C ints (kind in the top byte,
//! index in the low 24 bits, README.md): a communicator's index is the core's `Comm` number
//! (`MPI_COMM_WORLD` 0, `MPI_COMM_SELF` 1, then each new one), a request's is a slot of
//! [`Requests`]. A handle that names nothing, or names another kind, is refused with the
//! kind's error class; nothing here trusts a handle the program passes.

use crate::abi;
use crate::error::ErrorClass;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ffi::c_int;
use kestrel_mpi::Comm;

/// Bits of a handle's index.
const INDEX_BITS: u32 = 24;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// The kind byte of every live communicator handle (`MPI_COMM_WORLD`'s).
const COMM_KIND: u32 = abi::MPI_COMM_WORLD as u32 & !INDEX_MASK;
/// The kind byte of every live request handle (`MPI_REQUEST_NULL`'s with bit 30 set).
const REQUEST_KIND: u32 = abi::MPI_REQUEST_NULL as u32 & !INDEX_MASK | 1 << 30;

/// What an error on a communicator does (`MPI_Comm_set_errhandler`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errhandler {
    /// `MPI_ERRORS_ARE_FATAL`, the default: the job ends.
    Fatal,
    /// `MPI_ERRORS_RETURN`: the call returns the error class.
    Return,
}

impl Errhandler {
    /// Decodes `MPI_ERRORS_ARE_FATAL` or `MPI_ERRORS_RETURN`; anything else (user-defined
    /// handlers do not exist here) is `Err(Arg)`.
    pub fn from_handle(h: c_int) -> Result<Errhandler, ErrorClass> {
        match h {
            abi::MPI_ERRORS_ARE_FATAL => Ok(Errhandler::Fatal),
            abi::MPI_ERRORS_RETURN => Ok(Errhandler::Return),
            _ => Err(ErrorClass::Arg),
        }
    }
}

/// The communicators a program holds.
#[derive(Debug)]
pub struct Comms {
    /// By handle: the core's communicator and the error handler.
    live: BTreeMap<c_int, (Comm, Errhandler)>,
}

impl Default for Comms {
    fn default() -> Self {
        Self::new()
    }
}

impl Comms {
    /// `MPI_COMM_WORLD` and `MPI_COMM_SELF`, both `MPI_ERRORS_ARE_FATAL`.
    pub fn new() -> Comms {
        let mut live = BTreeMap::new();
        live.insert(abi::MPI_COMM_WORLD, (kestrel_mpi::WORLD, Errhandler::Fatal));
        live.insert(abi::MPI_COMM_SELF, (kestrel_mpi::SELF, Errhandler::Fatal));
        Comms { live }
    }

    /// The core's communicator behind handle `h`: `Err(Comm)` for `MPI_COMM_NULL`, a freed
    /// communicator or any other value.
    pub fn get(&self, h: c_int) -> Result<Comm, ErrorClass> {
        self.live.get(&h).map(|e| e.0).ok_or(ErrorClass::Comm)
    }

    /// The error handler for an error in a call on `h`: its own, or for a handle that names
    /// no communicator, `MPI_COMM_WORLD`'s (MPI 3.1 §8.3: errors not tied to a valid
    /// communicator go to MPI_COMM_WORLD's handler).
    pub fn errhandler(&self, h: c_int) -> Errhandler {
        self.live
            .get(&h)
            .or_else(|| self.live.get(&abi::MPI_COMM_WORLD))
            .map_or(Errhandler::Fatal, |e| e.1)
    }

    /// `MPI_Comm_set_errhandler`.
    pub fn set_errhandler(&mut self, h: c_int, e: Errhandler) -> Result<(), ErrorClass> {
        let entry = self.live.get_mut(&h).ok_or(ErrorClass::Comm)?;
        entry.1 = e;
        Ok(())
    }

    /// The handle of a communicator the core just made from `parent` (its error handler is
    /// the parent's, MPI 3.1 §8.3.1). `Err(Intern)` if the core's number does not fit a
    /// handle's index.
    pub fn add(&mut self, c: Comm, parent: c_int) -> Result<c_int, ErrorClass> {
        if c.0 > INDEX_MASK {
            return Err(ErrorClass::Intern);
        }
        let h = (COMM_KIND | c.0) as c_int;
        let errh = self.errhandler(parent);
        self.live.insert(h, (c, errh));
        Ok(h)
    }

    /// `Ok` when the core's next communicator number still fits a handle (checked before the
    /// core makes one): `Err(Intern)` once 2^24 were made.
    pub fn room(&self) -> Result<(), ErrorClass> {
        let last = self.live.values().map(|e| e.0 .0).max().unwrap_or(0);
        if last >= INDEX_MASK {
            return Err(ErrorClass::Intern);
        }
        Ok(())
    }

    /// Forgets `h` (`MPI_Comm_free`, after the core freed it): `Err(Comm)` for the
    /// predefined communicators and anything not live.
    pub fn remove(&mut self, h: c_int) -> Result<Comm, ErrorClass> {
        if h == abi::MPI_COMM_WORLD || h == abi::MPI_COMM_SELF {
            return Err(ErrorClass::Comm);
        }
        self.live.remove(&h).map(|e| e.0).ok_or(ErrorClass::Comm)
    }
}

/// The requests a program holds, each with a `T` (what its completion needs): a slab whose
/// slot number is the handle's index. A completed request's slot is free for the next one,
/// and the handle the program held becomes `MPI_REQUEST_NULL` (the calls that complete a
/// request write that).
#[derive(Debug)]
pub struct Requests<T> {
    slots: Vec<Option<T>>,
    /// Free slots, the most recently freed last.
    free: Vec<u32>,
}

impl<T> Default for Requests<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Requests<T> {
    pub const fn new() -> Requests<T> {
        Requests {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// A new request holding `t`; `Err(Intern)` when 2^24 are pending.
    pub fn insert(&mut self, t: T) -> Result<c_int, ErrorClass> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).map_err(|_| ErrorClass::Intern)?;
                if i > INDEX_MASK {
                    return Err(ErrorClass::Intern);
                }
                self.slots.push(None);
                i
            }
        };
        self.slots[i as usize] = Some(t);
        Ok((REQUEST_KIND | i) as c_int)
    }

    fn slot(h: c_int) -> Result<usize, ErrorClass> {
        let h = h as u32;
        if h & !INDEX_MASK != REQUEST_KIND {
            return Err(ErrorClass::Request);
        }
        Ok((h & INDEX_MASK) as usize)
    }

    /// The request behind `h`: `Err(Request)` for a handle that names no pending request
    /// (`MPI_REQUEST_NULL` included; callers that accept it check it first).
    pub fn get(&self, h: c_int) -> Result<&T, ErrorClass> {
        self.slots
            .get(Self::slot(h)?)
            .and_then(Option::as_ref)
            .ok_or(ErrorClass::Request)
    }

    /// `Ok` when one more request fits (`Err(Intern)` when 2^24 are pending), so that a
    /// caller can check before the core makes the request.
    pub fn room(&self) -> Result<(), ErrorClass> {
        if self.free.is_empty() && self.slots.len() > INDEX_MASK as usize {
            return Err(ErrorClass::Intern);
        }
        Ok(())
    }

    /// Removes the request behind `h`, returning what it held.
    pub fn take(&mut self, h: c_int) -> Result<T, ErrorClass> {
        let i = Self::slot(h)?;
        let t = self
            .slots
            .get_mut(i)
            .and_then(Option::take)
            .ok_or(ErrorClass::Request)?;
        self.free.push(i as u32);
        Ok(t)
    }

    /// Pending requests.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn predefined_communicators() {
        let mut c = Comms::new();
        assert_eq!(c.get(abi::MPI_COMM_WORLD), Ok(kestrel_mpi::WORLD));
        assert_eq!(c.get(abi::MPI_COMM_SELF), Ok(kestrel_mpi::SELF));
        assert_eq!(c.get(abi::MPI_COMM_NULL), Err(ErrorClass::Comm));
        assert_eq!(c.get(abi::MPI_INT), Err(ErrorClass::Comm));
        assert_eq!(c.remove(abi::MPI_COMM_WORLD), Err(ErrorClass::Comm));
        assert_eq!(c.remove(abi::MPI_COMM_SELF), Err(ErrorClass::Comm));
        assert_eq!(c.errhandler(abi::MPI_COMM_NULL), Errhandler::Fatal);
        c.set_errhandler(abi::MPI_COMM_WORLD, Errhandler::Return)
            .unwrap();
        // An invalid handle's errors go to WORLD's handler.
        assert_eq!(c.errhandler(abi::MPI_COMM_NULL), Errhandler::Return);
        assert_eq!(c.errhandler(abi::MPI_COMM_SELF), Errhandler::Fatal);
        assert_eq!(
            c.set_errhandler(abi::MPI_COMM_NULL, Errhandler::Return),
            Err(ErrorClass::Comm)
        );
    }

    #[test]
    fn derived_communicators_inherit_the_handler_and_free() {
        let mut c = Comms::new();
        c.set_errhandler(abi::MPI_COMM_WORLD, Errhandler::Return)
            .unwrap();
        let h = c.add(Comm(2), abi::MPI_COMM_WORLD).unwrap();
        assert_eq!(h, 0x4400_0002);
        assert_eq!(c.errhandler(h), Errhandler::Return);
        let g = c.add(Comm(3), abi::MPI_COMM_SELF).unwrap();
        assert_eq!(c.errhandler(g), Errhandler::Fatal);
        assert_eq!(c.remove(h), Ok(Comm(2)));
        assert_eq!(c.get(h), Err(ErrorClass::Comm));
        assert_eq!(c.remove(h), Err(ErrorClass::Comm));
        assert_eq!(c.add(Comm(1 << 24), g), Err(ErrorClass::Intern));
    }

    #[test]
    fn errhandler_handles() {
        assert_eq!(
            Errhandler::from_handle(abi::MPI_ERRORS_RETURN),
            Ok(Errhandler::Return)
        );
        assert_eq!(
            Errhandler::from_handle(abi::MPI_ERRORS_ARE_FATAL),
            Ok(Errhandler::Fatal)
        );
        for h in [abi::MPI_ERRHANDLER_NULL, 0, abi::MPI_COMM_WORLD, -1] {
            assert_eq!(Errhandler::from_handle(h), Err(ErrorClass::Arg));
        }
    }

    #[test]
    fn request_handles() {
        let mut r = Requests::new();
        let a = r.insert("a").unwrap();
        let b = r.insert("b").unwrap();
        assert_eq!(a, 0x6c00_0000);
        assert_eq!(b, 0x6c00_0001);
        assert_eq!(r.get(abi::MPI_REQUEST_NULL), Err(ErrorClass::Request));
        assert_eq!(r.get(abi::MPI_COMM_WORLD), Err(ErrorClass::Request));
        assert_eq!(r.take(a), Ok("a"));
        assert_eq!(r.take(a), Err(ErrorClass::Request));
        assert_eq!(r.len(), 1);
        assert_eq!(r.insert("c"), Ok(a));
        assert_eq!(r.get(0x6c00_0005), Err(ErrorClass::Request));
    }

    proptest! {
        /// Against a map: any sequence of inserts, lookups and removals with any handle values
        /// gives the same answers, and live handles are distinct and of the request kind.
        #[test]
        fn requests_behave_like_a_map(ops in proptest::collection::vec((0u8..3, any::<c_int>(), 0usize..8), 0..200)) {
            let mut r = Requests::new();
            let mut model: BTreeMap<c_int, u32> = BTreeMap::new();
            let mut held: Vec<c_int> = Vec::new();
            for (n, (op, raw, pick)) in ops.into_iter().enumerate() {
                let h = if held.is_empty() || raw % 3 == 0 { raw } else { held[pick % held.len()] };
                match op {
                    0 => {
                        let h = r.insert(n as u32).unwrap();
                        prop_assert!(model.insert(h, n as u32).is_none());
                        prop_assert_eq!(h as u32 >> 24, 0x6c);
                        held.push(h);
                    }
                    1 => prop_assert_eq!(r.get(h).ok().copied(), model.get(&h).copied()),
                    _ => prop_assert_eq!(r.take(h).ok(), model.remove(&h)),
                }
                prop_assert_eq!(r.len(), model.len());
            }
        }

        /// Any handle a program passes either names a communicator or is refused.
        #[test]
        fn any_comm_handle(h in any::<c_int>()) {
            let c = Comms::new();
            let known = h == abi::MPI_COMM_WORLD || h == abi::MPI_COMM_SELF;
            prop_assert_eq!(c.get(h).is_ok(), known);
        }
    }
}
