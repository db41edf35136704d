//! `samplab replay`: a results file's run asked again from what the file says (its prompt,
//! params and seeds), and the first place where the new run parts from it.

use super::events::Request;
use super::prompt::Prompt;
use crate::response::stats::parts_at;
use crate::response::{SampleResponse, StopReason, Trajectory};

/// The request that runs `response`'s samples again, or why it cannot be run again. Branches
/// are left out: they are the user's picks, not draws (see [`own_samples`]).
pub fn request_of(response: &SampleResponse) -> Result<Request, String> {
    let provenance = response
        .provenance
        .as_ref()
        .ok_or("it has no `provenance`")?;
    let samples = own_samples(response);
    let Some(first) = samples.first() else {
        return Err("it holds no samples".to_owned());
    };
    if let Some(server) = &provenance.model.server {
        return Err(format!(
            "it was sampled by a served model ({server}): samplab cannot check which weights a \
             server runs (there is no file to take a sha256 of), and whether a seed gives the \
             same tokens again is the server's to keep; sample it again with `samplab sample \
             --model {} --set seed={}` and compare",
            provenance.model.source, first.seed
        ));
    }
    let prompt = response.prompt.as_ref().ok_or(
        "it keeps no prompt text (the run was given token ids), so there is nothing to run again",
    )?;
    let file_seeds: Vec<u64> = response.trajectories.iter().map(|t| t.seed).collect();
    if provenance.seeds != file_seeds {
        return Err(format!(
            "its provenance names the seeds {:?} but its trajectories carry {file_seeds:?}: the \
             file was edited",
            provenance.seeds
        ));
    }
    if samples.len() != response.params.num_samples as usize {
        return Err(format!(
            "it holds {} samples but its params ask for num_samples {}: the file was edited",
            samples.len(),
            response.params.num_samples
        ));
    }
    if let Some(cut) = samples
        .iter()
        .find(|t| matches!(t.stop_reason, StopReason::Abort | StopReason::Error))
    {
        return Err(format!(
            "sample {} ended with `{}`, cut short before its end: only a run whose samples all \
             ended can be run again",
            cut.index,
            cut.stop_reason.as_str()
        ));
    }
    let mut params = response.params.clone();
    params.seed = Some(first.seed);
    Ok(Request {
        run_id: 1,
        prompt: Prompt::from_record(prompt)?,
        lane: 0,
        params,
        branches: Vec::new(),
    })
}

/// The run's own samples, in order: branches (the user's picks) are not draws to reproduce.
pub fn own_samples(response: &SampleResponse) -> Vec<&Trajectory> {
    response
        .trajectories
        .iter()
        .filter(|t| t.branch.is_none())
        .collect()
}

/// Where a run made again first parts from the file: the token id each has there, `None`
/// where one of them has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    Prompt {
        at: usize,
        file: Option<u32>,
        rerun: Option<u32>,
    },
    Seed {
        sample: u32,
        file: u64,
        rerun: u64,
    },
    Token {
        sample: u32,
        at: usize,
        file: Option<u32>,
        rerun: Option<u32>,
    },
}

/// The first difference between the file's run and `rerun`: in the prompt's tokens, then
/// sample by sample; `None` when every token equals.
pub fn first_difference(file: &SampleResponse, rerun: &SampleResponse) -> Option<Difference> {
    if let Some(at) = parts_at(&file.prompt_token_ids, &rerun.prompt_token_ids) {
        return Some(Difference::Prompt {
            at,
            file: file.prompt_token_ids.get(at).copied(),
            rerun: rerun.prompt_token_ids.get(at).copied(),
        });
    }
    // The same params give as many samples (see [`request_of`]).
    let now = own_samples(rerun);
    own_samples(file)
        .into_iter()
        .zip(now)
        .find_map(|(then, now)| {
            if then.seed != now.seed {
                return Some(Difference::Seed {
                    sample: then.index,
                    file: then.seed,
                    rerun: now.seed,
                });
            }
            parts_at(&then.token_ids, &now.token_ids).map(|at| Difference::Token {
                sample: then.index,
                at,
                file: then.token_ids.get(at).copied(),
                rerun: now.token_ids.get(at).copied(),
            })
        })
}

/// Tokens the file's own samples hold, which a run that equals it reproduced.
pub fn sample_tokens(response: &SampleResponse) -> usize {
    own_samples(response)
        .iter()
        .map(|t| t.token_ids.len())
        .sum()
}
