//! Ordering tokens without sorting the vocabulary.
//!
//! A token's order key packs its logit and id into one `u64` whose ascending order is "logit
//! descending, then id ascending" — the order the draw walks (docs/sampling.md). Candidates then sort and
//! select as plain integers, and ties always break towards the lower id.

use super::softmax::{LANES, any, sanitize};

/// The draw-order key of a sanitised (never NaN) value.
#[inline(always)]
pub fn order_key(value: f32, id: u32) -> u64 {
    // Adding +0.0 turns -0.0 into +0.0, so equal floats get equal keys.
    let bits = (value + 0.0).to_bits();
    let ascending = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    (u64::from(!ascending) << 32) | u64::from(id)
}

pub fn key_id(key: u64) -> u32 {
    key as u32
}

fn key_value(key: u64) -> f32 {
    let ascending = !((key >> 32) as u32);
    let bits = if ascending >> 31 == 1 {
        ascending & 0x7FFF_FFFF
    } else {
        !ascending
    };
    f32::from_bits(bits)
}

/// Fills `out` with the keys (unsorted) of every sanitised value >= the k-th largest, ties
/// included.
///
/// One pass with a rising bar: keys are buffered until the buffer holds `limit`, then pruned to
/// the best `k` (plus ties) by `select_nth_unstable`, whose k-th value becomes the bar later
/// values must reach. Once the bar is up, nearly every chunk of `LANES` values misses it and is
/// skipped after one vectorised test.
pub fn collect_top_k(values: &[f32], k: usize, out: &mut Vec<u64>) {
    out.clear();
    if k == 0 {
        return;
    }
    let mut limit = (2 * k).max(k + 256);
    let mut bar = f32::NEG_INFINITY;
    for (index, chunk) in values.chunks(LANES).enumerate() {
        if !any(chunk, |value| value >= bar) {
            continue;
        }
        for (offset, &x) in chunk.iter().enumerate() {
            let value = sanitize(x);
            if value >= bar {
                out.push(order_key(value, (index * LANES + offset) as u32));
                if out.len() >= limit {
                    bar = prune(out, k);
                    // Many ties at the bar: grow instead of pruning on every push.
                    limit = limit.max(2 * out.len());
                }
            }
        }
    }
    if out.len() > k {
        prune(out, k);
    }
}

/// Keeps the keys whose value reaches the k-th best value and returns that value.
fn prune(keys: &mut Vec<u64>, k: usize) -> f32 {
    let (_, kth, _) = keys.select_nth_unstable(k - 1);
    let last_tie = *kth | u64::from(u32::MAX);
    keys.retain(|&key| key <= last_tie);
    key_value(last_tie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_value_descending_then_id() {
        let mut keys = [
            order_key(1.0, 3),
            order_key(-0.0, 5),
            order_key(f32::NEG_INFINITY, 0),
            order_key(0.0, 4),
            order_key(f32::MAX, 9),
            order_key(1.0, 2),
            order_key(-1e-30, 1),
        ];
        keys.sort_unstable();
        let ids: Vec<u32> = keys.iter().map(|&k| key_id(k)).collect();
        assert_eq!(ids, [9, 2, 3, 4, 5, 1, 0]);
    }

    #[test]
    fn key_value_round_trips() {
        for value in [0.0, 1.5, -1.5, f32::MAX, f32::NEG_INFINITY, 1e-40, -1e-40] {
            assert_eq!(key_value(order_key(value, 7)), value);
        }
    }

    fn top_k_ids(values: &[f32], k: usize) -> Vec<u32> {
        let mut out = Vec::new();
        collect_top_k(values, k, &mut out);
        out.sort_unstable();
        out.into_iter().map(key_id).collect()
    }

    #[test]
    fn top_k_keeps_ties_at_the_boundary() {
        assert_eq!(top_k_ids(&[1.0, 3.0, 2.0, 2.0, 0.0], 2), [1, 2, 3]);
        assert_eq!(top_k_ids(&[1.0, 3.0, 2.0, 2.0, 0.0], 3), [1, 2, 3]);
        assert_eq!(top_k_ids(&[1.0, 3.0, 2.0, 2.0, 0.0], 4), [1, 2, 3, 0]);
        assert!(top_k_ids(&[1.0], 0).is_empty());
        assert_eq!(top_k_ids(&[f32::NAN, 1.0, f32::INFINITY], 2), [2, 1]);
    }

    #[test]
    fn top_k_survives_many_prunes_and_ties() {
        let values: Vec<f32> = (0..10_000).map(|i| ((i * 7919) % 1000) as f32).collect();
        // Every value 0..1000 appears 10 times, so the best 15 end inside the ties of 998.
        let ids = top_k_ids(&values, 15);
        assert_eq!(ids.len(), 20);
        assert!(ids.iter().all(|&id| values[id as usize] >= 998.0));
        let flat = vec![0.5; 5000];
        assert_eq!(top_k_ids(&flat, 3).len(), 5000);
    }
}
