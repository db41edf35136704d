//! The parallel loops of our CPU kernels, on candle's barrier pool.
//!
//! A decode step is a few hundred short parallel sections (every product, every layer's
//! attention). rayon's workers fall asleep between them and take tens of microseconds to wake
//! for the next, a sixth of a step on two cores; the barrier pool's workers spin through the
//! gaps of a forward pass and park only when it ends.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Mutex;
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
    if items == 1 || is_pool_thread() || SPLITTING.with(Cell::get) {
        // One item cannot be split, and the pool does not nest: a loop inside a loop runs
        // whole on its thread.
        return work(0..items);
    }
    let pool = candle_core::utils::barrier_pool();
    let size = items.div_ceil((pool.n_workers() + 1) * ranges.max(1));
    let next = AtomicUsize::new(0);
    let _splitting = Splitting::start();
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

thread_local! {
    /// Whether this thread is inside [`for_each_range`], as the caller taking part.
    static SPLITTING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as splitting a loop until dropped (a panic included).
struct Splitting;

impl Splitting {
    fn start() -> Self {
        SPLITTING.with(|s| s.set(true));
        Splitting
    }
}

impl Drop for Splitting {
    fn drop(&mut self) {
        SPLITTING.with(|s| s.set(false));
    }
}

/// `work(i)` for each `i` in `0..items` on the barrier pool's threads (several per thread), its
/// results in order.
pub(crate) fn in_parallel<T: Send>(items: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let slots: Vec<Mutex<Option<T>>> = (0..items).map(|_| Mutex::new(None)).collect();
    for_each_range(items, 4, |range| {
        for i in range {
            let value = work(i);
            *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner()))
        .map(|value| value.expect("every item ran"))
        .collect()
}

/// Whether this thread is one of the pool's workers (read from its name once per thread).
pub(crate) fn is_pool_thread() -> bool {
    thread_local! {
        static POOL_THREAD: bool = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("candle-bp-"));
    }
    POOL_THREAD.with(|&pool| pool)
}

/// An output that parallel tasks fill at places no two of them share.
pub(crate) struct Disjoint<'a, T = f32> {
    values: *mut T,
    len: usize,
    _buffer: PhantomData<&'a mut [T]>,
}

// SAFETY: tasks write through it only at disjoint places (the contract of `write`).
unsafe impl<T: Send> Sync for Disjoint<'_, T> {}

impl<'a, T: Copy> Disjoint<'a, T> {
    pub(crate) fn new(buffer: &'a mut [T]) -> Self {
        Self {
            values: buffer.as_mut_ptr(),
            len: buffer.len(),
            _buffer: PhantomData,
        }
    }

    /// `len` values to be written once each, in place of a buffer of zeros that tasks would
    /// overwrite: [`Disjoint::filled`] hands the vector back once every value is written.
    /// (Zeroing a decode step's logits ahead of the product costs as much as a small product,
    /// on one thread while the others wait.)
    pub(crate) fn uninit(buffer: &'a mut Vec<T>, len: usize) -> Self {
        buffer.clear();
        buffer.reserve_exact(len);
        Self {
            values: buffer.as_mut_ptr(),
            len,
            _buffer: PhantomData,
        }
    }

    /// The values at `range`, to fill.
    ///
    /// # Safety
    /// No other task writes or reads `range` while the buffer is shared, and the values
    /// there are initialised (not a buffer from [`Disjoint::uninit`]).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn part(&self, range: Range<usize>) -> &mut [T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "part past the output"
        );
        // SAFETY: in bounds (checked above), initialised, and the caller owns the range.
        unsafe { std::slice::from_raw_parts_mut(self.values.add(range.start), range.len()) }
    }

    /// Copies `values` to `at..`.
    ///
    /// # Safety
    /// No other task writes or reads `at..at + values.len()` while the buffer is shared.
    pub(crate) unsafe fn write(&self, at: usize, values: &[T]) {
        assert!(at + values.len() <= self.len, "write past the output");
        // SAFETY: in bounds (checked above), and the caller owns the range; no reference to
        // the destination is made, which may not be initialised yet.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), self.values.add(at), values.len())
        };
    }
}

/// Declares the `len` values of a buffer from [`Disjoint::uninit`] written.
///
/// # Safety
/// Every value `0..len` was written through the `Disjoint` made with that `len`.
pub(crate) unsafe fn filled<T>(buffer: &mut Vec<T>, len: usize) {
    assert!(len <= buffer.capacity(), "filled past the buffer");
    // SAFETY: within the capacity `uninit` reserved, and (the caller's promise) written.
    unsafe { buffer.set_len(len) };
}

/// Runs a forward pass whose products and attention are all ours. candle's own small ops
/// (norms, rotary embeddings) split their work with rayon: here they run inline, in a pool of
/// one thread, instead of waking a third set of threads to contend for the cores with the
/// barrier pool's. Each calling thread (an engine's) has its own, so that two models' forward
/// passes do not wait for each other whole.
pub(crate) fn inline_rayon<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    thread_local! {
        static POOL: Option<rayon::ThreadPool> =
            rayon::ThreadPoolBuilder::new().num_threads(1).build().ok();
    }
    POOL.with(|pool| match pool {
        Some(pool) => pool.install(work),
        None => work(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_parallel_returns_every_result_in_order() {
        for items in [0, 1, 2, 7, 65] {
            assert_eq!(
                in_parallel(items, |i| i * 3),
                (0..items).map(|i| i * 3).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn every_item_is_taken_once_whatever_the_split() {
        for items in [0, 1, 2, 3, 7, 64, 1001] {
            for ranges in [0, 1, 4] {
                let mut seen = vec![0f32; items];
                let out = Disjoint::new(&mut seen);
                for_each_range(items, ranges, |range| {
                    for i in range {
                        // SAFETY: each item is written by the task that takes it.
                        unsafe { out.write(i, &[i as f32 + 1.0]) };
                    }
                });
                let expected: Vec<f32> = (1..=items).map(|i| i as f32).collect();
                assert_eq!(seen, expected, "{items} items in {ranges} ranges a thread");
            }
        }
    }

    #[test]
    fn a_loop_started_inside_the_pool_runs_whole_on_its_thread() {
        let counts: Vec<AtomicUsize> = (0..8).map(|_| AtomicUsize::new(0)).collect();
        for_each_range(8, 1, |outer| {
            for_each_range(4, 1, |inner| {
                for i in outer.clone() {
                    counts[i].fetch_add(inner.len(), Ordering::Relaxed);
                }
            });
        });
        // Each outer item's inner loop covered its 4 items once, on whichever thread ran it.
        let totals: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(totals, vec![4; 8]);
    }

    #[test]
    fn an_uninitialised_output_is_handed_back_once_written() {
        let mut buffer = vec![7.0; 3];
        let out = Disjoint::uninit(&mut buffer, 5);
        for_each_range(5, 1, |range| {
            for i in range {
                // SAFETY: each item is written by the task that takes it.
                unsafe { out.write(i, &[i as f32]) };
            }
        });
        // SAFETY: every value 0..5 was written above.
        unsafe { filled(&mut buffer, 5) };
        assert_eq!(buffer, [0.0, 1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    #[should_panic(expected = "write past the output")]
    fn a_write_past_the_end_is_refused() {
        let mut buffer = vec![0f32; 4];
        let out = Disjoint::new(&mut buffer);
        // SAFETY: one thread; the write is refused before any copy.
        unsafe { out.write(3, &[1.0, 2.0]) };
    }
}
