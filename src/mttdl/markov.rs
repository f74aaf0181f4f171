//! Mean time to absorption of a continuous-time Markov chain with one absorbing state
//! ("data lost").
//!
//! For transient states i the expected times satisfy
//!   d_i T_i = 1 + sum_{j != i} r_ij T_j,   d_i = sum_{j != i} r_ij + a_i,
//! i.e. (D - R) T = 1, the rate form of (I - Q) t = 1. In reliability models the absorption rates
//! a_i are ~1e-6 of the repair rates, so (D - R) is nearly singular (condition number about
//! MTTDL / MTTR, 1e10..1e16): ordinary Gaussian elimination, even with partial pivoting, loses
//! most digits when it subtracts to form the new diagonal. We therefore eliminate states in the
//! manner of Grassmann-Taksar-Heyman: after removing a state, each remaining diagonal is
//! recomputed as the sum of its (non-negative) outgoing rates, so no subtraction ever happens and
//! the result keeps nearly full double precision whatever the conditioning.

use std::fmt;

/// A chain of `states_count` transient states plus one implicit absorbing state. Rates are per
/// hour, so times come out in hours.
#[derive(Clone, Debug)]
pub struct AbsorbingChain {
    /// `rates[i][j]`: rate of the transition from transient state i to transient state j.
    rates: Vec<Vec<f64>>,
    /// `absorption_rates[i]`: rate of the transition from state i to the absorbing state.
    absorption_rates: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SolveError {
    /// This transient state (after eliminating higher-numbered ones) can never be left, so the
    /// expected time to absorption from it is infinite.
    NeverAbsorbed { state: usize },
}

impl fmt::Display for SolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SolveError::NeverAbsorbed { state } => {
                write!(f, "state {state} never reaches the absorbing state")
            }
        }
    }
}

impl AbsorbingChain {
    pub fn new(states_count: usize) -> Self {
        AbsorbingChain {
            rates: vec![vec![0.0; states_count]; states_count],
            absorption_rates: vec![0.0; states_count],
        }
    }

    pub fn states_count(&self) -> usize {
        self.absorption_rates.len()
    }

    /// Adds `rate_per_hour` to the transition `from -> to` (both transient).
    pub fn add_transition(&mut self, from: usize, to: usize, rate_per_hour: f64) {
        assert!(from != to, "self-loops do not change absorption times");
        assert_valid_rate(rate_per_hour);
        self.rates[from][to] += rate_per_hour;
    }

    /// Adds `rate_per_hour` to the transition `from -> absorbing state`.
    pub fn add_absorption(&mut self, from: usize, rate_per_hour: f64) {
        assert_valid_rate(rate_per_hour);
        self.absorption_rates[from] += rate_per_hour;
    }

    /// Expected time to absorption (hours) from every transient state.
    pub fn mean_times_to_absorption(&self) -> Result<Vec<f64>, SolveError> {
        let states_count = self.states_count();
        let mut rates = self.rates.clone();
        let mut absorption_rates = self.absorption_rates.clone();
        // Right-hand side: expected time accumulated per unit of outgoing rate.
        let mut times_weighted = vec![1.0; states_count];
        let mut out_rates = vec![0.0; states_count];
        // Eliminate the highest state first; afterwards row k only refers to states below k,
        // which is what back-substitution needs.
        for k in (0..states_count).rev() {
            out_rates[k] = absorption_rates[k] + rates[k][..k].iter().sum::<f64>();
            // Rates are finite and non-negative, so this is the only way to have no exit.
            if out_rates[k] == 0.0 {
                return Err(SolveError::NeverAbsorbed { state: k });
            }
            for i in 0..k {
                let weight = rates[i][k] / out_rates[k];
                if weight == 0.0 {
                    continue;
                }
                for j in (0..k).filter(|&j| j != i) {
                    rates[i][j] += weight * rates[k][j];
                }
                absorption_rates[i] += weight * absorption_rates[k];
                times_weighted[i] += weight * times_weighted[k];
            }
        }
        let mut times_hours = vec![0.0; states_count];
        for k in 0..states_count {
            let via_lower: f64 = (0..k).map(|j| rates[k][j] * times_hours[j]).sum();
            times_hours[k] = (times_weighted[k] + via_lower) / out_rates[k];
        }
        Ok(times_hours)
    }

    /// Expected time to absorption (hours) from `start`.
    pub fn mean_time_to_absorption(&self, start: usize) -> Result<f64, SolveError> {
        Ok(self.mean_times_to_absorption()?[start])
    }
}

fn assert_valid_rate(rate_per_hour: f64) {
    assert!(
        rate_per_hour.is_finite() && rate_per_hour >= 0.0,
        "bad rate {rate_per_hour}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assert_close(actual: f64, expected: f64, tolerance_relative: f64) {
        let error = ((actual - expected) / expected).abs();
        assert!(
            error <= tolerance_relative,
            "{actual} vs {expected}: relative error {error:e}"
        );
    }

    #[test]
    fn single_device_lives_its_mttf() {
        let mut chain = AbsorbingChain::new(1);
        chain.add_absorption(0, 1.0 / 1.2e6);
        assert_close(chain.mean_time_to_absorption(0).unwrap(), 1.2e6, 1e-15);
    }

    #[test]
    fn two_devices_in_series_fail_at_the_summed_rate() {
        let mut chain = AbsorbingChain::new(1);
        chain.add_absorption(0, 1.0 / 1.0e6);
        chain.add_absorption(0, 1.0 / 2.0e6);
        assert_close(
            chain.mean_time_to_absorption(0).unwrap(),
            2.0e6 / 3.0,
            1e-15,
        );
    }

    #[test]
    fn repairable_mirror_matches_hand_solution() {
        // Two disks, failure rate l each, repair rate m: T0 = (3l + m) / (2 l^2),
        // T1 = (2l + m) / (2 l^2).
        let (l, m) = (1.0 / 1.0e6, 1.0 / 24.0);
        let mut chain = AbsorbingChain::new(2);
        chain.add_transition(0, 1, 2.0 * l);
        chain.add_transition(1, 0, m);
        chain.add_absorption(1, l);
        let times = chain.mean_times_to_absorption().unwrap();
        assert_close(times[0], (3.0 * l + m) / (2.0 * l * l), 1e-12);
        assert_close(times[1], (2.0 * l + m) / (2.0 * l * l), 1e-12);
    }

    #[test]
    fn pure_death_chain_sums_sojourn_times() {
        // 0 -> 1 -> 2 -> absorbed with rates 1, 2, 4: T0 = 1 + 1/2 + 1/4.
        let mut chain = AbsorbingChain::new(3);
        chain.add_transition(0, 1, 1.0);
        chain.add_transition(1, 2, 2.0);
        chain.add_absorption(2, 4.0);
        assert_close(chain.mean_time_to_absorption(0).unwrap(), 1.75, 1e-15);
    }

    #[test]
    fn trapped_state_is_reported() {
        let mut chain = AbsorbingChain::new(2);
        chain.add_transition(0, 1, 1.0);
        chain.add_transition(1, 0, 1.0);
        assert!(matches!(
            chain.mean_times_to_absorption(),
            Err(SolveError::NeverAbsorbed { .. })
        ));
    }

    /// Dense Gaussian elimination with partial pivoting on (D - R) T = 1: the textbook method,
    /// accurate for well-conditioned chains, used here as an independent reference.
    fn solve_with_partial_pivoting(chain: &AbsorbingChain) -> Vec<f64> {
        let n = chain.states_count();
        let mut matrix: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let mut row: Vec<f64> = chain.rates[i].iter().map(|rate| -rate).collect();
                row[i] = chain.absorption_rates[i] + chain.rates[i].iter().sum::<f64>();
                row.push(1.0);
                row
            })
            .collect();
        for column in 0..n {
            let pivot = (column..n)
                .max_by(|&a, &b| matrix[a][column].abs().total_cmp(&matrix[b][column].abs()))
                .unwrap();
            matrix.swap(column, pivot);
            for row in column + 1..n {
                let factor = matrix[row][column] / matrix[column][column];
                let pivot_row = matrix[column].clone();
                for (value, pivot_value) in matrix[row].iter_mut().zip(&pivot_row).skip(column) {
                    *value -= factor * pivot_value;
                }
            }
        }
        let mut times = vec![0.0; n];
        for row in (0..n).rev() {
            let known: f64 = (row + 1..n).map(|k| matrix[row][k] * times[k]).sum();
            times[row] = (matrix[row][n] - known) / matrix[row][row];
        }
        times
    }

    proptest! {
        #[test]
        fn agrees_with_partial_pivoting_on_well_conditioned_chains(
            rates in prop::collection::vec(0.0f64..1.0, 36),
            absorption_rates in prop::collection::vec(0.1f64..1.0, 6),
        ) {
            let mut chain = AbsorbingChain::new(6);
            for i in 0..6 {
                chain.add_absorption(i, absorption_rates[i]);
                for j in (0..6).filter(|&j| j != i) {
                    chain.add_transition(i, j, rates[i * 6 + j]);
                }
            }
            let reference = solve_with_partial_pivoting(&chain);
            let times = chain.mean_times_to_absorption().unwrap();
            for (time, expected) in times.iter().zip(&reference) {
                prop_assert!(((time - expected) / expected).abs() < 1e-10);
            }
        }
    }
}
