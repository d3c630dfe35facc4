//! The warm-up before a set's counted runs: calibrate each workload once, then write one byte to
//! every page of as much anonymous memory as the largest run will use, and give it back.
//!
//! Why memory and not a whole run: what makes the first big run after boot or an idle spell slow
//! is memory used for the first time — pages the kernel has not initialized yet (deferred page
//! init) and pages the host has not backed yet, 8× slower a page on M1 (docs/first-run). Touching
//! them pays both once; freed, they go back to the page allocator's free lists, from which the
//! counted runs take them. A warm-up run did the same at the cost of a whole run of each workload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Result};

use host::procfs;
use host::signals::Interrupts;
use record::{Touched, TouchedChunk};

/// Memory is touched in chunks of this size: small enough to see where cold memory begins, large
/// enough that each is its own mapping (glibc maps anything past 32 MiB on its own and unmaps it
/// when freed).
pub const CHUNK_BYTES: u64 = 256 << 20;

/// Writes one byte to every page of `wanted` bytes of fresh anonymous memory, chunk by chunk on
/// `threads` threads, keeps it all until the last chunk is written (so the pages are distinct),
/// then frees it. Stops between chunks on a signal.
pub fn touch(wanted: u64, threads: u32, interrupts: &Interrupts) -> Result<Touched> {
    let page = procfs::page_size();
    if page == 0 {
        bail!("cannot read the page size");
    }
    let chunks = wanted.div_ceil(CHUNK_BYTES);
    let next = AtomicU64::new(0);
    let held: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    let timed: Mutex<Vec<TouchedChunk>> = Mutex::new(Vec::new());
    let managed_kb_before = procfs::free_pages().map(|f| f.managed_kb);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= chunks || interrupts.received().is_some() {
                    break;
                }
                let bytes = CHUNK_BYTES.min(wanted - i * CHUNK_BYTES) as usize;
                let t = Instant::now();
                let mut chunk: Vec<u8> = Vec::with_capacity(bytes);
                for slot in chunk.spare_capacity_mut().iter_mut().step_by(page as usize) {
                    slot.write(1);
                }
                let ns = t.elapsed().as_nanos() as u64;
                timed.lock().unwrap().push(TouchedChunk {
                    bytes: bytes as u64,
                    ns,
                });
                held.lock().unwrap().push(chunk);
            });
        }
    });
    let managed_kb_after = procfs::free_pages().map(|f| f.managed_kb);
    drop(held);
    let chunks = timed.into_inner().unwrap();
    let bytes: u64 = chunks.iter().map(|c| c.bytes).sum();
    Ok(Touched {
        wanted_bytes: wanted,
        bytes,
        page_bytes: page,
        short: interrupts
            .received()
            .map(|sig| format!("stopped by {}", record::process::signal_name(sig))),
        chunks,
        threads: threads.max(1),
        wall_ns: started.elapsed().as_nanos() as u64,
        managed_kb_before,
        managed_kb_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_written_and_timed() {
        let interrupts = Interrupts::none();
        let wanted = CHUNK_BYTES + (8 << 20);
        let t = touch(wanted, 2, &interrupts).unwrap();
        assert_eq!(t.bytes, wanted);
        assert_eq!(t.chunks.len(), 2);
        assert!(t.chunks.iter().all(|c| c.ns > 0));
        assert_eq!(t.per_page_ns().len(), 2);
        assert!(t.short.is_none());
    }
}
