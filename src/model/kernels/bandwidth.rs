//! How fast this machine streams memory into the kernels' threads: the limit of a decode step
//! that reads every weight once, which `samplab bench` sets its figures against; and how big
//! its last-level cache is, which lifts that limit for weights it can hold.

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
        for_each_range(pieces, |range| {
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

/// The largest cache of CPU 0, in bytes, as Linux lists it (`None` elsewhere, or unreadable).
/// Weights no larger than it can stay there from one decode step to the next, and then a step
/// reads them faster than memory streams.
pub fn last_level_cache_bytes() -> Option<u64> {
    let caches = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    caches
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("size")).ok())
        .filter_map(|size| cache_size(&size))
        .max()
}

/// A sysfs cache size (`32K`, `260M`, `1G`, or plain bytes) in bytes.
fn cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (at, 'K') => (&text[..at], 1 << 10),
        (at, 'M') => (&text[..at], 1 << 20),
        (at, 'G') => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::cache_size;

    #[test]
    fn sysfs_cache_sizes_read_in_bytes() {
        assert_eq!(cache_size("32K\n"), Some(32 << 10));
        assert_eq!(cache_size("260M"), Some(260 << 20));
        assert_eq!(cache_size("1G"), Some(1 << 30));
        assert_eq!(cache_size("4096"), Some(4096));
        for bad in ["", "M", "12X", "-3K", "99999999999999999999G"] {
            assert_eq!(cache_size(bad), None, "{bad:?}");
        }
    }
}
