//! The parallel loops of our CPU kernels, on candle's barrier pool.
//!
//! A decode step is a few hundred short parallel sections (every product, every layer's
//! attention). rayon's workers fall asleep between them and take tens of microseconds to wake
//! for the next, a sixth of a step on two cores; the barrier pool's workers spin through the
//! gaps of a forward pass and park only when it ends.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `work` over `0..items`, in `ranges` contiguous ranges per thread (the pool's and the
/// caller) that the threads take in turn. One range each streams a decode step's weights
/// through each core in one run (every new range costs the prefetchers a restart); several
/// let a thread slowed by the machine leave its last ranges to the others, which pays where
/// the work is compute.
pub(crate) fn for_each_range(items: usize, ranges: usize, work: impl Fn(Range<usize>) + Sync) {
    if items == 0 {
        return;
    }
    if is_pool_thread() {
        // The pool does not nest: a worker that asks runs the whole loop itself.
        return work(0..items);
    }
    let pool = candle_core::utils::barrier_pool();
    let size = items.div_ceil((pool.n_workers() + 1) * ranges.max(1));
    let next = AtomicUsize::new(0);
    pool.execute(|_| {
        loop {
            let start = next.fetch_add(size, Ordering::Relaxed);
            if start >= items {
                break;
            }
            work(start..(start + size).min(items));
        }
    });
}

/// Whether this thread is one of the pool's workers.
pub(crate) fn is_pool_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|name| name.starts_with("candle-bp-"))
}

/// An output that parallel tasks fill at places no two of them share.
pub(crate) struct Disjoint<'a> {
    values: *mut f32,
    len: usize,
    _buffer: PhantomData<&'a mut [f32]>,
}

// SAFETY: tasks write through it only at disjoint places (the contract of `write`).
unsafe impl Sync for Disjoint<'_> {}

impl<'a> Disjoint<'a> {
    pub(crate) fn new(buffer: &'a mut [f32]) -> Self {
        Self {
            values: buffer.as_mut_ptr(),
            len: buffer.len(),
            _buffer: PhantomData,
        }
    }

    /// Copies `values` to `at..`.
    ///
    /// # Safety
    /// No other task writes or reads `at..at + values.len()` while the buffer is shared.
    pub(crate) unsafe fn write(&self, at: usize, values: &[f32]) {
        assert!(at + values.len() <= self.len, "write past the output");
        // SAFETY: in bounds (checked above), and the caller owns the range.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), self.values.add(at), values.len());
        }
    }
}

/// Runs a forward pass whose products and attention are all ours. candle's own small ops
/// (norms, rotary embeddings) split their work with rayon: here they run inline, in a pool of
/// one thread, instead of waking a third set of threads to contend for the cores with the
/// barrier pool's.
pub(crate) fn inline_rayon<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().num_threads(1).build().ok());
    match pool {
        Some(pool) => pool.install(work),
        None => work(),
    }
}
