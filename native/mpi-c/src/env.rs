//! The environment calls that need no core: `MPI_Get_version` and `MPI_Wtick`.

use crate::abi::{MPI_SUBVERSION, MPI_VERSION};
use core::ffi::c_int;

/// `MPI_Get_version`: the standard the library follows, as mpi.h states it.
pub const fn version() -> (c_int, c_int) {
    (MPI_VERSION, MPI_SUBVERSION)
}

/// `MPI_Wtick`: the resolution of `MPI_Wtime` in seconds, for a clock that counts at
/// `frequency_hz` (the PowerPC timebase: 400 MHz on QEMU's bamboo, from the device tree's
/// `timebase-frequency`). None for a zero frequency.
pub fn wtick(frequency_hz: u64) -> Option<f64> {
    (frequency_hz != 0).then(|| 1.0 / frequency_hz as f64)
}

/// `MPI_Wtime` from a timebase reading: seconds since the count was zero.
pub fn wtime(ticks: u64, frequency_hz: u64) -> Option<f64> {
    (frequency_hz != 0).then(|| ticks as f64 / frequency_hz as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_mpi_3_1() {
        assert_eq!(version(), (3, 1));
    }

    #[test]
    fn wtick_of_the_bamboo_timebase() {
        assert_eq!(wtick(400_000_000), Some(2.5e-9));
        assert_eq!(wtick(0), None);
        assert_eq!(wtime(800_000_000, 400_000_000), Some(2.0));
    }
}
