//! Collectives (ADR 0035). On WORLD, the barrier and integer reductions run on the
//! collective network's combining ALU (class [`CLASS`], VC [`VC`]); everything else runs
//! in software over point-to-point messages in the communicator's collective context
//! (`ctx + 1`), so it never matches a user's receive. Software reductions combine along
//! a fixed binomial tree rooted at rank 0 (or the root), lower ranks' partial results on
//! the left, and an allreduce broadcasts rank 0's result: every rank gets the same bits,
//! and the same inputs give the same bits on every run.

use crate::dtype::AluPlan;
use crate::{fab, Comm, Datatype, Error, Mpi, Op, Request, CLASS, VC};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Write;
use kestrel_bgp::coll as bgpcoll;
use kestrel_fabric::FabricApi;
use kestrel_spi::tree;

const T_BARRIER: i32 = 1;
const T_BCAST: i32 = 2;
const T_REDUCE: i32 = 3;
const T_GATHER: i32 = 4;
const T_SCATTER: i32 = 5;
const T_ALLTOALL: i32 = 6;
/// 64-bit operands in one collective packet.
const ALU_VALUES: usize = crate::ALU_SLOTS;

impl<P: FabricApi> Mpi<P> {
    fn csend(&mut self, c: Comm, dest: i32, tag: i32, data: &[u8]) -> Result<Request, Error> {
        self.isend_full(c, true, dest, tag, data, false, false)
    }

    fn crecv(&mut self, c: Comm, src: i32, tag: i32, buf: &mut [u8]) -> Result<(), Error> {
        let r = self.irecv_full(c, true, src, tag, buf.len(), None)?;
        let (st, d) = self.wait(r)?;
        if let Some(e) = st.error {
            return Err(e);
        }
        if d.len() != buf.len() {
            return Err(Error::Count);
        }
        buf.copy_from_slice(&d);
        Ok(())
    }

    fn root_ok(&self, c: Comm, root: i32) -> Result<(i32, i32), Error> {
        let n = self.size(c)?;
        let me = self.rank(c)?;
        if !(0..n).contains(&root) {
            return Err(Error::Root);
        }
        Ok((n, me))
    }

    /// One ALU reduction of up to 32 operands on WORLD.
    fn alu_round(&mut self, opcode: u32, vals: &mut [u64]) -> Result<(), Error> {
        self.alu_round_in("MPI_Allreduce", opcode, vals)
    }

    /// One ALU reduction of up to 32 operands among every endpoint sourcing [`CLASS`];
    /// `call` names the wait in a deadlock report.
    pub(crate) fn alu_round_in(
        &mut self,
        call: &str,
        opcode: u32,
        vals: &mut [u64],
    ) -> Result<(), Error> {
        let mut payload = [0u8; 256];
        for (i, v) in vals.iter().enumerate() {
            payload[8 * i..8 * i + 8].copy_from_slice(&v.to_be_bytes());
        }
        let ep = self.dma.ep;
        let hdr = tree::reduce(CLASS, opcode, 8);
        // Nothing on the VC can be this reduction's result before we contribute.
        let mut junk = [0u8; 256];
        while self
            .p
            .tree_receive(ep, VC, &mut junk)
            .map_err(fab)?
            .is_some()
        {
            self.stats.ignored += 1;
        }
        self.p.tree_inject(ep, VC, hdr, &payload).map_err(fab)?;
        let fields = bgpcoll::HDR_CLASS_MASK << bgpcoll::HDR_CLASS_SHIFT
            | bgpcoll::HDR_P2P
            | bgpcoll::HDR_OP_MASK << bgpcoll::HDR_OP_SHIFT
            | bgpcoll::HDR_OPSIZE_MASK << bgpcoll::HDR_OPSIZE_SHIFT;
        let mut got = false;
        self.in_alu = true;
        let r = self.block(
            call,
            |_, s| {
                let _ = write!(s, "ALU reduction on WORLD, opcode {opcode}");
            },
            |m| {
                // Only a reduction result of this operation counts: anyone granted the
                // class may broadcast on it at any time.
                while let Some(h) = m.p.tree_receive(ep, VC, &mut payload).map_err(fab)? {
                    if h & fields == hdr & fields {
                        got = true;
                        m.last_progress = m.now();
                        return Ok(true);
                    }
                    m.stats.ignored += 1;
                }
                Ok(false)
            },
        );
        self.in_alu = false;
        r?;
        debug_assert!(got);
        for (i, v) in vals.iter_mut().enumerate() {
            *v = u64::from_be_bytes(payload[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        }
        Ok(())
    }

    fn alu_allreduce(&mut self, plan: AluPlan, dt: Datatype, buf: &mut [u8]) -> Result<(), Error> {
        let n = dt.size();
        for chunk in buf.chunks_mut(n * ALU_VALUES) {
            let mut vals: Vec<u64> = chunk.chunks(n).map(|e| plan.encode(e)).collect();
            self.alu_round(plan.opcode, &mut vals)?;
            for (e, v) in chunk.chunks_mut(n).zip(vals) {
                plan.decode(v, e);
            }
        }
        Ok(())
    }

    /// MPI_Barrier.
    pub fn barrier(&mut self, c: Comm) -> Result<(), Error> {
        if self.is_world(c) {
            let mut v = [0u64];
            return self.alu_round(bgpcoll::OP_OR, &mut v);
        }
        let n = self.size(c)?;
        let me = self.rank(c)?;
        // Fan in to rank 0, fan out from it.
        if me == 0 {
            for r in 1..n {
                self.crecv(c, r, T_BARRIER, &mut [])?;
            }
            let rs = (1..n)
                .map(|r| self.csend(c, r, T_BARRIER, &[]))
                .collect::<Result<Vec<_>, _>>()?;
            self.waitall(&rs)?;
        } else {
            let r = self.csend(c, 0, T_BARRIER, &[])?;
            self.wait(r)?;
            self.crecv(c, 0, T_BARRIER, &mut [])?;
        }
        Ok(())
    }

    /// MPI_Bcast of `buf` from `root` (binomial tree).
    pub fn bcast(&mut self, c: Comm, buf: &mut [u8], root: i32) -> Result<(), Error> {
        let (n, me) = self.root_ok(c, root)?;
        let vr = (me - root + n) % n;
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                let from = (vr - mask + root) % n;
                self.crecv(c, from, T_BCAST, buf)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        let mut rs = Vec::new();
        while mask > 0 {
            if vr + mask < n {
                rs.push(self.csend(c, (vr + mask + root) % n, T_BCAST, buf)?);
            }
            mask >>= 1;
        }
        self.waitall(&rs)?;
        Ok(())
    }

    /// Software reduction to `root` along the binomial tree: `acc` holds this rank's
    /// contribution and, at the root, ends as the result.
    fn tree_reduce(
        &mut self,
        c: Comm,
        acc: &mut [u8],
        dt: Datatype,
        op: Op,
        root: i32,
    ) -> Result<(), Error> {
        let (n, me) = self.root_ok(c, root)?;
        let vr = (me - root + n) % n;
        let mut tmp = vec![0u8; acc.len()];
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                let r = self.csend(c, (vr - mask + root) % n, T_REDUCE, acc)?;
                self.wait(r)?;
                break;
            }
            if vr + mask < n {
                self.crecv(c, (vr + mask + root) % n, T_REDUCE, &mut tmp)?;
                // Lower ranks' partial on the left: a fixed order.
                crate::combine(op, dt, acc, &tmp)?;
            }
            mask <<= 1;
        }
        Ok(())
    }

    fn check_red(send: &[u8], recv_len: usize, dt: Datatype, op: Op) -> Result<(), Error> {
        if !op.valid_on(dt) {
            return Err(Error::Op);
        }
        if !send.len().is_multiple_of(dt.size()) || recv_len != send.len() {
            return Err(Error::Count);
        }
        Ok(())
    }

    /// MPI_Allreduce of `send` into `recv` (same length, whole elements of `dt`).
    pub fn allreduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
    ) -> Result<(), Error> {
        Self::check_red(send, recv.len(), dt, op)?;
        recv.copy_from_slice(send);
        if self.is_world(c) {
            if let Some(plan) = AluPlan::new(op, dt) {
                return self.alu_allreduce(plan, dt, recv);
            }
        }
        self.tree_reduce(c, recv, dt, op, 0)?;
        self.bcast(c, recv, 0)
    }

    /// MPI_Reduce: `recv` is used at the root only (other ranks may pass an empty one).
    pub fn reduce(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        dt: Datatype,
        op: Op,
        root: i32,
    ) -> Result<(), Error> {
        let (_, me) = self.root_ok(c, root)?;
        let at_root = me == root;
        Self::check_red(send, if at_root { recv.len() } else { send.len() }, dt, op)?;
        if self.is_world(c) {
            if let Some(plan) = AluPlan::new(op, dt) {
                let mut tmp = send.to_vec();
                self.alu_allreduce(plan, dt, &mut tmp)?;
                if at_root {
                    recv.copy_from_slice(&tmp);
                }
                return Ok(());
            }
        }
        let mut acc = send.to_vec();
        self.tree_reduce(c, &mut acc, dt, op, root)?;
        if at_root {
            recv.copy_from_slice(&acc);
        }
        Ok(())
    }

    /// MPI_Gather: each rank's `send` (same length everywhere) into `recv` at the root,
    /// rank order.
    pub fn gather(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        root: i32,
    ) -> Result<(), Error> {
        let (n, me) = self.root_ok(c, root)?;
        let k = send.len();
        if me != root {
            let r = self.csend(c, root, T_GATHER, send)?;
            self.wait(r)?;
            return Ok(());
        }
        if recv.len() != k * n as usize {
            return Err(Error::Count);
        }
        let rs = (0..n)
            .filter(|&r| r != me)
            .map(|r| self.irecv_full(c, true, r, T_GATHER, k, None))
            .collect::<Result<Vec<_>, _>>()?;
        let got = self.waitall(&rs)?;
        recv[me as usize * k..][..k].copy_from_slice(send);
        for (st, d) in got {
            if st.error.is_some() || d.len() != k {
                return Err(st.error.unwrap_or(Error::Count));
            }
            recv[st.source as usize * k..][..k].copy_from_slice(&d);
        }
        Ok(())
    }

    /// MPI_Scatter: block `r` of the root's `send` to rank `r`'s `recv`.
    pub fn scatter(
        &mut self,
        c: Comm,
        send: &[u8],
        recv: &mut [u8],
        root: i32,
    ) -> Result<(), Error> {
        let (n, me) = self.root_ok(c, root)?;
        let k = recv.len();
        if me != root {
            return self.crecv(c, root, T_SCATTER, recv);
        }
        if send.len() != k * n as usize {
            return Err(Error::Count);
        }
        let rs = (0..n)
            .filter(|&r| r != me)
            .map(|r| self.csend(c, r, T_SCATTER, &send[r as usize * k..][..k]))
            .collect::<Result<Vec<_>, _>>()?;
        recv.copy_from_slice(&send[me as usize * k..][..k]);
        self.waitall(&rs)?;
        Ok(())
    }

    /// MPI_Allgather: gather to rank 0, then broadcast.
    pub fn allgather(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let n = self.size(c)? as usize;
        if recv.len() != send.len() * n {
            return Err(Error::Count);
        }
        self.gather(c, send, recv, 0)?;
        self.bcast(c, recv, 0)
    }

    /// MPI_Alltoall: block `r` of `send` to rank `r`, block `r` of `recv` from it.
    pub fn alltoall(&mut self, c: Comm, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let n = self.size(c)? as usize;
        let me = self.rank(c)? as usize;
        if send.len() != recv.len() || !send.len().is_multiple_of(n.max(1)) {
            return Err(Error::Count);
        }
        let k = send.len() / n;
        let mut rs = Vec::new();
        for r in 0..n {
            if r != me {
                rs.push(self.irecv_full(c, true, r as i32, T_ALLTOALL, k, None)?);
            }
        }
        let mut ss = Vec::new();
        for r in 0..n {
            if r != me {
                ss.push(self.csend(c, r as i32, T_ALLTOALL, &send[r * k..][..k])?);
            }
        }
        recv[me * k..][..k].copy_from_slice(&send[me * k..][..k]);
        for (st, d) in self.waitall(&rs)? {
            if st.error.is_some() || d.len() != k {
                return Err(st.error.unwrap_or(Error::Count));
            }
            recv[st.source as usize * k..][..k].copy_from_slice(&d);
        }
        self.waitall(&ss)?;
        Ok(())
    }
}
