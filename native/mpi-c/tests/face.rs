//! The C face ([`Face`]) over the engine with 8 ranks on threads: every call with the
//! arguments a C program passes (handles, mpi.h's rank and tag constants), checked the way
//! tests/mpi/*.c check the library on the target, plus what those programs cannot see
//! (refused handles, the pair types' wire format, the deadlock report).

mod common;

use common::{job, Shared};
use kestrel_mpi_c::abi;
use kestrel_mpi_c::args;
use kestrel_mpi_c::datatype::Datatype;
use kestrel_mpi_c::error::ErrorClass;
use kestrel_mpi_c::face::{Face, RecvBuf};
use kestrel_mpi_c::op::{self, Op};
use kestrel_mpi_c::reduce::reduce_local;

const N: u32 = 8;
const WORLD: i32 = abi::MPI_COMM_WORLD;

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn to_ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// `$e` (a call on face `$f`), or a panic that says what the core saw (a deadlock's report).
macro_rules! ok {
    ($f:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => panic!(
                "{}: {e:?} ({:?}: {:?})",
                stringify!($e),
                $f.take_core_error(),
                $f.core().deadlock_report()
            ),
        }
    };
}

/// What collectives.c does on one communicator: barrier separation, bcast, gather (and in
/// place), scatter, allgather (and in place), alltoall.
fn collectives_on(f: &mut Face<Shared>, comm: i32) -> usize {
    let rank = ok!(f, f.rank(comm));
    let size = ok!(f, f.size(comm));
    let mut bad = 0;
    for round in 0..5 {
        let early = ok!(f, f.iprobe(comm, abi::MPI_ANY_SOURCE, 600 + round));
        bad += usize::from(early.is_some());
        ok!(f, f.barrier(comm));
        let v = ints(&[rank * 10 + round]);
        ok!(
            f,
            f.send(
                comm,
                (rank + 1) % size,
                600 + round,
                Datatype::Int,
                &v,
                false,
            )
        );
        let mut got = [0u8; 4];
        let left = (rank + size - 1) % size;
        let st = ok!(f, f.recv(comm, left, 600 + round, Datatype::Int, &mut got));
        bad += usize::from(to_ints(&got) != [left * 10 + round] || st.MPI_SOURCE != left);
    }
    for root in 0..size {
        let mut a = if rank == root {
            ints(&[root * 100, root * 100 + 1])
        } else {
            vec![0; 8]
        };
        ok!(f, f.bcast(comm, &mut a, root));
        bad += usize::from(to_ints(&a) != [root * 100, root * 100 + 1]);
        let mine = ints(&[rank * 2 + root, rank * 2 + root + 1]);
        let mut all = if rank == root {
            vec![0u8; 8 * size as usize]
        } else {
            Vec::new()
        };
        ok!(f, f.gather(comm, Some(&mine), &mut all, root));
        if rank == root {
            let want: Vec<i32> = (0..size)
                .flat_map(|i| [i * 2 + root, i * 2 + root + 1])
                .collect();
            bad += usize::from(to_ints(&all) != want);
            // In place: the root's block is in the receive buffer already.
            all.fill(0xff);
            all[root as usize * 8..][..8].copy_from_slice(&ints(&[7, 8]));
            ok!(f, f.gather(comm, None, &mut all, root));
            bad += usize::from(to_ints(&all[root as usize * 8..][..8]) != [7, 8]);
        } else {
            ok!(f, f.gather(comm, Some(&mine), &mut [], root));
        }
        let src: Vec<u8> = if rank == root {
            ints(&(0..3 * size).map(|i| root * 1000 + i).collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        let mut part = [0u8; 12];
        ok!(f, f.scatter(comm, &src, Some(&mut part), root));
        bad += usize::from(
            to_ints(&part)
                != [
                    root * 1000 + rank * 3,
                    root * 1000 + rank * 3 + 1,
                    root * 1000 + rank * 3 + 2,
                ],
        );
    }
    let mut all = vec![0u8; 4 * size as usize];
    ok!(f, f.allgather(comm, Some(&ints(&[rank * rank])), &mut all));
    bad += usize::from(to_ints(&all) != (0..size).map(|i| i * i).collect::<Vec<_>>());
    all[rank as usize * 4..][..4].copy_from_slice(&ints(&[rank + 500]));
    ok!(f, f.allgather(comm, None, &mut all));
    bad += usize::from(to_ints(&all) != (0..size).map(|i| i + 500).collect::<Vec<_>>());
    let send = ints(&(0..size).map(|i| rank * 100 + i).collect::<Vec<_>>());
    let mut recv = vec![0u8; send.len()];
    ok!(f, f.alltoall(comm, Some(&send), &mut recv));
    bad += usize::from(to_ints(&recv) != (0..size).map(|i| i * 100 + rank).collect::<Vec<_>>());
    bad
}

#[test]
fn collectives_on_world_a_dup_and_a_split() {
    let out = job(N, 20_000, |f: &mut Face<Shared>| {
        let me = ok!(f, f.rank(WORLD));
        let mut bad = collectives_on(f, WORLD);
        let dup = ok!(f, f.comm_dup(WORLD));
        assert_eq!(dup, 0x4400_0002);
        assert_eq!(ok!(f, f.rank(dup)), me);
        bad += collectives_on(f, dup);
        ok!(f, f.comm_free(dup));
        assert_eq!(f.comm(dup), Err(ErrorClass::Comm));
        let half = ok!(f, f.comm_split(WORLD, me % 2, -me));
        assert_eq!(ok!(f, f.size(half)), 4);
        assert_eq!(ok!(f, f.rank(half)), (7 - me) / 2);
        let mut sum = [0u8; 4];
        ok!(
            f,
            f.allreduce(
                half,
                Some(&ints(&[me])),
                &mut sum,
                1,
                Datatype::Int,
                Op::Sum,
            )
        );
        assert_eq!(to_ints(&sum), [if me % 2 == 1 { 16 } else { 12 }]);
        bad += collectives_on(f, half);
        ok!(f, f.comm_free(half));
        let none = ok!(
            f,
            f.comm_split(WORLD, if me < 2 { 0 } else { abi::MPI_UNDEFINED }, 0)
        );
        assert_eq!(none == abi::MPI_COMM_NULL, me >= 2);
        assert_eq!(f.comm_free(WORLD), Err(ErrorClass::Comm));
        bad
    });
    assert_eq!(out, vec![0; N as usize]);
}

/// A receive posted with `MPI_Irecv` into `buf`, as the C layer records it.
fn into(buf: &[u8], dt: Datatype) -> RecvBuf {
    RecvBuf {
        addr: buf.as_ptr() as usize,
        len: buf.len(),
        datatype: dt,
    }
}

#[test]
fn point_to_point_with_mpi_h_numbers() {
    job(N, 20_000, |f: &mut Face<Shared>| {
        let me = ok!(f, f.rank(WORLD));
        let partner = me ^ 1;
        // Wildcards (mpi.h's MPI_ANY_SOURCE is -2, MPI_ANY_TAG -1) and the status.
        if me % 2 == 0 {
            ok!(
                f,
                f.send(
                    WORLD,
                    partner,
                    40 + me,
                    Datatype::Int,
                    &ints(&[me; 3]),
                    false,
                )
            );
        } else {
            let mut buf = [0u8; 16];
            let st = ok!(
                f,
                f.recv(
                    WORLD,
                    abi::MPI_ANY_SOURCE,
                    abi::MPI_ANY_TAG,
                    Datatype::Int,
                    &mut buf,
                )
            );
            assert_eq!((st.MPI_SOURCE, st.MPI_TAG), (partner, 40 + partner));
            assert_eq!(st.kestrel_count, 12);
            assert_eq!(st.MPI_ERROR, abi::MPI_SUCCESS);
            assert_eq!(to_ints(&buf[..12]), [partner; 3]);
        }
        // MPI_PROC_NULL (-1 in mpi.h) completes at once with its status.
        ok!(
            f,
            f.send(WORLD, abi::MPI_PROC_NULL, 1, Datatype::Int, &[0; 4], false)
        );
        let st = ok!(
            f,
            f.recv(WORLD, abi::MPI_PROC_NULL, 1, Datatype::Int, &mut [0; 4])
        );
        assert_eq!(
            (st.MPI_SOURCE, st.MPI_TAG, st.kestrel_count),
            (abi::MPI_PROC_NULL, abi::MPI_ANY_TAG, 0)
        );
        // A pair type travels without its padding: 3 MPI_DOUBLE_INT are 36 bytes on the
        // wire, received as MPI_BYTE or unpacked into the receiver's structs.
        let mut pairs = vec![0xeeu8; 48];
        for i in 0..3 {
            pairs[16 * i..16 * i + 8].copy_from_slice(&(i as f64 + 0.5).to_ne_bytes());
            pairs[16 * i + 8..16 * i + 12].copy_from_slice(&(me * 10 + i as i32).to_ne_bytes());
        }
        ok!(
            f,
            f.send(WORLD, partner, 7, Datatype::DoubleInt, &pairs, false)
        );
        ok!(
            f,
            f.send(WORLD, partner, 8, Datatype::DoubleInt, &pairs, false)
        );
        let mut raw = [0u8; 64];
        let st = ok!(f, f.recv(WORLD, partner, 7, Datatype::Byte, &mut raw));
        assert_eq!(st.kestrel_count, 36);
        let mut back = vec![0x11u8; 48];
        let st = ok!(f, f.recv(WORLD, partner, 8, Datatype::DoubleInt, &mut back));
        assert_eq!(st.kestrel_count, 36);
        for i in 0..3 {
            let e = &back[16 * i..16 * i + 16];
            assert_eq!(
                f64::from_ne_bytes(e[..8].try_into().unwrap()),
                i as f64 + 0.5
            );
            assert_eq!(
                i32::from_ne_bytes(e[8..12].try_into().unwrap()),
                partner * 10 + i as i32
            );
            assert_eq!(&e[12..], &[0x11; 4], "padding untouched");
        }
        // A synchronous send returns once the receive matched.
        if me % 2 == 0 {
            ok!(
                f,
                f.send(WORLD, partner, 10, Datatype::Int, &ints(&[me]), true)
            );
        } else {
            let mut v = [0u8; 4];
            ok!(f, f.recv(WORLD, partner, 10, Datatype::Int, &mut v));
            assert_eq!(to_ints(&v), [partner]);
        }
        // Truncation: the status says so, and the first bytes are there.
        ok!(
            f,
            f.send(
                WORLD,
                partner,
                9,
                Datatype::Int,
                &ints(&[1, 2, 3, 4]),
                false,
            )
        );
        let mut small = [0u8; 8];
        let st = ok!(f, f.recv(WORLD, partner, 9, Datatype::Int, &mut small));
        assert_eq!(st.MPI_ERROR, abi::MPI_ERR_TRUNCATE);
        assert_eq!(args::status_result(&st), Err(ErrorClass::Truncate));
        assert_eq!(to_ints(&small), [1, 2]);
        // Sendrecv around the ring, and probes.
        let right = (me + 1) % 8;
        let left = (me + 7) % 8;
        let mut got = [0u8; 4];
        let st = ok!(
            f,
            f.sendrecv(
                WORLD,
                &ints(&[me]),
                Datatype::Int,
                right,
                3,
                &mut got,
                Datatype::Int,
                left,
                3,
            )
        );
        assert_eq!((to_ints(&got)[0], st.MPI_SOURCE), (left, left));
        ok!(f, f.send(WORLD, right, 21, Datatype::Char, b"hello", false));
        let st = ok!(f, f.probe(WORLD, abi::MPI_ANY_SOURCE, 21));
        assert_eq!((st.MPI_SOURCE, st.kestrel_count), (left, 5));
        assert!(ok!(f, f.iprobe(WORLD, abi::MPI_ANY_SOURCE, 22)).is_none());
        let mut text = [0u8; 5];
        ok!(f, f.recv(WORLD, left, 21, Datatype::Char, &mut text));
        assert_eq!(&text, b"hello");
        ok!(f, f.barrier(WORLD));
    });
}

#[test]
fn requests_complete_in_any_order() {
    job(N, 20_000, |f: &mut Face<Shared>| {
        let me = ok!(f, f.rank(WORLD));
        let bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 16]).collect();
        let mut reqs: Vec<i32> = (0..8)
            .map(|r| {
                ok!(
                    f,
                    f.irecv(WORLD, r, 1, into(&bufs[r as usize], Datatype::Int))
                )
            })
            .collect();
        for r in 0..8 {
            let data = ints(&[1000 * me + r; 4]);
            reqs.push(ok!(f, f.isend(WORLD, r, 1, Datatype::Int, &data, false)));
        }
        assert!(reqs.iter().all(|&h| h as u32 >> 24 == 0x6c));
        // A handle twice in one call, or a handle that is no request, is refused.
        assert_eq!(
            f.waitall(&[reqs[0], reqs[0]]).err(),
            Some(ErrorClass::Request)
        );
        assert_eq!(f.wait(abi::MPI_COMM_WORLD).err(), Some(ErrorClass::Request));
        // Wait in reverse order; each receive's data comes with its completion.
        for (i, &h) in reqs.iter().enumerate().rev() {
            let c = ok!(f, f.wait(h)).unwrap();
            if i < 8 {
                let rb = c.recv.unwrap();
                assert_eq!(rb, into(&bufs[i], Datatype::Int));
                assert_eq!(to_ints(&c.data), [1000 * i as i32 + me; 4]);
                assert_eq!((c.status.MPI_SOURCE, c.status.MPI_TAG), (i as i32, 1));
            } else {
                assert!(c.recv.is_none());
            }
            assert_eq!(f.wait(h).err(), Some(ErrorClass::Request), "freed");
        }
        assert!(ok!(f, f.wait(abi::MPI_REQUEST_NULL)).is_none());
        ok!(f, f.barrier(WORLD));
        // Waitall and Testall with null requests among them; Waitany's order.
        let b = vec![0u8; 4];
        let r = ok!(
            f,
            f.irecv(WORLD, abi::MPI_ANY_SOURCE, 2, into(&b, Datatype::Int))
        );
        let s = ok!(
            f,
            f.isend(WORLD, (me + 1) % 8, 2, Datatype::Int, &ints(&[me]), false)
        );
        let set = [abi::MPI_REQUEST_NULL, r, s];
        let done = loop {
            if let Some(done) = ok!(f, f.testall(&set)) {
                break done;
            }
        };
        assert!(done[0].is_none());
        assert_eq!(done[1].as_ref().unwrap().status.MPI_SOURCE, (me + 7) % 8);
        assert!(ok!(f, f.waitany(&[abi::MPI_REQUEST_NULL; 3])).is_none());
        let r2 = ok!(f, f.irecv(WORLD, (me + 7) % 8, 3, into(&b, Datatype::Int)));
        ok!(
            f,
            f.send(WORLD, (me + 1) % 8, 3, Datatype::Int, &ints(&[me]), false)
        );
        let (i, c) = ok!(f, f.waitany(&[abi::MPI_REQUEST_NULL, r2])).unwrap();
        assert_eq!((i, to_ints(&c.data)[0]), (1, (me + 7) % 8));
        ok!(f, f.barrier(WORLD));
    });
}

/// Element `i` of rank `r` for datatype `dt`: a small value (0 to 3; 0 or 1 for C_BOOL) that
/// every type holds exactly, and for a pair type the index `10 r + i`.
fn element(dt: Datatype, r: i32, i: usize) -> Vec<u8> {
    extern "C" {
        fn kestrel_mpi_ldouble_from_double(value: f64, out: *mut core::ffi::c_void);
    }
    let v = if dt == Datatype::CBool {
        i64::from(!(r as usize + i).is_multiple_of(3))
    } else {
        ((r as usize + i) % 4) as i64
    };
    let mut e = vec![0u8; dt.extent()];
    let width = dt.size() - if dt.index_offset().is_some() { 4 } else { 0 };
    let value: Vec<u8> = match dt {
        Datatype::Float | Datatype::FloatInt => (v as f32).to_ne_bytes().to_vec(),
        Datatype::Double | Datatype::DoubleInt => (v as f64).to_ne_bytes().to_vec(),
        Datatype::LongDouble | Datatype::LongDoubleInt => {
            let mut b = vec![0u8; width];
            // SAFETY: the C conversion writes sizeof(long double) bytes: `width`.
            unsafe { kestrel_mpi_ldouble_from_double(v as f64, b.as_mut_ptr().cast()) };
            b
        }
        _ => {
            let b = v.to_ne_bytes();
            if cfg!(target_endian = "little") {
                b[..width].to_vec()
            } else {
                b[8 - width..].to_vec()
            }
        }
    };
    e[..width].copy_from_slice(&value);
    if let Some(at) = dt.index_offset() {
        e[at..at + 4].copy_from_slice(&(r * 10 + i as i32).to_ne_bytes());
    }
    e
}

#[test]
fn every_reduction_against_a_serial_fold() {
    const COUNT: usize = 3;
    let out = job(N, 60_000, |f: &mut Face<Shared>| {
        let me = ok!(f, f.rank(WORLD));
        let mut checked = 0;
        for (k, dt) in kestrel_mpi_c::datatype::ALL.iter().copied().enumerate() {
            for o in op::ALL.iter().copied().filter(|o| o.accepts(dt)) {
                let buf =
                    |r: i32| -> Vec<u8> { (0..COUNT).flat_map(|i| element(dt, r, i)).collect() };
                let mut want = buf(0);
                for r in 1..8 {
                    reduce_local(o, dt, &buf(r), &mut want, COUNT).unwrap();
                }
                let mine = buf(me);
                let mut got = vec![0u8; mine.len()];
                ok!(f, f.allreduce(WORLD, Some(&mine), &mut got, COUNT, dt, o));
                assert_eq!(got, want, "allreduce {o:?} on {}", dt.name());
                let mut inplace = mine.clone();
                ok!(f, f.allreduce(WORLD, None, &mut inplace, COUNT, dt, o));
                assert_eq!(inplace, want, "in place {o:?} on {}", dt.name());
                let root = (k % 8) as i32;
                let mut red = if me == root {
                    vec![0u8; mine.len()]
                } else {
                    Vec::new()
                };
                ok!(
                    f,
                    f.reduce(WORLD, Some(&mine), &mut red, COUNT, dt, o, root)
                );
                if me == root {
                    assert_eq!(red, want, "reduce {o:?} on {}", dt.name());
                }
                checked += 1;
            }
        }
        checked
    });
    assert!(out[0] > 150, "{out:?}");
}

#[test]
fn refusals_and_error_handlers() {
    job(2, 5_000, |f: &mut Face<Shared>| {
        let me = ok!(f, f.rank(WORLD));
        let x = ints(&[1]);
        assert_eq!(
            f.send(WORLD, 2, 0, Datatype::Int, &x, false),
            Err(ErrorClass::Rank)
        );
        assert_eq!(
            f.send(WORLD, abi::MPI_ANY_SOURCE, 0, Datatype::Int, &x, false),
            Err(ErrorClass::Rank)
        );
        assert_eq!(
            f.send(WORLD, 0, -7, Datatype::Int, &x, false),
            Err(ErrorClass::Tag)
        );
        assert_eq!(
            f.send(WORLD, 0, abi::MPI_ANY_TAG, Datatype::Int, &x, false),
            Err(ErrorClass::Tag)
        );
        assert_eq!(
            f.send(abi::MPI_COMM_NULL, 0, 0, Datatype::Int, &x, false),
            Err(ErrorClass::Comm)
        );
        assert_eq!(
            f.recv(WORLD, 5, 0, Datatype::Int, &mut [0; 4]).err(),
            Some(ErrorClass::Rank)
        );
        assert_eq!(f.bcast(WORLD, &mut [0; 4], 2), Err(ErrorClass::Root));
        assert_eq!(
            f.reduce(WORLD, Some(&x), &mut [0; 4], 1, Datatype::Int, Op::Sum, -1),
            Err(ErrorClass::Root)
        );
        assert_eq!(f.barrier(abi::MPI_COMM_NULL), Err(ErrorClass::Comm));
        assert_eq!(f.comm_split(WORLD, -4, 0), Err(ErrorClass::Arg));
        // MPI_IN_PLACE is the root's only.
        if me == 1 {
            assert_eq!(
                f.reduce(WORLD, None, &mut [], 1, Datatype::Int, Op::Sum, 0),
                Err(ErrorClass::Buffer)
            );
        }
        // Error handlers: set, refused, inherited.
        use kestrel_mpi_c::handles::Errhandler;
        assert_eq!(f.errhandler(WORLD), Errhandler::Fatal);
        assert_eq!(
            f.set_errhandler(WORLD, abi::MPI_ERRHANDLER_NULL),
            Err(ErrorClass::Arg)
        );
        assert_eq!(
            f.set_errhandler(abi::MPI_COMM_NULL, abi::MPI_ERRORS_RETURN),
            Err(ErrorClass::Comm)
        );
        ok!(f, f.set_errhandler(WORLD, abi::MPI_ERRORS_RETURN));
        let dup = ok!(f, f.comm_dup(WORLD));
        assert_eq!(f.errhandler(dup), Errhandler::Return);
        assert_eq!(f.errhandler(abi::MPI_COMM_NULL), Errhandler::Return);
        assert_eq!(f.errhandler(abi::MPI_COMM_SELF), Errhandler::Fatal);
        // A receive nobody matches: the core's deadlock, its report kept for the fatal line.
        let e = f.recv(dup, abi::MPI_ANY_SOURCE, 42, Datatype::Int, &mut [0; 4]);
        assert_eq!(e.err(), Some(ErrorClass::Other));
        assert_eq!(f.take_core_error(), Some(kestrel_mpi::Error::Deadlock));
        assert_eq!(f.take_core_error(), None);
        let report = f.core().deadlock_report().unwrap().to_string();
        assert!(
            report.starts_with(&format!("rank {me} waits in ")),
            "{report}"
        );
        assert!(report.contains("tag 42"), "{report}");
    });
}
