//! Work whose result may wait (the status writer's analysis of every
//! object): run on a thread of the lowest scheduling priority, so that
//! while it runs the CPU goes first to what a change is waiting on (the
//! push's compilation and generation, the API's requests, and on a shared
//! host the proxies applying the push). On two cores, the analysis of
//! 3,000 HTTPRoutes (about 75 ms each round) at the default priority put
//! the edge bench's route change p90 at 75–78 ms; with it off, 54 ms.
//!
//! The thread's priority is Linux's `nice` 19 (a thread may always lower
//! its own). The kernel still gives it its share: an analysis on a busy
//! host takes longer, never forever.

use std::sync::{Mutex, PoisonError};

/// Runs `work` on a thread of the lowest priority and waits for it (call
/// it where blocking is allowed: in `block_in_place`). Where no thread can
/// be started, `work` runs on this one. A panic in `work` is this thread's.
pub(crate) fn run<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    let work = Mutex::new(Some(work));
    let take = || {
        work.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("the work runs once")
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("pilot-analysis".into())
            .spawn_scoped(scope, || {
                lower_own_priority();
                take()()
            });
        match spawned {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(error) => {
                tracing::warn!(%error, "no thread for the analysis: it runs at the caller's priority");
                take()()
            }
        }
    })
}

/// Gives the calling thread the lowest priority (`nice` 19); on other
/// systems, or where the kernel refuses, it keeps its own.
fn lower_own_priority() {
    // On Linux a thread id names that thread alone, and raising one's own
    // nice value needs no privilege.
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19) {
        tracing::debug!(%error, "the analysis keeps its priority");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_work_runs_at_the_lowest_priority_and_its_answer_comes_back() {
        let caller = std::thread::current().id();
        let (nice, thread) = super::run(|| {
            let nice = std::fs::read_to_string("/proc/thread-self/stat")
                .ok()
                .and_then(|stat| {
                    // Fields after the command's closing parenthesis; the
                    // nice value is the 19th field, the 17th after it.
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(16)?.parse::<i32>().ok()
                });
            (nice, std::thread::current().id())
        });
        assert_ne!(thread, caller, "on a thread of its own");
        if cfg!(target_os = "linux") {
            assert_eq!(nice, Some(19));
        }
    }

    #[test]
    fn a_panic_in_the_work_is_the_callers() {
        let caught = std::panic::catch_unwind(|| super::run(|| panic!("the analysis failed")));
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"the analysis failed"));
    }
}
