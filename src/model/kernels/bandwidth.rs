//! How fast this machine streams memory into the kernels' threads: the limit of a decode step
//! that reads every weight once, which `samplab bench` sets its figures against.

use super::parallel::for_each_range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The buffer read: far past any cache, small beside a model.
const PROBE_BYTES: usize = 512 << 20;
/// Words per piece a thread sums before it adds to the total.
const PIECE: usize = 1 << 16;

/// GB/s read by the kernels' threads summing a buffer far larger than the caches, each its
/// own contiguous stretch as a decode step's products stream their weights; best of a few
/// passes.
pub fn read_gb_per_s() -> f64 {
    // Ones, written: the pages exist before the first timed pass.
    let words = vec![1u64; PROBE_BYTES / 8];
    let pieces = words.len() / PIECE;
    let mut best = 0f64;
    for _ in 0..4 {
        let total = AtomicU64::new(0);
        let start = Instant::now();
        for_each_range(pieces, 1, |range| {
            let mut sum = 0u64;
            for piece in &words[range.start * PIECE..range.end * PIECE] {
                sum = sum.wrapping_add(*piece);
            }
            total.fetch_add(sum, Ordering::Relaxed);
        });
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(total.into_inner());
        best = best.max(PROBE_BYTES as f64 / seconds / 1e9);
    }
    best
}
