//! Heap allocations made by the HPACK decoder, counted by a global allocator
//! that wraps the system's (the one `unsafe` block: `GlobalAlloc` is an
//! unsafe trait). Counts are per thread, so tests running side by side do not
//! see each other's.
#![allow(
    unsafe_code,
    reason = "a counting global allocator: GlobalAlloc is an unsafe trait"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use pilot_h2::hpack::{Decoder, Encoder};

struct Counting;

thread_local! {
    /// Allocations (and reallocations) made by this thread.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as the caller promised for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Decodes `block`, handing the fields to a callback that only looks at
/// them; returns the allocations made.
fn allocations(decoder: &mut Decoder, block: &[u8]) -> usize {
    let mut fields = 0;
    let before = ALLOCATIONS.with(Cell::get);
    decoder.decode(block, 16 << 10, |_, _| fields += 1).unwrap();
    let made = ALLOCATIONS.with(Cell::get) - before;
    assert!(fields > 0);
    made
}

/// The request headers of an Envoy ADS stream.
const ADS_REQUEST: &[(&[u8], &[u8])] = &[
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (
        b":path",
        b"/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    ),
    (b":authority", b"xds_cluster"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"user-agent", b"envoy/1.36.2"),
    (b"x-envoy-internal", b"true"),
    (b"x-forwarded-for", b"10.1.2.3"),
];

/// An HPACK integer (RFC 7541 §5.1).
fn push_int(out: &mut Vec<u8>, value: usize, prefix: u32, flags: u8) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// `fields` as literals with incremental indexing, literal names, raw
/// strings: every field becomes a dynamic table entry.
fn indexing_block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x40);
        for s in [name, value] {
            push_int(&mut block, s.len(), 7, 0);
            block.extend_from_slice(s);
        }
    }
    block
}

#[test]
fn raw_literals_and_indexed_fields_allocate_nothing() {
    // Literals without indexing, no Huffman: `:status 200` style fields by
    // static index, the rest raw.
    let mut block = Vec::new();
    for (name, value) in ADS_REQUEST {
        block.push(0x00);
        for s in [name, value] {
            push_int(&mut block, s.len(), 7, 0);
            block.extend_from_slice(s);
        }
    }
    block.extend_from_slice(&[0x82, 0x86, 0x84]);
    let mut decoder = Decoder::new(4096);
    assert_eq!(allocations(&mut decoder, &block), 0);
    assert_eq!(decoder.allocated(), 0);
}

#[test]
fn huffman_strings_allocate_one_scratch_buffer_per_block() {
    let mut block = BytesMut::new();
    Encoder::encode(ADS_REQUEST.iter().copied(), &mut block);
    let mut decoder = Decoder::new(4096);
    for _ in 0..3 {
        assert_eq!(allocations(&mut decoder, &block), 1);
    }
    assert_eq!(decoder.allocated(), 0);
}

#[test]
fn the_table_allocates_as_it_grows_and_indexed_fields_do_not() {
    let mut decoder = Decoder::new(4096);
    let first = allocations(&mut decoder, &indexing_block(ADS_REQUEST));
    let held = decoder.allocated();
    // The entries' bytes and their positions, grown by doubling.
    assert!((1..=8).contains(&first), "{first} allocations");
    let content: usize = ADS_REQUEST.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(
        held >= content && held <= 2 * content + 256,
        "{held} bytes for {content}"
    );
    eprintln!(
        "ADS request headers, {} fields with indexing: {first} allocations, table {held} bytes \
         ({content} bytes of names and values, {} by RFC 7541 size)",
        ADS_REQUEST.len(),
        decoder.table_size()
    );

    // The next stream's headers, all indexed from the dynamic table.
    let mut block = Vec::new();
    for i in (0..ADS_REQUEST.len()).rev() {
        push_int(&mut block, 62 + i, 7, 0x80);
    }
    for _ in 0..3 {
        assert_eq!(allocations(&mut decoder, &block), 0);
    }
    assert_eq!(decoder.allocated(), held);

    // The peer acknowledges a limit of 0: the update empties and frees the
    // table.
    decoder.set_max_table_size(0);
    assert_eq!(allocations(&mut decoder, &[0x20, 0x82]), 0);
    assert_eq!(decoder.allocated(), 0);
}
