//! Free loopback ports for servers in other processes, handed out so that
//! no two callers (in this process or in another test process) ever get
//! the same one, and no outgoing connection can take one meanwhile.
//!
//! A port picked by binding port 0 and letting go of it is in the kernel's
//! ephemeral range: between that moment and the server's bind, any
//! connection made on the machine (a client's local port) or any other
//! bind of port 0 may be given the same port, and the server fails with
//! "Address already in use". So ports are taken from below the ephemeral
//! range (`/proc/sys/net/ipv4/ip_local_port_range`), which the kernel
//! never hands out on its own, and each is reserved for the life of the
//! process by an exclusive lock on a file named for it in the temporary
//! directory: the kernel releases the lock when the process ends, however
//! it ends, so a port is never handed out twice while its taker lives.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out.
const LOWEST: u16 = 10_000;

/// A loopback port reserved for this process: no other caller of
/// `free_port` (here or in another process) gets it while this process
/// lives, and it is outside the range the kernel gives to port 0 binds
/// and outgoing connections. For a server in another process, which must
/// be told its port before it binds.
///
/// Servers in this process should bind `127.0.0.1:0` instead and read the
/// port back.
pub fn free_port() -> u16 {
    let (low, high) = range();
    let span = u32::from(high - low) + 1;
    let start = *START.get_or_init(|| std::process::id().wrapping_mul(2_654_435_761) % span);
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = low + offset as u16;
        if let Some(lock) = reserve(port) {
            RESERVED
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(lock);
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 between {low} and {high}");
}

/// Where this process starts in the range (spread by process id, so that
/// test processes started together seldom try the same ports).
static START: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
/// How far this process has gone through the range.
static NEXT: AtomicU32 = AtomicU32::new(0);
/// The lock files of the ports handed out, held until the process ends.
static RESERVED: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// The ports handed out: from [`LOWEST`] to just below the ephemeral
/// range, or above it when it starts too low to leave room below.
fn range() -> (u16, u16) {
    let (ephemeral_low, ephemeral_high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut numbers = text.split_whitespace().map(|n| n.parse::<u16>().ok());
            Some((numbers.next()??, numbers.next()??))
        })
        .unwrap_or((32_768, 60_999));
    if ephemeral_low > LOWEST + 1_000 {
        (LOWEST, ephemeral_low - 1)
    } else if ephemeral_high < u16::MAX - 1_000 {
        (ephemeral_high + 1, u16::MAX)
    } else {
        (LOWEST, u16::MAX)
    }
}

/// The lock of `port` when no other process holds it and the port can be
/// bound on 127.0.0.1 now; `None` otherwise.
fn reserve(port: u16) -> Option<File> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .ok()?;
    file.try_lock().ok()?;
    // Held by something that is not a test (or in TIME_WAIT of a server
    // without SO_REUSEADDR): passed over, the lock let go with the file.
    TcpListener::bind(("127.0.0.1", port)).ok()?;
    Some(file)
}

/// The directory of the ports' lock files, shared by every test process
/// of the user.
fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("pilot-test-ports")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice_and_are_outside_the_ephemeral_range() {
        let (low, high) = range();
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        for port in &ports {
            assert!((low..=high).contains(port), "{port} outside {low}..={high}");
            // Reserved: another process (or a later call) cannot take it.
            let file = OpenOptions::new()
                .write(true)
                .open(lock_dir().join(port.to_string()))
                .unwrap();
            assert!(file.try_lock().is_err(), "{port} is not locked");
        }
    }
}
