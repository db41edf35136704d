//! What a preset sets when the playground loads it: every key it names, and the playground's
//! starting values for the keys it leaves open (`START_SAMPLES` samples, `START_MAX_TOKENS`
//! tokens, no stop, no logprobs), so that the params shown are the preset's and `*`, reset and
//! save agree with them. Only the seed stays as it was when the preset names none, so that a
//! change of preset shows in the samples as the preset's knobs and not as fresh noise.
//! A preset names the keys that differ from the defaults, as a saved preset file stores them.

use crate::params::SamplingParams;

/// num_samples the playground opens with when its preset leaves it open: enough columns to see
/// a distribution.
pub const START_SAMPLES: u32 = 4;

/// `preset` as the playground loads it over `current`: its open keys at the starting values,
/// the seed kept where it names none.
pub fn load_over(preset: SamplingParams, current: &SamplingParams) -> SamplingParams {
    let mut params = starting(preset);
    if params.seed.is_none() {
        params.seed = current.seed;
    }
    params
}

/// The params the playground opens with: `START_SAMPLES` unless the preset names a number.
pub fn starting(mut preset: SamplingParams) -> SamplingParams {
    if preset.num_samples == SamplingParams::default().num_samples {
        preset.num_samples = START_SAMPLES;
    }
    preset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preset_sets_what_it_names_starting_values_for_the_rest_and_keeps_the_seed() {
        let current = SamplingParams {
            num_samples: 2,
            max_tokens: Some(40),
            seed: Some(7),
            logprobs: Some(5),
            stop: Some(crate::params::TokenTexts(vec![
                crate::params::TokenText::Token(9),
            ])),
            temperature: 0.3,
            ..SamplingParams::default()
        };
        let greedy = SamplingParams::from_yaml("temperature: 0\nmax_tokens: 20").unwrap();
        let loaded = load_over(greedy, &current);
        assert_eq!(loaded.temperature, 0.0);
        assert_eq!(loaded.max_tokens, Some(20), "named, so the preset's");
        assert_eq!(
            loaded.num_samples, START_SAMPLES,
            "open: the starting value"
        );
        assert_eq!((loaded.stop, loaded.logprobs), (None, None), "open: none");
        assert_eq!(loaded.seed, Some(7), "open: the seed stays");
        let seeded = SamplingParams::from_yaml("seed: 3").unwrap();
        assert_eq!(load_over(seeded, &current).seed, Some(3));
    }

    #[test]
    fn the_playground_opens_with_four_samples_unless_the_preset_says() {
        assert_eq!(
            starting(SamplingParams::default()).num_samples,
            START_SAMPLES
        );
        let three = SamplingParams::from_yaml("num_samples: 3").unwrap();
        assert_eq!(starting(three).num_samples, 3);
        assert_eq!(starting(SamplingParams::default()).seed, None);
    }
}
