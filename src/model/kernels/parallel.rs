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
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `work` over `0..items` on the pool's threads and the caller, in contiguous ranges.
///
/// Each thread owns an equal share and walks it from its front, so that a product streams
/// its weights through each core in one run (a range that starts elsewhere costs the
/// prefetchers a restart). It takes its share in pieces that shrink as the share does, an
/// eighth of what is left, so that its last piece is a single item. A thread whose share is
/// done takes the back half of what is left of the fullest other share and walks that. The
/// threads then finish within about one item of each other, whichever of them started late
/// or ran slow. (With four fixed ranges a thread, taken in turn, the first thread done waited
/// for the other's last range: two cores spent 9% of an eight-row decode step waiting, where
/// they now spend 6%.)
pub(crate) fn for_each_range(items: usize, work: impl Fn(Range<usize>) + Sync) {
    if items == 0 {
        return;
    }
    if items == 1 || is_pool_thread() || SPLITTING.with(Cell::get) || items > Share::MOST {
        // One item cannot be split, and the pool does not nest: a loop inside a loop runs
        // whole on its thread (as would one too long to count in a share, were there one).
        return work(0..items);
    }
    let pool = candle_core::utils::barrier_pool();
    let shares = Shares::new(items, pool.n_workers() + 1);
    let _splitting = Splitting::start();
    pool.execute(|thread| {
        let own = &shares.0[thread % shares.0.len()];
        loop {
            while let Some(range) = own.front() {
                work(range);
            }
            if !shares.steal_into(own) {
                break;
            }
        }
    });
}

/// The threads' shares of a loop's items: each the `front..back` of what is left of it, in
/// one word so that its owner's claims and another thread's theft never overlap.
struct Shares(Vec<Share>);

/// A share's `front` (high half) and `back` (low half), on a cache line of its own: its
/// owner claims from it once a piece, and no other thread touches it until it steals.
#[repr(align(128))]
struct Share(AtomicU64);

/// The fraction of a share's remaining items its owner takes as one piece.
const PIECE_DIVISOR: usize = 8;

impl Share {
    /// The most items a share's halves count.
    const MOST: usize = u32::MAX as usize;

    fn pack(front: usize, back: usize) -> u64 {
        ((front as u64) << 32) | back as u64
    }

    fn unpack(word: u64) -> (usize, usize) {
        ((word >> 32) as usize, (word & u64::from(u32::MAX)) as usize)
    }

    /// The next piece from the front, if any is left.
    fn front(&self) -> Option<Range<usize>> {
        self.take(|front, back| {
            let end = front + (back.saturating_sub(front) / PIECE_DIVISOR).max(1);
            (front < back).then_some((front..end, end, back))
        })
    }

    /// Takes the back half of what is left (none of one item).
    fn back_half(&self) -> Option<Range<usize>> {
        self.take(|front, back| {
            let half = back.saturating_sub(front) / 2;
            (half > 0).then_some((back - half..back, front, back - half))
        })
    }

    /// Takes the range `cut` picks from `front..back` as it stands, leaving the `front..back`
    /// it says, in one step against any other thread's taking.
    fn take(
        &self,
        cut: impl Fn(usize, usize) -> Option<(Range<usize>, usize, usize)>,
    ) -> Option<Range<usize>> {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let (front, back) = Self::unpack(word);
            let (taken, front, back) = cut(front, back)?;
            match self.0.compare_exchange_weak(
                word,
                Self::pack(front, back),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(taken),
                Err(now) => word = now,
            }
        }
    }

    fn left(&self) -> usize {
        let (front, back) = Self::unpack(self.0.load(Ordering::Acquire));
        back.saturating_sub(front)
    }
}

impl Shares {
    /// `items` in `threads` equal contiguous shares.
    fn new(items: usize, threads: usize) -> Self {
        debug_assert!(items <= Share::MOST);
        let bound = |t: usize| items * t / threads;
        Self(
            (0..threads)
                .map(|t| Share(AtomicU64::new(Share::pack(bound(t), bound(t + 1)))))
                .collect(),
        )
    }

    /// Moves the back half of the fullest share into `own` (which is empty); false once no
    /// share has two items left to split.
    fn steal_into(&self, own: &Share) -> bool {
        loop {
            let fullest = self.0.iter().map(|share| (share, share.left()));
            let Some((victim, left)) = fullest.max_by_key(|&(_, left)| left) else {
                return false;
            };
            if left < 2 {
                // A last item is its owner's, who is at work on the one before it.
                return false;
            }
            if let Some(taken) = victim.back_half() {
                own.0
                    .store(Share::pack(taken.start, taken.end), Ordering::Release);
                return true;
            }
        }
    }
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
    for_each_range(items, |range| {
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
    use std::sync::atomic::AtomicUsize;

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
    fn every_item_is_taken_once_however_slow_its_neighbours() {
        for items in [0, 1, 2, 3, 7, 64, 1001] {
            // Some items take far longer than the rest, so that threads steal.
            let counts: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
            for_each_range(items, |range| {
                for i in range {
                    if i % 97 == 3 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    counts[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            let counts: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            assert_eq!(counts, vec![1; items], "{items} items");
        }
    }

    #[test]
    fn an_owner_walks_its_share_in_shrinking_pieces_and_a_thief_takes_the_back_half() {
        let shares = Shares::new(100, 2);
        let (first, second) = (&shares.0[0], &shares.0[1]);
        // The first share, 0..50, from its front: an eighth of what is left, down to one.
        let mut pieces = Vec::new();
        while let Some(piece) = first.front() {
            pieces.push(piece);
        }
        assert_eq!(pieces[..3], [0..6, 6..11, 11..15]);
        assert_eq!(pieces.last(), Some(&(49..50)));
        assert!(pieces.windows(2).all(|p| p[0].end == p[1].start));
        // Its owner, done, takes the back half of the second's 50..100 and walks it.
        assert_eq!(second.front(), Some(50..56));
        assert!(shares.steal_into(first));
        assert_eq!((first.left(), second.left()), (22, 22));
        assert_eq!(first.front(), Some(78..80));
        assert_eq!(second.front(), Some(56..58));
        // One item left in every share is its owner's: nothing to steal.
        let one = Shares::new(2, 2);
        assert!(!one.steal_into(&one.0[0]));
    }

    #[test]
    fn a_loop_started_inside_the_pool_runs_whole_on_its_thread() {
        let counts: Vec<AtomicUsize> = (0..8).map(|_| AtomicUsize::new(0)).collect();
        for_each_range(8, |outer| {
            for_each_range(4, |inner| {
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
        for_each_range(5, |range| {
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
