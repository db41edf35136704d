//! Presets are sampling recipes: loading one replaces the knobs that shape the distribution, but
//! the keys that shape the run (how many samples, how long, which seed, what is reported) stay
//! as they are unless the preset names them, so that a change of preset shows in the samples as
//! the preset's knobs and not as fresh noise, a different cut or another number of columns.
//! A preset names the keys that differ from the defaults, as a saved preset file stores them.

use crate::params::SamplingParams;

/// num_samples the playground opens with when its preset leaves it open: enough columns to see
/// a distribution.
pub const START_SAMPLES: u32 = 4;

/// `preset` with every run-shaping key it leaves at its default taken from `current`.
pub fn keep_run_shape(mut preset: SamplingParams, current: &SamplingParams) -> SamplingParams {
    let open = SamplingParams::default();
    macro_rules! keep {
        ($($key:ident),*) => {
            $(if preset.$key == open.$key {
                preset.$key = current.$key.clone();
            })*
        };
    }
    keep!(
        max_tokens,
        seed,
        num_samples,
        stop,
        include_stop_str_in_output,
        logprobs,
        prompt_logprobs
    );
    preset
}

/// The params the playground opens with: `START_SAMPLES` unless the preset names a number.
pub fn starting(preset: SamplingParams) -> SamplingParams {
    let start = SamplingParams {
        num_samples: START_SAMPLES,
        ..SamplingParams::default()
    };
    keep_run_shape(preset, &start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preset_keeps_the_run_shape_it_leaves_open_and_sets_what_it_names() {
        let current = SamplingParams {
            num_samples: 4,
            max_tokens: Some(300),
            seed: Some(7),
            logprobs: Some(5),
            temperature: 0.3,
            ..SamplingParams::default()
        };
        let greedy = SamplingParams::from_yaml("temperature: 0\nmax_tokens: 20").unwrap();
        let loaded = keep_run_shape(greedy, &current);
        assert_eq!(loaded.temperature, 0.0);
        assert_eq!(loaded.max_tokens, Some(20), "named, so the preset's");
        assert_eq!(
            (loaded.num_samples, loaded.seed, loaded.logprobs),
            (4, Some(7), Some(5))
        );
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
