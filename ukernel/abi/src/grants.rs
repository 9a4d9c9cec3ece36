//! The node's fabric policy: which collective classes and partitions each tenant of the
//! fabric is granted, and how many endpoints each program may hold (issue 18,
//! `docs/adr/0033-fabric-grants.md`). The root task answers [`Request::FabricGrant`]
//! (crate::root::Request::FabricGrant) from it; the fabric service and a VMM's private
//! engine apply the answer (`kestrel_fabric::Fabric::grant`).
//!
//! The policy is the boot-module archive's module [`MODULE`] (`fabric-policy`), text, one
//! statement per line, `#` to the end of a line is a comment:
//!
//! ```text
//! partition NAME CLASSES MEMBER...   # CLASSES: 0, 0+14, or - for none
//! endpoints PROGRAM N                # at most N endpoints for PROGRAM
//! ```
//!
//! A MEMBER is a program's module name (the program and every VM it hosts) or
//! `PROGRAM/N` (VM N of a VMM only). Partitions are numbered in order (at most
//! [`MAX_PARTITIONS`]); a class belongs to the first partition that names it (a later one
//! naming it again loses it: [`problems`] reports it), so tenants of two partitions never
//! meet on a class. Two tenants reach each other (torus, frames, collective point to point)
//! when they share a partition.
//!
//! Without the module the default policy holds, apart by default: partition 0 `vms` with
//! class 0 (bgnet's) holds every VM, partition 1 `native` with class 14 (the MPI layer's)
//! every program without the vCPU right. VMs reach each other (bgnet, the paravirtual NIC),
//! native programs reach each other (MPI), and neither reaches the other: a VM cannot
//! source, receive or flood the native programs' traffic, nor they the VMs'. A native
//! service for VMs (`kestrel-echo`) is put on the VMs' partition by a policy module (see
//! `fabric/policies/`).
//!
//! Quotas: a program with the vCPU right may hold [`VMM_ENDPOINTS`] endpoints, any other
//! [`PROGRAM_ENDPOINTS`], unless an `endpoints` line says otherwise.

/// The module holding the policy.
pub const MODULE: &str = "fabric-policy";
/// Most partitions (the engine's grant has 16 partition bits).
pub const MAX_PARTITIONS: usize = 16;
/// The tenant number of a program itself (not one of its VMs).
pub const TENANT_SELF: u32 = u32::MAX;
/// Default endpoint quota of a program with the vCPU right (a VMM: one per VM).
pub const VMM_ENDPOINTS: u32 = 4;
/// Default endpoint quota of any other program.
pub const PROGRAM_ENDPOINTS: u32 = 2;
/// Default endpoint quota of the Linux personality server (`root.linux=`), which hosts
/// every rank of its jobs (at most 8 ranks a job today, each with an endpoint, and room).
pub const LINUX_ENDPOINTS: u32 = 12;
use kestrel_bgp::coll::{BGNET_CLASS, MPI_CLASS};

/// What one tenant is granted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// Collective classes (bit c = class c).
    pub classes: u16,
    /// Partitions (bit p = partition p).
    pub partitions: u16,
    /// Most endpoints its program may hold.
    pub endpoints: u32,
}

/// A statement of the policy the root task cannot use (reported once at boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem<'a> {
    /// A line that is no statement (its text).
    Syntax(&'a str),
    /// More than [`MAX_PARTITIONS`] partitions: this one is ignored.
    TooMany(&'a str),
    /// Class `class` was already another partition's: partition `name` does not get it.
    ClassTaken { name: &'a str, class: u32 },
}

impl core::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Problem::Syntax(l) => write!(f, "not a policy statement, ignored: \"{l}\""),
            Problem::TooMany(n) => {
                write!(
                    f,
                    "partition {n}: more than {MAX_PARTITIONS} partitions, ignored"
                )
            }
            Problem::ClassTaken { name, class } => write!(
                f,
                "partition {name}: class {class} already belongs to an earlier partition, not granted"
            ),
        }
    }
}

/// One parsed line.
enum Line<'a> {
    Partition {
        name: &'a str,
        classes: Option<u16>,
        members: core::str::SplitAsciiWhitespace<'a>,
    },
    Endpoints(&'a str, u32),
    Blank,
    Bad,
}

fn parse_classes(s: &str) -> Option<u16> {
    if s == "-" {
        return Some(0);
    }
    let mut m = 0u16;
    for c in s.split('+') {
        let c: u32 = c.parse().ok()?;
        if c >= 16 {
            return None;
        }
        m |= 1 << c;
    }
    Some(m)
}

fn parse(raw: &str) -> Line<'_> {
    let line = raw.split('#').next().unwrap_or("").trim();
    let mut w = line.split_ascii_whitespace();
    match w.next() {
        None => Line::Blank,
        Some("partition") => match (w.next(), w.next()) {
            (Some(name), Some(classes)) => Line::Partition {
                name,
                classes: parse_classes(classes),
                members: w,
            },
            _ => Line::Bad,
        },
        Some("endpoints") => match (w.next(), w.next().and_then(|n| n.parse().ok()), w.next()) {
            (Some(p), Some(n), None) => Line::Endpoints(p, n),
            _ => Line::Bad,
        },
        Some(_) => Line::Bad,
    }
}

/// The partitions of `policy` in order, each with the classes it really gets (classes of
/// an earlier partition removed); `report` hears every problem.
fn partitions<'a>(
    policy: &'a str,
    mut report: impl FnMut(Problem<'a>),
    mut each: impl FnMut(usize, u16, core::str::SplitAsciiWhitespace<'a>),
) {
    let mut taken = 0u16;
    let mut n = 0;
    for raw in policy.lines() {
        match parse(raw) {
            Line::Partition {
                name,
                classes: Some(classes),
                members,
            } => {
                if n == MAX_PARTITIONS {
                    report(Problem::TooMany(name));
                    continue;
                }
                for class in 0..16 {
                    if classes & taken & (1 << class) != 0 {
                        report(Problem::ClassTaken { name, class });
                    }
                }
                each(n, classes & !taken, members);
                taken |= classes;
                n += 1;
            }
            Line::Partition { classes: None, .. } | Line::Bad => {
                report(Problem::Syntax(raw.trim()))
            }
            Line::Endpoints(..) | Line::Blank => {}
        }
    }
}

/// Whether `member` names tenant `tenant` of program `program`.
fn names(member: &str, program: &str, tenant: u32) -> bool {
    match member.split_once('/') {
        None => member == program,
        Some((p, n)) => {
            p == program && tenant != TENANT_SELF && n.parse::<u32>().ok() == Some(tenant)
        }
    }
}

/// What tenant `tenant` ([`TENANT_SELF`] or a VM number) of program `program` (with the
/// vCPU right or not) is granted by `policy` (the module's text; `None`: the default
/// policy).
pub fn grant(policy: Option<&str>, program: &str, vcpu_right: bool, tenant: u32) -> Grant {
    let mut g = Grant {
        classes: 0,
        partitions: 0,
        endpoints: if vcpu_right {
            VMM_ENDPOINTS
        } else {
            PROGRAM_ENDPOINTS
        },
    };
    let Some(policy) = policy else {
        (g.classes, g.partitions) = if vcpu_right {
            (1 << BGNET_CLASS, 1)
        } else {
            (1 << MPI_CLASS, 2)
        };
        return g;
    };
    partitions(
        policy,
        |_| {},
        |p, classes, mut members| {
            if members.any(|m| names(m, program, tenant)) {
                g.partitions |= 1 << p;
                g.classes |= classes;
            }
        },
    );
    for raw in policy.lines() {
        if let Line::Endpoints(p, n) = parse(raw) {
            if p == program {
                g.endpoints = n;
            }
        }
    }
    g
}

/// Whether `policy` has an `endpoints` line for `program`.
pub fn sets_quota(policy: Option<&str>, program: &str) -> bool {
    policy.is_some_and(|p| {
        p.lines()
            .any(|l| matches!(parse(l), Line::Endpoints(q, _) if q == program))
    })
}

/// Reports every problem of `policy`.
pub fn problems<'a>(policy: &'a str, report: impl FnMut(Problem<'a>)) {
    partitions(policy, report, |_, _, _| {});
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    const POLICY: &str = "\
# the hostile-device test's node
partition lan 0 kestrel-vmm/1 kestrel-echo   # VM 1 and the echo
partition mpi 14 rank0 rank1
partition jail - kestrel-vmm/0
partition copycat 0+3 kestrel-vmm/2
endpoints rank0 1
";

    #[test]
    fn members_get_their_partitions_classes() {
        let g = |p, v, t| grant(Some(POLICY), p, v, t);
        assert_eq!(
            g("kestrel-vmm", true, 1),
            Grant {
                classes: 1,
                partitions: 1,
                endpoints: VMM_ENDPOINTS
            }
        );
        assert_eq!(
            g("rank0", false, TENANT_SELF),
            Grant {
                classes: 1 << 14,
                partitions: 2,
                endpoints: 1
            }
        );
        assert_eq!(g("kestrel-vmm", true, 0).partitions, 4);
        assert_eq!(g("kestrel-vmm", true, 0).classes, 0);
        // Class 0 was lan's: copycat gets only class 3.
        assert_eq!(g("kestrel-vmm", true, 2).classes, 1 << 3);
        assert!(sets_quota(Some(POLICY), "rank0"));
        assert!(!sets_quota(Some(POLICY), "rank1"));
        assert!(!sets_quota(None, "rank0"));
        // Not named anywhere: nothing; the VMM itself is not its VMs.
        assert_eq!(g("kestrel-vmm", true, 3).partitions, 0);
        assert_eq!(g("kestrel-vmm", true, TENANT_SELF).partitions, 0);
        assert_eq!(g("stranger", false, TENANT_SELF).classes, 0);
    }

    #[test]
    fn problems_are_reported() {
        let mut p = Vec::new();
        problems(
            "partition a 0 x\npartition b 0+1 y\nbogus line\npartition c 99 z\nendpoints q",
            |x| p.push(x),
        );
        assert_eq!(
            p,
            [
                Problem::ClassTaken {
                    name: "b",
                    class: 0
                },
                Problem::Syntax("bogus line"),
                Problem::Syntax("partition c 99 z"),
                Problem::Syntax("endpoints q"),
            ]
        );
        let many: std::string::String = (0..17)
            .map(|i| std::format!("partition p{i} -\n"))
            .collect();
        let mut p = Vec::new();
        problems(&many, |x| p.push(x));
        assert_eq!(p, [Problem::TooMany("p16")]);
    }

    #[test]
    fn the_default_keeps_vms_and_native_programs_apart() {
        let vm = grant(None, "kestrel-vmm", true, 0);
        let vm2 = grant(None, "kestrel-vmm", true, 3);
        let native = grant(None, "rank0", false, TENANT_SELF);
        assert_eq!(vm.classes, 1);
        assert_eq!(native.classes, 1 << 14);
        assert_eq!(vm.partitions & native.partitions, 0, "apart");
        assert_ne!(vm.partitions & vm2.partitions, 0, "VMs reach each other");
        assert_eq!(vm.endpoints, VMM_ENDPOINTS);
        assert_eq!(native.endpoints, PROGRAM_ENDPOINTS);
    }

    #[test]
    fn the_committed_policies_have_no_problems() {
        for text in [
            include_str!("../../../fabric/policies/echo-lan.policy"),
            include_str!("../../../fabric/policies/device-attacker.policy"),
        ] {
            let mut p = Vec::new();
            problems(text, |x| p.push(x));
            assert_eq!(p, [], "{text}");
        }
        let jail = grant(
            Some(include_str!(
                "../../../fabric/policies/device-attacker.policy"
            )),
            "kestrel-vmm",
            true,
            0,
        );
        assert_eq!((jail.classes, jail.partitions), (1 << 1, 1 << 2));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_without_panicking(s in ".{0,200}", p in "[a-z/0-9]{0,12}", t in proptest::prelude::any::<u32>()) {
            let _ = grant(Some(&s), &p, t % 2 == 0, t);
            problems(&s, |_| {});
        }
    }
}
