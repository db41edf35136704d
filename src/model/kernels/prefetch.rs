//! Asking the memory for data before a loop reaches it.
//!
//! A decode step streams the weights once and the KV cache once per row, in loops whose
//! arithmetic could hide the wait for memory; left to the hardware's prefetchers, a core keeps
//! too few lines in flight for that. These hints keep more in flight. A prefetch never faults
//! and changes nothing a program can observe, so addresses may run past the end of the data
//! (they are computed with wrapping arithmetic and never dereferenced).

/// Where the lines should stay once they arrive.
#[derive(Clone, Copy)]
pub(crate) enum Keep {
    /// Read once soon and not again for a long time (weights): kept out of the outer caches,
    /// which then hold what is read again (the KV cache, activations).
    Once,
    /// Read soon and again later (the KV cache): in every cache level.
    Cached,
}

const LINE: usize = 64;

/// Prefetches every cache line that `len` bytes from `start` touch.
#[inline(always)]
pub(crate) fn lines(start: *const u8, len: usize, keep: Keep) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_NTA, _MM_HINT_T0, _mm_prefetch};
        let first = start.wrapping_sub(start as usize % LINE);
        let count = (start as usize % LINE + len).div_ceil(LINE);
        for line in 0..count {
            let at = first.wrapping_add(line * LINE).cast();
            // SAFETY: a prefetch reads nothing the program sees and never faults, whatever
            // the address; it is SSE, which every x86-64 CPU has.
            unsafe {
                match keep {
                    Keep::Once => _mm_prefetch::<_MM_HINT_NTA>(at),
                    Keep::Cached => _mm_prefetch::<_MM_HINT_T0>(at),
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len, keep);
}

/// Prefetches `len` elements of `T` from `start`.
#[inline(always)]
pub(crate) fn elements<T>(start: *const T, len: usize, keep: Keep) {
    lines(start.cast(), len * size_of::<T>(), keep);
}
