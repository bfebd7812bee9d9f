//! Memory per stored object: heap bytes held by the memory store, plain and
//! journaled, per object of about 1.4 KB of JSON, and the extra peak while
//! the journal is folded into a snapshot.
//!
//! ```text
//! cargo run --release -p pilot-store-memory --example journal_memory -- 50000
//! ```
//!
//! Heap bytes are counted by a global allocator that wraps the system's
//! (the one `unsafe` block: `GlobalAlloc` is an unsafe trait); they are
//! exact and do not depend on when the allocator returns pages to the
//! system, as RSS would.
#![allow(
    unsafe_code,
    reason = "a counting global allocator: GlobalAlloc is an unsafe trait"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use objects::{object, registry};
use pilot_model::{ConfigStore, DynConfig};
use pilot_store_memory::MemoryConfigStore;
use pilot_store_memory::journal::{self, JournalOptions};

/// The same objects as the `journal` benchmark.
#[path = "../benches/support/objects.rs"]
mod objects;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with the same arguments; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                let live =
                    LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn per_object(bytes: usize, count: usize) -> String {
    format!(
        "{:>7.0} B/object ({:.1} MB)",
        bytes as f64 / count as f64,
        bytes as f64 / 1e6
    )
}

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(50_000);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let dir = tempfile::tempdir().unwrap();

    // The configuration as JSON, in a snapshot file.
    let json_bytes = {
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(dir.path().join("snapshot.json")).unwrap());
        write!(file, "{{\"revision\":{count},\"objects\":[").unwrap();
        for i in 0..count {
            if i > 0 {
                file.write_all(b",").unwrap();
            }
            serde_json::to_writer(&mut file, &object(i)).unwrap();
        }
        file.write_all(b"]}").unwrap();
        file.flush().unwrap();
        std::fs::metadata(dir.path().join("snapshot.json")).unwrap().len() as usize
    };
    println!(
        "{count} objects, {}",
        per_object(json_bytes, count).replace("B/object", "B/object of JSON")
    );

    // The plain memory store, filled by writes.
    let before = live();
    {
        let store = MemoryConfigStore::new(registry());
        for i in 0..count {
            let mut config = object(i);
            config.meta.resource_version = None;
            runtime.block_on(store.create(config)).unwrap();
        }
        println!(
            "memory store:                     {}",
            per_object(live() - before, count)
        );
        let objects: Vec<Arc<DynConfig>> = store.list_now("Rule", None).unwrap();
        let decoded = live();
        let copies: Vec<DynConfig> = objects.iter().map(|o| (**o).clone()).collect();
        println!(
            "  one deep copy of every object:  {}",
            per_object(live() - decoded, count)
        );
        drop(copies);
    }

    // The journaled store, opened from the snapshot.
    let before = live();
    let store = journal::open(
        dir.path(),
        registry(),
        JournalOptions {
            compact_after: usize::MAX,
            ..JournalOptions::default()
        },
    )
    .unwrap();
    store.wait_for_compaction();
    let steady = live();
    println!(
        "journaled store:                  {}",
        per_object(steady - before, count)
    );
    // Peak while the journal is folded into a snapshot (writes go on).
    let mut changed = (*store.list_now("Rule", Some("ns-0")).unwrap()[0]).clone();
    changed.spec["precedence"] = 99.into();
    runtime.block_on(store.update(changed)).unwrap();
    let at_compaction = live();
    PEAK.store(at_compaction, Ordering::Relaxed);
    assert!(store.compact_now());
    store.wait_for_compaction();
    println!(
        "  extra peak during a compaction: {}",
        per_object(PEAK.load(Ordering::Relaxed) - at_compaction, count)
    );
}
