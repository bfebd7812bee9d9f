//! Where a push's time goes, as the histograms Istio's pilot exports
//! (`pilot/pkg/xds/monitoring.go`), so that an operator can tell a slow
//! debounce from a slow build, a long queue or a slow proxy:
//!
//! - debounce: from the first change a push carries to the end of its
//!   debounce (`pilot_debounce_time`);
//! - build: decoding and compiling the rules and freezing the registry
//!   into the snapshot (`pilot_pushcontext_init_seconds`);
//! - queue: per proxy, from the snapshot's publication to its stream
//!   taking it (`pilot_proxy_queue_time`); a stream parked on a class the
//!   push keeps is not queued and has no sample;
//! - push, per type: per proxy, the time to make and hand over one type's
//!   response (`pilot_xds_push_time`);
//! - convergence: per proxy, from the first change a push carries to the
//!   proxy having been handed every response of it
//!   (`pilot_proxy_convergence_time`).
//!
//! Each is a fixed set of atomic buckets: a sample is a few relaxed
//! atomic additions, with no lock and no allocation, since queue, push and
//! convergence are sampled once per proxy per push (10,000 samples for a
//! change every proxy sees).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::xds_type::XdsType;

/// Bucket bounds (seconds) of every push histogram: Istio's convergence
/// bounds (0.1 to 30 s) with finer ones below, where a debounced push and
/// one proxy's share of it land.
pub const PUSH_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 30.0,
];

/// A histogram of durations with [`PUSH_BUCKETS`], filled concurrently.
#[derive(Debug, Default)]
pub(crate) struct AtomicHistogram {
    /// Samples at or below each bound (not cumulative); the last slot
    /// counts those above every bound.
    buckets: [AtomicU64; PUSH_BUCKETS.len() + 1],
    /// The sum of the samples, in nanoseconds.
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl AtomicHistogram {
    pub(crate) fn record(&self, sample: Duration) {
        let seconds = sample.as_secs_f64();
        let slot = PUSH_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(PUSH_BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> DurationHistogram {
        let mut cumulative = 0;
        let buckets = PUSH_BUCKETS
            .iter()
            .zip(&self.buckets)
            .map(|(bound, count)| {
                cumulative += count.load(Ordering::Relaxed);
                (*bound, cumulative)
            })
            .collect();
        let above = self.buckets[PUSH_BUCKETS.len()].load(Ordering::Relaxed);
        DurationHistogram {
            buckets,
            // Read after the buckets: a sample recorded in between makes
            // the count at least the last bucket's, as a reader expects.
            count: self.count.load(Ordering::Relaxed).max(cumulative + above),
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// One histogram as read: what a metrics exporter encodes.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationHistogram {
    /// `(upper bound in seconds, samples at or below it)`, cumulative, for
    /// each of [`PUSH_BUCKETS`] (the `+Inf` bucket is [`Self::count`]).
    pub buckets: Vec<(f64, u64)>,
    /// Every sample.
    pub count: u64,
    /// The samples' sum.
    pub sum: Duration,
}

/// The server's push histograms, filled by the pipeline and the streams.
#[derive(Debug, Default)]
pub(crate) struct Timings {
    pub(crate) debounce: AtomicHistogram,
    pub(crate) build: AtomicHistogram,
    pub(crate) queue: AtomicHistogram,
    pub(crate) push: [AtomicHistogram; XdsType::ALL.len()],
    pub(crate) convergence: AtomicHistogram,
}

impl Timings {
    pub(crate) fn read(&self) -> PushTimings {
        PushTimings {
            debounce: self.debounce.read(),
            build: self.build.read(),
            queue: self.queue.read(),
            push: XdsType::ALL.map(|t| (t.short(), self.push[t.index()].read())),
            convergence: self.convergence.read(),
        }
    }
}

/// Where pushes' time went since the server started (see the module
/// documentation of each; [`crate::XdsServer::push_timings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PushTimings {
    /// First change → end of the debounce, per push.
    pub debounce: DurationHistogram,
    /// Building the push's snapshot, per push.
    pub build: DurationHistogram,
    /// Publication → a stream taking it, per proxy and push.
    pub queue: DurationHistogram,
    /// Making and handing over one type's response, per proxy, push and
    /// type, by type (`cds`, `eds`, `lds`, `srds`, `rds`).
    pub push: [(&'static str, DurationHistogram); XdsType::ALL.len()],
    /// First change → the proxy handed every response of the push, per
    /// proxy and push.
    pub convergence: DurationHistogram,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_the_first_bucket_that_holds_them_and_count_cumulatively() {
        let histogram = AtomicHistogram::default();
        histogram.record(Duration::from_micros(300));
        histogram.record(Duration::from_millis(1));
        histogram.record(Duration::from_millis(70));
        histogram.record(Duration::from_secs(60));
        let read = histogram.read();
        assert_eq!(read.count, 4);
        assert_eq!(read.sum, Duration::from_micros(60_071_300));
        let at = |bound: f64| read.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        assert_eq!(at(0.0005), 1);
        // A sample equal to a bound is counted in it.
        assert_eq!(at(0.001), 2);
        assert_eq!(at(0.05), 2);
        assert_eq!(at(0.1), 3);
        // Above every bound: only in the count (`+Inf`).
        assert_eq!(at(30.0), 3);
    }
}
