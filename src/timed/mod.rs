//! The timed simulator: the real engine in virtual time over models of the
//! paper's devices (SATA SSD cache, HDD log, RAID5 behind 1 GbE iSCSI), driven
//! by block-level versions of the Filebench workloads. `hhc simulate` runs the
//! paper's experiments (§3, Figs. 5-7, §3.5) with it. The target factory,
//! the toy target, the PRNG and the event queue it shares with `hhc torture`
//! are in `src/simcore/`.

pub mod profile;
pub mod workloads;
pub mod journal;
pub mod report;
pub mod runner;
pub mod experiments;
pub mod figures;
pub mod log_sweep;
