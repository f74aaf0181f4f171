//! "How many log mirrors make the cache at least as reliable as my backing array?"

use super::models::{hhc_mttdl_hours, raid_mttdl_hours};
use super::{Backing, Devices, Error};

#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    pub backing_mttdl_hours: f64,
    /// MTTDL of HHC-1, HHC-2, ... up to the answer (or up to the limit when there is none).
    pub hhc_mttdl_hours_by_mirrors: Vec<f64>,
    /// Smallest M with MTTDL(HHC-M) >= MTTDL(backing), if one is within the limit.
    pub mirrors: Option<usize>,
}

/// Tries M = 1, 2, ... `mirrors_max`; MTTDL grows with M, so the first M that reaches the
/// backing array's MTTDL is the answer.
pub fn recommend_mirrors(
    backing: Backing,
    disks: usize,
    devices: &Devices,
    mirrors_max: usize,
) -> Result<Recommendation, Error> {
    let backing_mttdl_hours = raid_mttdl_hours(disks, backing.tolerated_failures(), devices)?;
    let mut hhc_mttdl_hours_by_mirrors = Vec::new();
    for mirrors in 1..=mirrors_max {
        let hhc_mttdl_hours = hhc_mttdl_hours(mirrors, devices)?;
        hhc_mttdl_hours_by_mirrors.push(hhc_mttdl_hours);
        if hhc_mttdl_hours >= backing_mttdl_hours {
            return Ok(Recommendation {
                backing_mttdl_hours,
                hhc_mttdl_hours_by_mirrors,
                mirrors: Some(mirrors),
            });
        }
    }
    Ok(Recommendation {
        backing_mttdl_hours,
        hhc_mttdl_hours_by_mirrors,
        mirrors: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Repair;
    use super::*;

    const MIRRORS_MAX: usize = 6;

    /// Evaluates every M up to the limit and takes the smallest that qualifies, without relying
    /// on monotonicity.
    fn brute_force(backing: Backing, disks: usize, devices: &Devices) -> Option<usize> {
        let backing_mttdl = raid_mttdl_hours(disks, backing.tolerated_failures(), devices).unwrap();
        (1..=MIRRORS_MAX)
            .filter(|&mirrors| hhc_mttdl_hours(mirrors, devices).unwrap() >= backing_mttdl)
            .min()
    }

    #[test]
    fn matches_brute_force_over_a_grid() {
        let mut answers_seen = std::collections::BTreeSet::new();
        for backing in [Backing::Raid5, Backing::Raid6] {
            for disks in 3..=16 {
                for mttr_hours in [1.0, 24.0, 168.0, 2000.0] {
                    for ssd_mttf_hours in [2e4, 2e5, 2e6] {
                        // A log HDD that fails about as often as it is repaired makes extra mirrors
                        // nearly useless: that is where "no answer" comes from.
                        for log_mttf_hours in [2e3, 1e6] {
                            for repair in [Repair::Independent, Repair::Serial] {
                                let devices = Devices {
                                    backing_mttf_hours: 1.5e6,
                                    log_mttf_hours,
                                    ssd_mttf_hours,
                                    mttr_hours,
                                    repair,
                                };
                                let answer =
                                    recommend_mirrors(backing, disks, &devices, MIRRORS_MAX)
                                        .unwrap()
                                        .mirrors;
                                assert_eq!(
                                    answer,
                                    brute_force(backing, disks, &devices),
                                    "{devices:?}"
                                );
                                answers_seen.insert(answer);
                            }
                        }
                    }
                }
            }
        }
        // The grid must exercise more than one answer, including "none within the limit".
        assert!(answers_seen.len() >= 3, "{answers_seen:?}");
        assert!(answers_seen.contains(&None));
    }

    #[test]
    fn paper_claims_hold_with_default_devices() {
        let devices = Devices::default();
        for disks in 4..=16 {
            let raid5 = recommend_mirrors(Backing::Raid5, disks, &devices, MIRRORS_MAX).unwrap();
            assert_eq!(raid5.mirrors, Some(1));
            let raid6 = recommend_mirrors(Backing::Raid6, disks, &devices, MIRRORS_MAX).unwrap();
            assert_eq!(raid6.mirrors, Some(2));
        }
    }
}
