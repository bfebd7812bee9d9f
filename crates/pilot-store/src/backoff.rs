//! Exponential backoff with jitter, for reconnecting watches.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

/// Exponential backoff between `min` and `max`, with full jitter in the upper
/// half of each step so that many clients do not retry in lockstep.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
    seed: RandomState,
    attempt: u64,
}

impl Backoff {
    /// Backoff starting at `min` and doubling up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max: max.max(min),
            current: min,
            seed: RandomState::new(),
            attempt: 0,
        }
    }

    /// The next delay: between half and all of the current step, after which
    /// the step doubles (up to `max`).
    pub fn next_delay(&mut self) -> Duration {
        self.attempt += 1;
        let step = self.current;
        self.current = (self.current * 2).min(self.max);
        let fraction = (self.seed.hash_one(self.attempt) % 1000) as u32;
        step / 2 + step / 2 * fraction / 1000
    }

    /// Sleeps for [`Backoff::next_delay`].
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }

    /// Back to `min` after a success.
    pub fn reset(&mut self) {
        self.current = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_jitter_and_resets() {
        let min = Duration::from_millis(100);
        let max = Duration::from_millis(800);
        let mut backoff = Backoff::new(min, max);
        let delays: Vec<Duration> = (0..6).map(|_| backoff.next_delay()).collect();
        for (delay, step) in delays.iter().zip([100, 200, 400, 800, 800, 800]) {
            let step = Duration::from_millis(step);
            assert!(*delay >= step / 2 && *delay <= step, "{delay:?} outside {step:?}");
        }
        backoff.reset();
        assert!(backoff.next_delay() <= min);
    }
}
