//! Reliability analysis (paper §2): mean time to data loss (MTTDL) of the HHC cache layer
//! (one SSD plus M mirrored log HDDs) against the RAID5/RAID6 array behind it, from Markov chains
//! with exponential failures and repairs. See docs/reliability.md for the model and its sources.

pub mod markov;
pub mod models;
pub mod plot;
pub mod recommend;

use std::fmt;

/// Julian year, the unit MTTDL figures are usually quoted in.
pub const HOURS_PER_YEAR: f64 = 365.25 * 24.0;

/// Defaults, from datasheets (see docs/reliability.md for the list):
/// NAS/enterprise-capacity HDDs are rated 1.0–1.5 M h MTBF, datacenter SATA/NVMe SSDs 2 M h.
pub const DEFAULT_HDD_MTTF_HOURS: f64 = 1.2e6;
pub const DEFAULT_SSD_MTTF_HOURS: f64 = 2.0e6;
/// Replacing a disk and rebuilding a multi-terabyte array or resyncing a log mirror: about a day.
pub const DEFAULT_MTTR_HOURS: f64 = 24.0;

/// How failed devices of one redundancy group are repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Repair {
    /// Every failed device is repaired on its own at rate 1/MTTR (the paper: "failures and
    /// repairs are independent"; also what its group's RAID6 formula assumes).
    Independent,
    /// One rebuild at a time per group (RAID array, log mirror set); the SSD, a different
    /// device, still has its own. This is what the textbook MTTF^3 / (N(N-1)(N-2) MTTR^2)
    /// RAID6 approximation corresponds to.
    Serial,
}

impl Repair {
    /// Total repair rate of a group with `failed_count` devices down.
    pub fn group_rate_per_hour(self, failed_count: usize, mttr_hours: f64) -> f64 {
        match self {
            Repair::Independent => failed_count as f64 / mttr_hours,
            Repair::Serial => 1.0 / mttr_hours,
        }
    }
}

/// Device figures for one analysis; all times in hours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Devices {
    /// Disks of the backing RAID array.
    pub backing_mttf_hours: f64,
    /// HDDs holding the log mirrors.
    pub log_mttf_hours: f64,
    /// The cache SSD.
    pub ssd_mttf_hours: f64,
    /// Mean time to repair any failed device (replace + rebuild/resync).
    pub mttr_hours: f64,
    pub repair: Repair,
}

impl Default for Devices {
    fn default() -> Self {
        Devices {
            backing_mttf_hours: DEFAULT_HDD_MTTF_HOURS,
            log_mttf_hours: DEFAULT_HDD_MTTF_HOURS,
            ssd_mttf_hours: DEFAULT_SSD_MTTF_HOURS,
            mttr_hours: DEFAULT_MTTR_HOURS,
            repair: Repair::Independent,
        }
    }
}

impl Devices {
    pub fn validate(&self) -> Result<(), Error> {
        let times = [
            ("backing MTTF", self.backing_mttf_hours),
            ("log HDD MTTF", self.log_mttf_hours),
            ("SSD MTTF", self.ssd_mttf_hours),
            ("MTTR", self.mttr_hours),
        ];
        match times
            .iter()
            .find(|(_, hours)| !(hours.is_finite() && *hours > 0.0))
        {
            Some((name, hours)) => Err(Error::BadTime {
                name,
                hours: *hours,
            }),
            None => Ok(()),
        }
    }
}

/// Backing array layouts the tool compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backing {
    Raid5,
    Raid6,
}

impl Backing {
    pub fn tolerated_failures(self) -> usize {
        match self {
            Backing::Raid5 => 1,
            Backing::Raid6 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backing::Raid5 => "RAID5",
            Backing::Raid6 => "RAID6",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    BadTime {
        name: &'static str,
        hours: f64,
    },
    TooFewDisks {
        disks: usize,
        tolerated_failures: usize,
    },
    NoMirrors,
    Solve(markov::SolveError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadTime { name, hours } => {
                write!(f, "{name} must be positive hours, got {hours}")
            }
            Error::TooFewDisks {
                disks,
                tolerated_failures,
            } => write!(
                f,
                "an array tolerating {tolerated_failures} failures needs more than \
                 {tolerated_failures} disks, got {disks}"
            ),
            Error::NoMirrors => write!(f, "HHC needs at least one log mirror"),
            Error::Solve(error) => write!(f, "Markov solver: {error}"),
        }
    }
}

impl From<markov::SolveError> for Error {
    fn from(error: markov::SolveError) -> Self {
        Error::Solve(error)
    }
}
