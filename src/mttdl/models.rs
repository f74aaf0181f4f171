//! The chains of paper §2 and their closed forms. All results are MTTDL in hours.
//!
//! Notation as in the paper: l = 1/MTTF of an HDD, p (phi) = 1/MTTF of the SSD, m (mu) = 1/MTTR.
//!
//! The HHC figure is the MTTDL of the cache layer alone (dirty data is lost when the SSD and all
//! M log HDDs are down at once), as the paper compares it with the backing array's MTTDL; the
//! backing array's own losses are not folded in (the whole stack loses data at roughly the sum of
//! both rates).

use super::markov::AbsorbingChain;
use super::{Devices, Error};

/// RAID array of `disks` disks that survives `tolerated_failures` concurrent failures
/// (1: RAID5, 2: RAID6, M-1: an M-way mirror). State k = number of failed disks.
pub fn raid_chain(
    disks: usize,
    tolerated_failures: usize,
    devices: &Devices,
) -> Result<AbsorbingChain, Error> {
    devices.validate()?;
    if disks <= tolerated_failures {
        return Err(Error::TooFewDisks {
            disks,
            tolerated_failures,
        });
    }
    let failure_rate = 1.0 / devices.backing_mttf_hours;
    let mut chain = AbsorbingChain::new(tolerated_failures + 1);
    for failed in 0..=tolerated_failures {
        let next_failure_rate = (disks - failed) as f64 * failure_rate;
        if failed == tolerated_failures {
            chain.add_absorption(failed, next_failure_rate);
        } else {
            chain.add_transition(failed, failed + 1, next_failure_rate);
        }
        if failed > 0 {
            let repair_rate = devices
                .repair
                .group_rate_per_hour(failed, devices.mttr_hours);
            chain.add_transition(failed, failed - 1, repair_rate);
        }
    }
    Ok(chain)
}

pub fn raid_mttdl_hours(
    disks: usize,
    tolerated_failures: usize,
    devices: &Devices,
) -> Result<f64, Error> {
    Ok(raid_chain(disks, tolerated_failures, devices)?.mean_time_to_absorption(0)?)
}

/// Index of HHC state (SSD failed?, failed log HDDs). The state (SSD failed, all M failed) is
/// the absorbing one and has no index.
fn hhc_state(mirrors: usize, ssd_failed: bool, hdds_failed: usize) -> usize {
    usize::from(ssd_failed) * (mirrors + 1) + hdds_failed
}

/// HHC with one SSD and `mirrors` log HDDs (paper Fig. 3 for M = 1, generalised). The SSD and
/// the mirror set are repaired independently of each other; within the mirror set
/// `devices.repair` applies.
pub fn hhc_chain(mirrors: usize, devices: &Devices) -> Result<AbsorbingChain, Error> {
    devices.validate()?;
    if mirrors == 0 {
        return Err(Error::NoMirrors);
    }
    let hdd_failure_rate = 1.0 / devices.log_mttf_hours;
    let ssd_failure_rate = 1.0 / devices.ssd_mttf_hours;
    let ssd_repair_rate = 1.0 / devices.mttr_hours;
    let mut chain = AbsorbingChain::new(2 * mirrors + 1);
    for ssd_failed in [false, true] {
        for hdds_failed in 0..=mirrors {
            if ssd_failed && hdds_failed == mirrors {
                continue;
            }
            let state = hhc_state(mirrors, ssd_failed, hdds_failed);
            let lost_if = |ssd_failed, hdds_failed| ssd_failed && hdds_failed == mirrors;
            let mut add = |rate, to_ssd_failed, to_hdds_failed| {
                if lost_if(to_ssd_failed, to_hdds_failed) {
                    chain.add_absorption(state, rate);
                } else {
                    chain.add_transition(
                        state,
                        hhc_state(mirrors, to_ssd_failed, to_hdds_failed),
                        rate,
                    );
                }
            };
            if ssd_failed {
                add(ssd_repair_rate, false, hdds_failed);
            } else {
                add(ssd_failure_rate, true, hdds_failed);
            }
            if hdds_failed < mirrors {
                add(
                    (mirrors - hdds_failed) as f64 * hdd_failure_rate,
                    ssd_failed,
                    hdds_failed + 1,
                );
            }
            if hdds_failed > 0 {
                let repair_rate = devices
                    .repair
                    .group_rate_per_hour(hdds_failed, devices.mttr_hours);
                add(repair_rate, ssd_failed, hdds_failed - 1);
            }
        }
    }
    Ok(chain)
}

pub fn hhc_mttdl_hours(mirrors: usize, devices: &Devices) -> Result<f64, Error> {
    let start = hhc_state(mirrors, false, 0);
    Ok(hhc_chain(mirrors, devices)?.mean_time_to_absorption(start)?)
}

/// Exact solution of the RAID5 chain (the same under both repair disciplines, since at most
/// one disk is ever under repair): ((2N-1) l + m) / (N (N-1) l^2).
pub fn raid5_mttdl_exact_hours(disks: usize, devices: &Devices) -> f64 {
    let (n, l, m) = (
        disks as f64,
        1.0 / devices.backing_mttf_hours,
        1.0 / devices.mttr_hours,
    );
    ((2.0 * n - 1.0) * l + m) / (n * (n - 1.0) * l * l)
}

/// Exact solution of the RAID6 chain:
/// ((3N^2 - 6N + 2) l^2 + c1 l m + c2 m^2) / (N (N-1) (N-2) l^3) with (c1, c2) = (3N - 2, 2)
/// for independent repairs (the formula of the paper's group, e.g. HPDA [17]) and (2N - 2, 1)
/// for serial repair.
pub fn raid6_mttdl_exact_hours(disks: usize, devices: &Devices) -> f64 {
    let (n, l, m) = (
        disks as f64,
        1.0 / devices.backing_mttf_hours,
        1.0 / devices.mttr_hours,
    );
    let (c1, c2) = match devices.repair {
        super::Repair::Independent => (3.0 * n - 2.0, 2.0),
        super::Repair::Serial => (2.0 * n - 2.0, 1.0),
    };
    let numerator = (3.0 * n * n - 6.0 * n + 2.0) * l * l + c1 * l * m + c2 * m * m;
    numerator / (n * (n - 1.0) * (n - 2.0) * l * l * l)
}

/// Paper eq. (6), HHC with one log HDD, written in rates:
/// ((l + m)^2 + p (l + 2m + p)) / (l p (l + p + 2m)).
fn hhc1_closed_form(hdd_failure_rate: f64, ssd_failure_rate: f64, repair_rate: f64) -> f64 {
    let (l, p, m) = (hdd_failure_rate, ssd_failure_rate, repair_rate);
    ((l + m) * (l + m) + p * (l + 2.0 * m + p)) / (l * p * (l + p + 2.0 * m))
}

/// Exact MTTDL of HHC-1 (paper eq. 6).
pub fn hhc1_mttdl_exact_hours(devices: &Devices) -> f64 {
    hhc1_closed_form(
        1.0 / devices.log_mttf_hours,
        1.0 / devices.ssd_mttf_hours,
        1.0 / devices.mttr_hours,
    )
}

/// The paper's approximation for M > 1 (eq. 7): treat the M-way log mirror as one device whose
/// failure rate is 1 / MTTDL(mirror of M), repaired at rate m, and put it into eq. (6).
pub fn hhc_mttdl_paper_composite_hours(mirrors: usize, devices: &Devices) -> Result<f64, Error> {
    if mirrors == 0 {
        return Err(Error::NoMirrors);
    }
    let log_disks = Devices {
        backing_mttf_hours: devices.log_mttf_hours,
        ..*devices
    };
    let mirror_failure_rate = 1.0 / raid_mttdl_hours(mirrors, mirrors - 1, &log_disks)?;
    Ok(hhc1_closed_form(
        mirror_failure_rate,
        1.0 / devices.ssd_mttf_hours,
        1.0 / devices.mttr_hours,
    ))
}

/// Leading term for MTTR << MTTF of an array tolerating f failures:
/// MTTF^(f+1) / (N (N-1) ... (N-f) MTTR^f), divided by f! under independent repair (then f
/// disks are rebuilt in parallel). f = 1: MTTF^2 / (N (N-1) MTTR); f = 2 (serial):
/// MTTF^3 / (N (N-1) (N-2) MTTR^2).
pub fn raid_mttdl_asymptote_hours(
    disks: usize,
    tolerated_failures: usize,
    devices: &Devices,
) -> f64 {
    let falling: f64 = (0..=tolerated_failures)
        .map(|i| (disks - i) as f64)
        .product();
    let repair_factor = match devices.repair {
        super::Repair::Independent => factorial(tolerated_failures),
        super::Repair::Serial => 1.0,
    };
    let mttf_ratio = devices.backing_mttf_hours / devices.mttr_hours;
    repair_factor * devices.backing_mttf_hours * mttf_ratio.powi(tolerated_failures as i32)
        / falling
}

/// Leading term for MTTR << MTTF of HHC-M: loss needs the SSD and all M HDDs down together.
/// Independent repair: MTTF_ssd MTTF_hdd^M / ((M+1) MTTR^M); serial repair of the mirror set:
/// MTTF_ssd MTTF_hdd^M / (2 M! MTTR^M).
pub fn hhc_mttdl_asymptote_hours(mirrors: usize, devices: &Devices) -> f64 {
    let divisor = match devices.repair {
        super::Repair::Independent => (mirrors + 1) as f64,
        super::Repair::Serial => 2.0 * factorial(mirrors),
    };
    let hdd_ratio = devices.log_mttf_hours / devices.mttr_hours;
    devices.ssd_mttf_hours * hdd_ratio.powi(mirrors as i32) / divisor
}

fn factorial(k: usize) -> f64 {
    (1..=k).map(|i| i as f64).product()
}

#[cfg(test)]
mod tests {
    use super::super::Repair;
    use super::*;

    const DISKS: std::ops::RangeInclusive<usize> = 3..=16;
    const MTTRS_HOURS: [f64; 6] = [1.0, 6.0, 24.0, 48.0, 72.0, 168.0];
    const MTTFS_HOURS: [f64; 4] = [0.5e6, 1.0e6, 1.5e6, 2.0e6];
    const REPAIRS: [Repair; 2] = [Repair::Independent, Repair::Serial];

    /// Exact closed forms and the chain solve the same equations: only rounding may differ.
    const EXACT_TOLERANCE: f64 = 1e-9;
    /// The leading terms drop corrections of order N * MTTR / MTTF, at most 16 * 168 / 5e5 =
    /// 0.54 % on the grid (times small constants), so 2 % bounds them.
    const ASYMPTOTE_TOLERANCE: f64 = 0.02;

    fn relative_error(actual: f64, expected: f64) -> f64 {
        ((actual - expected) / expected).abs()
    }

    /// Every combination of the grid: (MTTF of all devices, MTTR, repair discipline).
    fn grid() -> impl Iterator<Item = Devices> {
        MTTFS_HOURS.into_iter().flat_map(|mttf_hours| {
            MTTRS_HOURS.into_iter().flat_map(move |mttr_hours| {
                REPAIRS.into_iter().map(move |repair| Devices {
                    backing_mttf_hours: mttf_hours,
                    log_mttf_hours: mttf_hours,
                    ssd_mttf_hours: 2.0e6,
                    mttr_hours,
                    repair,
                })
            })
        })
    }

    fn check(what: &str, devices: &Devices, actual: f64, expected: f64, tolerance: f64) {
        let error = relative_error(actual, expected);
        assert!(
            error <= tolerance,
            "{what} {devices:?}: {actual:e} vs {expected:e} ({error:e})"
        );
    }

    #[test]
    fn raid_chains_match_exact_closed_forms() {
        for devices in grid() {
            for disks in DISKS {
                let raid5 = raid_mttdl_hours(disks, 1, &devices).unwrap();
                check(
                    "raid5",
                    &devices,
                    raid5,
                    raid5_mttdl_exact_hours(disks, &devices),
                    EXACT_TOLERANCE,
                );
                let raid6 = raid_mttdl_hours(disks, 2, &devices).unwrap();
                check(
                    "raid6",
                    &devices,
                    raid6,
                    raid6_mttdl_exact_hours(disks, &devices),
                    EXACT_TOLERANCE,
                );
            }
        }
    }

    #[test]
    fn raid_chains_approach_textbook_formulas() {
        for devices in grid() {
            for disks in DISKS {
                for tolerated_failures in [1, 2] {
                    let chain = raid_mttdl_hours(disks, tolerated_failures, &devices).unwrap();
                    let asymptote = raid_mttdl_asymptote_hours(disks, tolerated_failures, &devices);
                    check(
                        "raid asymptote",
                        &devices,
                        chain,
                        asymptote,
                        ASYMPTOTE_TOLERANCE,
                    );
                }
            }
        }
    }

    #[test]
    fn textbook_formulas_are_the_serial_leading_terms() {
        let devices = Devices {
            repair: Repair::Serial,
            ..Devices::default()
        };
        let (mttf, mttr) = (devices.backing_mttf_hours, devices.mttr_hours);
        let raid5 = mttf * mttf / (8.0 * 7.0 * mttr);
        let raid6 = mttf * mttf * mttf / (8.0 * 7.0 * 6.0 * mttr * mttr);
        assert!(relative_error(raid_mttdl_asymptote_hours(8, 1, &devices), raid5) < 1e-12);
        assert!(relative_error(raid_mttdl_asymptote_hours(8, 2, &devices), raid6) < 1e-12);
    }

    #[test]
    fn hhc1_chain_matches_paper_equation_6() {
        for devices in grid() {
            let chain = hhc_mttdl_hours(1, &devices).unwrap();
            check(
                "hhc1",
                &devices,
                chain,
                hhc1_mttdl_exact_hours(&devices),
                EXACT_TOLERANCE,
            );
        }
    }

    #[test]
    fn hhc_chains_approach_leading_terms() {
        for devices in grid() {
            for mirrors in 1..=4 {
                let chain = hhc_mttdl_hours(mirrors, &devices).unwrap();
                let asymptote = hhc_mttdl_asymptote_hours(mirrors, &devices);
                check(
                    "hhc asymptote",
                    &devices,
                    chain,
                    asymptote,
                    ASYMPTOTE_TOLERANCE,
                );
            }
        }
    }

    #[test]
    fn paper_composite_method() {
        for devices in grid() {
            let exact = hhc_mttdl_hours(1, &devices).unwrap();
            let composite = hhc_mttdl_paper_composite_hours(1, &devices).unwrap();
            check("composite M=1", &devices, composite, exact, EXACT_TOLERANCE);
            // For M = 2 the lumped mirror is repaired as one unit: that matches serial repair to
            // first order and under-estimates independent repair by the factor 3/4.
            let exact = hhc_mttdl_hours(2, &devices).unwrap();
            let composite = hhc_mttdl_paper_composite_hours(2, &devices).unwrap();
            let expected_ratio = match devices.repair {
                Repair::Independent => 0.75,
                Repair::Serial => 1.0,
            };
            check(
                "composite M=2",
                &devices,
                composite / exact,
                expected_ratio,
                ASYMPTOTE_TOLERANCE,
            );
        }
    }

    #[test]
    fn more_mirrors_are_more_reliable() {
        for devices in grid() {
            let mttdls: Vec<f64> = (1..=6)
                .map(|m| hhc_mttdl_hours(m, &devices).unwrap())
                .collect();
            assert!(
                mttdls.windows(2).all(|pair| pair[1] > pair[0]),
                "{devices:?}: {mttdls:?}"
            );
        }
    }

    #[test]
    fn longer_repairs_are_less_reliable() {
        for repair in REPAIRS {
            let at = |mttr_hours| Devices {
                mttr_hours,
                repair,
                ..Devices::default()
            };
            for pair in MTTRS_HOURS.windows(2) {
                let (short, long) = (at(pair[0]), at(pair[1]));
                assert!(hhc_mttdl_hours(2, &long).unwrap() < hhc_mttdl_hours(2, &short).unwrap());
                assert!(
                    raid_mttdl_hours(8, 2, &long).unwrap()
                        < raid_mttdl_hours(8, 2, &short).unwrap()
                );
                assert!(
                    raid_mttdl_hours(8, 1, &long).unwrap()
                        < raid_mttdl_hours(8, 1, &short).unwrap()
                );
            }
        }
    }

    #[test]
    fn wider_arrays_are_less_reliable() {
        let devices = Devices::default();
        for disks in 3..16 {
            for tolerated_failures in [1, 2] {
                let narrow = raid_mttdl_hours(disks, tolerated_failures, &devices).unwrap();
                let wide = raid_mttdl_hours(disks + 1, tolerated_failures, &devices).unwrap();
                assert!(wide < narrow);
            }
        }
    }

    #[test]
    fn no_redundancy_means_first_failure() {
        let devices = Devices::default();
        let single = raid_mttdl_hours(1, 0, &devices).unwrap();
        assert!(relative_error(single, devices.backing_mttf_hours) < 1e-15);
        let stripe = raid_mttdl_hours(4, 0, &devices).unwrap();
        assert!(relative_error(stripe, devices.backing_mttf_hours / 4.0) < 1e-15);
    }

    #[test]
    fn invalid_configurations_are_errors() {
        let devices = Devices::default();
        assert!(matches!(
            raid_mttdl_hours(2, 2, &devices),
            Err(Error::TooFewDisks { .. })
        ));
        assert_eq!(hhc_mttdl_hours(0, &devices), Err(Error::NoMirrors));
        let broken = Devices {
            mttr_hours: 0.0,
            ..devices
        };
        assert!(matches!(
            hhc_mttdl_hours(1, &broken),
            Err(Error::BadTime { .. })
        ));
    }
}
