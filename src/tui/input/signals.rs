//! Signals whose default action ends the process (TERM, HUP, QUIT, INT) end the playground
//! through the same path as `q`, so that the terminal is restored rather than left on the
//! alternate screen, in raw mode, with mouse tracking on and the cursor hidden.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals caught, each ending the process by default.
const ENDING: [SignalKind; 4] = [
    SignalKind::terminate(),
    SignalKind::hangup(),
    SignalKind::quit(),
    SignalKind::interrupt(),
];

/// The ending signals, caught from the moment [`catch`] returns: before the first frame is
/// drawn, so that a signal sent as soon as the playground shows still restores the terminal.
pub struct Caught(Vec<(i32, Signal)>);

/// Catches the ending signals now; call it inside the runtime.
pub fn catch() -> std::io::Result<Caught> {
    ENDING
        .iter()
        .map(|&kind| Ok((kind.as_raw_value(), signal(kind)?)))
        .collect::<std::io::Result<Vec<_>>>()
        .map(Caught)
}

impl Caught {
    /// Resolves with the number of the first signal to arrive.
    pub async fn first(mut self) -> i32 {
        let arrivals = self.0.iter_mut().map(|(number, stream)| {
            Box::pin(async move {
                stream.recv().await;
                *number
            })
        });
        futures::future::select_all(arrivals).await.0
    }
}
