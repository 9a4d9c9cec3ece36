//! Host tests of the device attacker (`devices`): blocks keep every invariant of the classic
//! generator and put every device access in a device window; plans store only into the plan
//! area or the windows and write only documented interconnect DCRs; the same seed gives the
//! same blocks and plans; every device class and plan kind appears.

use super::devices::*;
use super::tests::{check_with, BASE, LAYOUT};
use super::*;
use proptest::prelude::{any, prop_assert, proptest};

const DEVICES: Layout = Layout {
    devices: Some(DeviceLayout {
        bic: 0xD000_0000,
        vc0: 0xD001_0000,
        vc1: 0xD002_0000,
        dma: 0xD003_0000,
        virtio: 0xE000_0000,
        area: 0x01F0_0000,
    }),
    ..LAYOUT
};

/// Every step of `plan` stays where plans may go.
fn plan_ok(plan: &Plan) {
    assert!(plan.len <= PLAN_STEPS);
    for s in &plan.steps[..plan.len] {
        match *s {
            Step::Store { ea, .. } => {
                assert!(
                    plan_may_store(&DEVICES, ea),
                    "{:?} stores to {ea:#x}",
                    plan.kind
                );
                assert_eq!(ea & 3, 0, "unaligned plan store at {ea:#x}");
            }
            Step::Dcr { dcr, .. } => assert!((DCR_FIRST..=DCR_LAST).contains(&dcr), "dcr {dcr:#x}"),
        }
    }
}

#[test]
fn device_blocks_keep_the_invariants() {
    for seed in [0, 1, 42, 0xdead_beef] {
        check_with(&DEVICES, seed, 5000);
    }
}

#[test]
fn classic_layout_has_no_device_ops() {
    let mut rng = Rng::new(5);
    let mut b = Block::default();
    for _ in 0..3000 {
        generate(&mut rng, &LAYOUT, BASE, &mut b);
        assert_eq!(
            b.ops[Class::Mmio as usize]
                + b.ops[Class::BgpDcr as usize]
                + b.ops[Class::Doorbell as usize],
            0
        );
    }
}

#[test]
fn every_device_class_and_plan_kind_appears() {
    let mut rng = Rng::new(13);
    let mut b = Block::default();
    let mut ops = [0u32; CLASSES];
    for _ in 0..3000 {
        generate(&mut rng, &DEVICES, BASE, &mut b);
        for (o, n) in ops.iter_mut().zip(b.ops) {
            *o += n;
        }
    }
    assert!(ops.iter().all(|&n| n > 0), "{ops:?}");
    let mut kinds = [0u32; 4];
    let mut plan = Plan::default();
    for _ in 0..200 {
        burst(&mut rng, &DEVICES.devices.unwrap(), &mut plan);
        plan_ok(&plan);
        assert!(plan.items > 0);
        kinds[plan.kind as usize] += 1;
    }
    assert!(kinds[1..].iter().all(|&n| n > 0), "{kinds:?}");
}

#[test]
fn route_writes_source_class_14_and_every_class() {
    // The DCR class must, among others, make this VM source class 14 and every class.
    let mut rng = Rng::new(21);
    let mut b = Block::default();
    let (mut all, mut c14) = (false, false);
    for _ in 0..5000 {
        generate(&mut rng, &DEVICES, BASE, &mut b);
        for i in 4..b.len {
            let w = b.words[i];
            // mtdcrx rA,rS after lis/ori rS (value), lis/ori rA (DCR number).
            if w >> 26 == 31 && (w >> 1) & 0x3ff == 387 {
                let word = |j: usize| ((b.words[j] & 0xffff) << 16) | (b.words[j + 1] & 0xffff);
                let (v, n) = (word(i - 4), word(i - 2));
                if n == 0xC07 {
                    c14 |= v & kestrel_bgp::coll::RDR_LO_SRCL != 0;
                    all |= v & 0x0003_0003 == 0x0003_0003;
                }
            }
        }
    }
    assert!(all && c14, "every class: {all}, class 14: {c14}");
}

proptest! {
    #[test]
    fn device_invariants_hold_for_any_seed(seed in any::<u64>()) {
        check_with(&DEVICES, seed, 200);
    }

    #[test]
    fn plans_stay_in_the_area_and_windows(seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let mut plan = Plan::default();
        setup(&mut rng, 32 << 20, &mut plan);
        plan_ok(&plan);
        for _ in 0..8 {
            burst(&mut rng, &DEVICES.devices.unwrap(), &mut plan);
            plan_ok(&plan);
            prop_assert!(plan.len < PLAN_STEPS, "a plan filled up: {:?}", plan.kind);
        }
    }

    #[test]
    fn same_seed_same_plans(seed in any::<u64>()) {
        let (mut a, mut b) = (Rng::new(seed), Rng::new(seed));
        let (mut x, mut y) = (Plan::default(), Plan::default());
        burst(&mut a, &DEVICES.devices.unwrap(), &mut x);
        burst(&mut b, &DEVICES.devices.unwrap(), &mut y);
        prop_assert!(x.steps[..x.len] == y.steps[..y.len]);
    }
}
