//! A panic in a model's work (a bug, or a file no check foresaw) ends that model's load or run
//! with an error, instead of the engine thread; the UI and the other models keep working.
//!
//! The process-wide panic hook still runs first, on the panicking thread; the playground's hook
//! asks [`panic_is_contained`] so that it leaves the terminal alone for a panic that is caught.

use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    static CONTAINING: Cell<bool> = const { Cell::new(false) };
}

/// Contained sections running now, on any thread: a matrix product's pool thread that panics
/// works for one of them, and its panic reaches the caller inside the section.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Runs `work`, turning a panic into its message.
pub fn contain<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    let outer = CONTAINING.with(|c| c.replace(true));
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let result = catch_unwind(AssertUnwindSafe(work));
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    CONTAINING.with(|c| c.set(outer));
    result.map_err(|payload| panic_message(payload.as_ref()))
}

/// Whether a panic on this thread will be caught by [`contain`]: this thread is inside it, or is
/// a thread pool's while a contained section runs (rayon and candle's barrier pool hand a pool
/// thread's panic back to the thread that started the parallel work).
pub fn panic_is_contained() -> bool {
    let pool_thread =
        rayon::current_thread_index().is_some() || crate::model::parallel::is_pool_thread();
    CONTAINING.with(Cell::get) || (pool_thread && ACTIVE.load(Ordering::SeqCst) > 0)
}

/// In a debug build, `SAMPLAB_PANIC_FOR_TESTS=<stage>` makes that stage (`run`) panic, so that
/// the end-to-end test sees a contained panic in a real terminal; release builds ignore it.
pub(crate) fn panic_for_tests(stage: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("SAMPLAB_PANIC_FOR_TESTS").is_ok_and(|v| v == stage) {
        panic!("injected for a test at the {stage} stage");
    }
    #[cfg(not(debug_assertions))]
    let _ = stage;
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message");
    format!("internal error (a panic: {text}); please report it with the model file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_the_flag_is_set_only_inside() {
        assert!(!panic_is_contained());
        let seen = contain(panic_is_contained).unwrap();
        assert!(seen);
        let err = contain(|| -> u32 { panic!("index {} out of bounds", 7) }).unwrap_err();
        assert!(err.contains("index 7 out of bounds"), "{err}");
        assert!(!panic_is_contained());
        assert_eq!(contain(|| 5), Ok(5));
    }
}
