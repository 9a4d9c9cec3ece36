//! Endpoint quotas (issue 18, finding 6): who holds each endpoint, and whether a program may
//! take one more. The fabric service keeps one [`Holders`]; a program's quota comes from the
//! root task's fabric policy (`kestrel_abi::grants`, `FabricGrant`'s `endpoints`), its
//! number from the same answer. Without quotas one program could hold every endpoint and
//! the next VM would not start.

use crate::{EpId, MAX_ENDPOINTS};

/// A program that already holds its quota of endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaFull {
    /// Endpoints it holds.
    pub held: u32,
}

/// The program (a number the root task gives, never 0) holding each endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    program: [u32; MAX_ENDPOINTS],
}

impl Holders {
    /// Nobody holds anything.
    pub const fn new() -> Holders {
        Holders {
            program: [0; MAX_ENDPOINTS],
        }
    }

    /// Endpoints `program` holds.
    pub fn held(&self, program: u32) -> u32 {
        self.program.iter().filter(|&&p| p == program).count() as u32
    }

    /// Whether `program` may take one more endpoint under its quota `quota`.
    pub fn admit(&self, program: u32, quota: u32) -> Result<(), QuotaFull> {
        let held = self.held(program);
        if held >= quota {
            Err(QuotaFull { held })
        } else {
            Ok(())
        }
    }

    /// `program` now holds `ep`.
    pub fn hold(&mut self, ep: EpId, program: u32) {
        if let Some(p) = self.program.get_mut(usize::from(ep.0)) {
            *p = program;
        }
    }

    /// `ep` is free again.
    pub fn release(&mut self, ep: EpId) {
        self.hold(ep, 0);
    }

    /// The program holding `ep` (0: nobody).
    pub fn program(&self, ep: EpId) -> u32 {
        self.program.get(usize::from(ep.0)).copied().unwrap_or(0)
    }
}
