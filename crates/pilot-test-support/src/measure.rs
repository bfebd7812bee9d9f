//! What the benches measure of a process: its CPU time, how long its
//! threads waited for a CPU, its resident memory, wall-clock time in
//! microseconds, and percentiles of sorted durations; and the open-files
//! limit a bench of tens of thousands of connections needs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall-clock time in microseconds since the Unix epoch (comparable
/// between processes).
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The `p`-th quantile (0 to 1) of `sorted`, which must not be empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// This process's CPU time so far (user + system, every thread), from
/// `/proc/self/stat` (clock ticks of 10 ms).
pub fn cpu_time() -> Duration {
    cpu_time_at("/proc/self/stat")
}

/// Process `pid`'s CPU time so far, as [`cpu_time`] reads its own.
pub fn cpu_time_of(pid: u32) -> Duration {
    cpu_time_at(&format!("/proc/{pid}/stat"))
}

fn cpu_time_at(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command (in parentheses, which may hold spaces):
    // utime and stime are the 14th and 15th fields overall.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // State is the 3rd field overall, index 0 here; utime is index 11.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// How long this process's threads have waited for a CPU while runnable
/// (the run queue's delay, `/proc/self/task/*/schedstat`; threads gone
/// since are not counted). Far more than the CPU time used means other
/// work on the machine took the cores: the figures then measure the
/// scheduler (under autogroup scheduling, `nice` alone does not help
/// against another session's builds).
pub fn cpu_wait() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten();
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// This process's resident memory (`VmRSS`), in MB.
pub fn rss_mb() -> f64 {
    rss_mb_at("/proc/self/status")
}

/// Process `pid`'s resident memory, in MB.
pub fn rss_mb_of(pid: u32) -> f64 {
    rss_mb_at(&format!("/proc/{pid}/status"))
}

fn rss_mb_at(path: &str) -> f64 {
    let status = std::fs::read_to_string(path).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Raises this process's open-files limit to at least `needed` (the hard
/// limit too, when it is lower and the process may: root), and returns
/// the limit in force, to be reported beside the figures: each connection
/// is a file descriptor at either end.
pub fn raise_open_files(needed: u64) -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= needed {
        return current;
    }
    let maximum = limit.maximum.unwrap_or(u64::MAX);
    let raised = Rlimit {
        current: Some(needed),
        maximum: Some(maximum.max(needed)),
    };
    if setrlimit(Resource::Nofile, raised).is_ok() {
        return needed;
    }
    // Not allowed above the hard limit: as far as it goes.
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(maximum.min(needed)),
            maximum: Some(maximum),
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
