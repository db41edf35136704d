//! Signals whose default action ends the process (TERM, HUP, QUIT, INT) end the playground
//! through the same path as `q`, so that the terminal is restored rather than left on the
//! alternate screen, in raw mode, with mouse tracking on and the cursor hidden.

use tokio::signal::unix::{SignalKind, signal};

/// The signals caught, each ending the process by default.
const ENDING: [SignalKind; 4] = [
    SignalKind::terminate(),
    SignalKind::hangup(),
    SignalKind::quit(),
    SignalKind::interrupt(),
];

/// Resolves with the number of the first of these signals to arrive; they are caught from the
/// first poll on.
pub async fn ending() -> std::io::Result<i32> {
    let mut streams = ENDING
        .iter()
        .map(|&kind| Ok((kind.as_raw_value(), signal(kind)?)))
        .collect::<std::io::Result<Vec<_>>>()?;
    let arrivals = streams.iter_mut().map(|(number, stream)| {
        Box::pin(async move {
            stream.recv().await;
            *number
        })
    });
    Ok(futures::future::select_all(arrivals).await.0)
}
