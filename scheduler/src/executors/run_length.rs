//! How many iterations a run has left, where the application said
//! ([`Executor::hint_iterations_left`](crate::executor::Executor::hint_iterations_left)): a
//! rebalancing decided at the last iteration's end would move boxes that no iteration runs.

/// A countdown of the iterations' ends still to come; none without a hint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IterationsLeft(Option<u64>);

impl IterationsLeft {
    /// The run ends after `iterations` more iteration ends; 0 forgets the hint.
    pub(crate) fn set(&mut self, iterations: u64) {
        self.0 = (iterations > 0).then_some(iterations);
    }

    /// The iteration ends still to come, where the application said.
    pub(crate) fn remaining(self) -> Option<u64> {
        self.0
    }

    /// Counts an iteration's end: whether it is the run's last. The hint is then spent, so a
    /// run that goes on after all is treated as one without a hint.
    pub(crate) fn end_one(&mut self) -> bool {
        match self.0 {
            Some(1) => {
                self.0 = None;
                true
            }
            Some(n) => {
                self.0 = Some(n - 1);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_of_the_hinted_ends_is_the_last() {
        let mut left = IterationsLeft::default();
        assert!(!(0..5).any(|_| left.end_one()), "no hint, no last iteration");
        left.set(3);
        assert_eq!(left.remaining(), Some(3));
        assert_eq!([left.end_one(), left.end_one()], [false, false]);
        assert_eq!(left.remaining(), Some(1), "one more end, the last");
        assert!(left.end_one());
        assert_eq!(left.remaining(), None);
        assert!(!(0..5).any(|_| left.end_one()), "a run that goes on past the hint has no last iteration");
        left.set(1);
        assert!(left.end_one());
        left.set(2);
        left.set(0);
        assert!(!(0..5).any(|_| left.end_one()), "0 forgets the hint");
    }
}
