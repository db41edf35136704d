//! Export snippets: exact text for a rich case per target, the documented notes, and escaping
//! checked by the real parsers (python3's `ast`, bash, serde_json) where they are installed.

use samplab::export::{
    ExportContext, ExportFormat, export, openai_body, to_llama_cpp, to_openai, to_transformers,
    to_twinkle, to_vllm,
};
use samplab::params::{Engine, SamplingParams, TokenText, TokenTexts};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

const HUB: ExportContext =
    ExportContext::raw("Once upon a time", "TinyLlama/TinyLlama-1.1B-Chat-v1.0");

const GGUF: ExportContext = ExportContext::raw("Once upon a time", "stories260K.gguf");

/// A stop string and prompt that every quoting scheme must get right.
const TRICKY: &str = "say \"hi\", it's a\\b\nnext ✓ café";

fn rich() -> SamplingParams {
    SamplingParams {
        max_tokens: Some(64),
        seed: Some(42),
        stop: Some(TokenTexts(vec![
            TokenText::Text("\n\n".into()),
            TokenText::Token(13),
            TokenText::Text("The End".into()),
        ])),
        include_stop_str_in_output: false,
        temperature: 0.7,
        top_k: 40,
        top_p: 0.9,
        min_p: 0.05,
        repetition_penalty: 1.1,
        num_samples: 4,
        logprobs: Some(5),
        prompt_logprobs: Some(0),
        ..SamplingParams::default()
    }
}

fn greedy() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        num_samples: 3,
        logprobs: Some(0),
        ..SamplingParams::default()
    }
}

fn comments(snippet: &str) -> String {
    snippet
        .lines()
        .filter(|line| line.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_comment(snippet: &str, needle: &str) {
    let comments = comments(snippet);
    assert!(
        comments.contains(needle),
        "no comment containing {needle:?} in:\n{comments}"
    );
}

fn assert_no_comment(snippet: &str, needle: &str) {
    let comments = comments(snippet);
    assert!(
        !comments.contains(needle),
        "unexpected comment containing {needle:?} in:\n{comments}"
    );
}

/// Runs `program args` with `stdin`, or `None` when the program is not installed.
fn run(program: &str, args: &[&str], stdin: &str) -> Option<Vec<u8>> {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(_) => {
            eprintln!("skipping: {program} is not installed");
            return None;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("writing to the child's stdin");
    let output = child.wait_with_output().expect("waiting for the child");
    assert!(
        output.status.success(),
        "{program} failed on:\n{stdin}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(output.stdout)
}

/// Parses a whole Python snippet with `ast` and returns every keyword argument and assignment
/// whose value is a literal, as JSON.
fn python_literals(source: &str) -> Option<Value> {
    const SCRIPT: &str = r#"
import ast, json, sys
found = {}
for node in ast.walk(ast.parse(sys.stdin.read())):
    if isinstance(node, ast.keyword) and node.arg:
        name, value = node.arg, node.value
    elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        name, value = node.targets[0].id, node.value
    else:
        continue
    try:
        found[name] = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError):
        pass
print(json.dumps(found))
"#;
    let stdout = run("python3", &["-c", SCRIPT], source)?;
    Some(serde_json::from_slice(&stdout).expect("the script prints JSON"))
}

/// Runs a shell snippet in bash with `llama-completion` and `curl` replaced by functions that
/// echo what they receive: the arguments NUL-separated, and stdin.
fn bash_run(snippet: &str) -> Option<Vec<u8>> {
    let script =
        format!("llama-completion() {{ printf '%s\\0' \"$@\"; }}\ncurl() {{ cat; }}\n{snippet}");
    run("bash", &["-s"], &script)
}

fn bash_args(snippet: &str) -> Option<Vec<String>> {
    let stdout = bash_run(snippet)?;
    let text = String::from_utf8(stdout).expect("arguments are UTF-8");
    Some(
        text.split_terminator('\0')
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    )
}

#[test]
fn vllm_rich_snippet_is_exact() {
    let expected = r#"# vLLM offline inference with samplab's sampling parameters.
# Random draws in vLLM differ from samplab's, so only greedy output matches samplab's token for token.
from vllm import LLM, SamplingParams

llm = LLM(model="TinyLlama/TinyLlama-1.1B-Chat-v1.0")
prompt = "Once upon a time"
params = SamplingParams(
    n=4,
    temperature=0.7,
    top_k=40,
    top_p=0.9,
    min_p=0.05,
    repetition_penalty=1.1,
    max_tokens=64,
    seed=42,
    stop=["\n\n", "The End"],
    stop_token_ids=[13],
    include_stop_str_in_output=False,
    logprobs=5,
    prompt_logprobs=0,
)
outputs = llm.generate(prompt, params)
for sample in outputs[0].outputs:
    print(sample.text)
"#;
    assert_eq!(to_vllm(&rich(), &HUB), expected);
}

#[test]
fn twinkle_rich_snippet_is_exact() {
    let expected = r#"# twinkle's SamplingParams with samplab's sampling parameters; fields at twinkle's defaults (which are samplab's) are left out.
# twinkle's SamplingParams has no min_p, so min_p=0.05 is left out: its runs keep the tokens min_p would drop.
# twinkle's stop takes strings or token ids, not both, so the token ids [13] are left out.
# to_transformers stops on any one token of a stop string's encoding (added to eos_token_id), not on the whole string as to_vllm and samplab do.
# to_vllm(logprobs=True) returns the chosen token's logprob only; samplab's top 5 alternatives per token have no twinkle setting.
# to_vllm passes prompt_logprobs only when it is above 0, so samplab's 0 (the prompt tokens' own logprobs) is asked as 1, which adds each position's top alternative.
# to_transformers has no sample count: pass num_return_sequences=4 to generate(); its samples draw from one torch generator, samplab gives sample i seed+i.
# Random draws in vLLM differ from samplab's, so only greedy output matches samplab's token for token.
from transformers import AutoTokenizer
from twinkle.data_format import SamplingParams

model_id = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
params = SamplingParams(
    max_tokens=64,
    seed=42,
    stop=["\n\n", "The End"],
    temperature=0.7,
    top_k=40,
    top_p=0.9,
    repetition_penalty=1.1,
)
vllm_params = params.to_vllm(num_samples=4, logprobs=True, prompt_logprobs=1)
tokenizer = AutoTokenizer.from_pretrained(model_id)
gen_kwargs = params.to_transformers(tokenizer=tokenizer)
"#;
    assert_eq!(to_twinkle(&rich(), &HUB), expected);
}

#[test]
fn transformers_rich_snippet_is_exact() {
    let expected = r#"# transformers generate() with samplab's sampling parameters; every knob is passed because the model's generation_config.json supplies any that are left out.
# stop_strings ends generation after the token that completes a stop string and keeps all of that token's text: cut the text at the start of the first stop string, as samplab does.
# Stop token ids end generation as EOS ids do, but the token stays in the output and skip_special_tokens drops its text only for special tokens (samplab drops it).
# transformers applies min_p after top_k and top_p (samplab: before them), so top_p also counts the mass of tokens min_p removes and may keep another set.
# All samples draw from one torch generator seeded once; samplab gives sample i its own seed+i.
# Random draws in transformers differ from samplab's, so only greedy output matches samplab's token for token.
# output.logits holds each step's raw logits (log_softmax gives samplab's logprobs), output.scores the processed ones; torch.topk gives the top 5 alternatives.
# generate() does not score the prompt: prompt logprobs are log_softmax(model(**inputs).logits).
from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

model_id = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
prompt = "Once upon a time"
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id)
inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
set_seed(42)
# eos_token_id replaces the model's end-of-sequence ids, so they are kept.
eos_ids = model.generation_config.eos_token_id
eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [])
output = model.generate(
    **inputs,
    do_sample=True,
    temperature=0.7,
    top_k=40,
    top_p=0.9,
    min_p=0.05,
    repetition_penalty=1.1,
    max_new_tokens=64,
    num_return_sequences=4,
    stop_strings=["\n\n", "The End"],
    tokenizer=tokenizer,
    eos_token_id=eos_ids + [13],
    output_scores=True,
    output_logits=True,
    return_dict_in_generate=True,
)
prompt_len = inputs["input_ids"].shape[1]
for sequence in output.sequences:
    print(tokenizer.decode(sequence[prompt_len:], skip_special_tokens=True))
"#;
    assert_eq!(to_transformers(&rich(), &HUB), expected);
}

#[test]
fn openai_rich_snippet_is_exact() {
    let expected = r#"# POST /v1/completions to a vLLM server (vllm serve MODEL); every field is sent because the server fills missing ones from the model's generation_config.json.
# top_k, min_p, repetition_penalty, stop_token_ids, include_stop_str_in_output and prompt_logprobs are vLLM extensions: OpenAI's own API rejects them and has no equivalent.
# Random draws in vLLM differ from samplab's, so only greedy output matches samplab's token for token.
curl -s http://localhost:8000/v1/completions \
  -H 'Content-Type: application/json' \
  --data-binary @- <<'JSON'
{
  "model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
  "prompt": "Once upon a time",
  "n": 4,
  "temperature": 0.7,
  "top_k": 40,
  "top_p": 0.9,
  "min_p": 0.05,
  "repetition_penalty": 1.1,
  "max_tokens": 64,
  "seed": 42,
  "stop": [
    "\n\n",
    "The End"
  ],
  "stop_token_ids": [
    13
  ],
  "include_stop_str_in_output": false,
  "logprobs": 5,
  "prompt_logprobs": 0
}
JSON
"#;
    assert_eq!(to_openai(&rich(), &HUB), expected);
}

#[test]
fn llama_cpp_rich_snippet_is_exact() {
    let expected = r#"# llama.cpp: llama-completion (llama-cli in older builds); llama-server takes the same sampling flags.
# --samplers runs the chain in samplab's order; llama.cpp's default (penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature) applies temperature last.
# --repeat-last-n -1 penalises over the whole context, prompt included, like samplab; llama.cpp's default window is the last 64 tokens.
# llama.cpp's top-k keeps exactly k tokens; samplab also keeps tokens tied with the k-th.
# -r stops only when a stop string (matched on prompt and output alike) ends within the last 2 bytes of the text, or is one token and was just generated; the stop text stays in the output (samplab cuts it).
# llama.cpp has no flag for stop token ids, so [13] will not stop this run.
# logprobs=5 is not exported: llama-completion prints no probabilities (llama-server's /completion returns them with n_probs).
# prompt_logprobs=0 is not exported: llama-completion prints no probabilities (llama-server's /completion returns them with n_probs).
# llama-completion has no flag for 4 samples, it makes one per run: run it 4 times, with -s 42+i for sample i.
# Random draws in llama.cpp differ from samplab's, so only greedy output matches samplab's token for token.
llama-completion -m stories260K.gguf -no-cnv --no-escape --no-display-prompt \
  --samplers 'penalties;temperature;min_p;top_k;top_p' \
  --temp 0.7 --top-k 40 --top-p 0.9 --min-p 0.05 --repeat-penalty 1.1 \
  --repeat-last-n -1 \
  -n 64 -s 42 \
  -r $'\n\n' \
  -r 'The End' \
  -p 'Once upon a time'
"#;
    assert_eq!(to_llama_cpp(&rich(), &GGUF), expected);
}

#[test]
fn dispatcher_and_format_names() {
    use clap::ValueEnum;
    let names: Vec<String> = ExportFormat::value_variants()
        .iter()
        .map(|f| f.to_possible_value().unwrap().get_name().to_owned())
        .collect();
    assert_eq!(
        names,
        ["vllm", "transformers", "openai", "llamacpp", "twinkle"]
    );
    assert_eq!(
        ExportFormat::from_str("llama.cpp", false),
        Ok(ExportFormat::Llamacpp)
    );
    let params = rich();
    assert_eq!(
        export(ExportFormat::Vllm, &params, &HUB),
        to_vllm(&params, &HUB)
    );
    assert_eq!(
        export(ExportFormat::Transformers, &params, &HUB),
        to_transformers(&params, &HUB)
    );
    assert_eq!(
        export(ExportFormat::Openai, &params, &HUB),
        to_openai(&params, &HUB)
    );
    assert_eq!(
        export(ExportFormat::Llamacpp, &params, &GGUF),
        to_llama_cpp(&params, &GGUF)
    );
    assert_eq!(
        export(ExportFormat::Twinkle, &params, &HUB),
        to_twinkle(&params, &HUB)
    );
}

#[test]
fn stop_is_split_into_strings_and_token_ids() {
    let params = SamplingParams {
        stop: Some(TokenTexts(vec![
            TokenText::Token(2),
            TokenText::Text("###".into()),
            TokenText::Token(7),
        ])),
        ..SamplingParams::default()
    };
    let vllm = to_vllm(&params, &HUB);
    assert!(vllm.contains("    stop=[\"###\"],\n"), "{vllm}");
    assert!(vllm.contains("    stop_token_ids=[2, 7],\n"), "{vllm}");
    let body: Value = serde_json::from_str(&openai_body(&params, &HUB)).unwrap();
    assert_eq!(body["stop"], json!(["###"]));
    assert_eq!(body["stop_token_ids"], json!([2, 7]));

    let none = to_vllm(&SamplingParams::default(), &HUB);
    assert!(
        none.contains("    stop=[],\n    stop_token_ids=[],\n"),
        "{none}"
    );
}

#[test]
fn max_tokens_is_always_written() {
    let unlimited = SamplingParams::default();
    assert!(to_vllm(&unlimited, &HUB).contains("    max_tokens=None,\n"));
    let body: Value = serde_json::from_str(&openai_body(&unlimited, &HUB)).unwrap();
    assert_eq!(body.get("max_tokens"), Some(&Value::Null));
    assert!(to_llama_cpp(&unlimited, &GGUF).contains("  -n -1 -c 0 \\\n"));
    let transformers = to_transformers(&unlimited, &HUB);
    assert!(transformers.contains("    max_length=model.config.max_position_embeddings,\n"));
    assert_comment(&transformers, "generate() would stop at 20 tokens");

    let limited = SamplingParams {
        max_tokens: Some(128),
        ..SamplingParams::default()
    };
    assert!(to_vllm(&limited, &HUB).contains("    max_tokens=128,\n"));
    let body: Value = serde_json::from_str(&openai_body(&limited, &HUB)).unwrap();
    assert_eq!(body["max_tokens"], json!(128));
    assert!(to_transformers(&limited, &HUB).contains("    max_new_tokens=128,\n"));
    assert!(to_llama_cpp(&limited, &GGUF).contains("  -n 128 \\\n"));
}

#[test]
fn top_k_off_is_each_engines_own_off() {
    for off in [-1, 0] {
        let params = SamplingParams {
            top_k: off,
            ..SamplingParams::default()
        };
        assert!(to_transformers(&params, &HUB).contains("    top_k=0,\n"));
        assert!(to_llama_cpp(&params, &GGUF).contains(" --top-k 0 "));
        assert!(to_vllm(&params, &HUB).contains("    top_k=-1,\n"));
        let body: Value = serde_json::from_str(&openai_body(&params, &HUB)).unwrap();
        assert_eq!(body["top_k"], json!(-1));
        assert_no_comment(&to_llama_cpp(&params, &GGUF), "top-k keeps exactly k");
    }
}

#[test]
fn greedy_passes_no_sampling_knobs_and_one_sample() {
    let params = greedy();
    let transformers = to_transformers(&params, &HUB);
    assert!(
        transformers.contains("    do_sample=False,\n"),
        "{transformers}"
    );
    for knob in ["temperature=", "top_k=", "top_p=", "min_p="] {
        assert!(!transformers.contains(knob), "{knob} in {transformers}");
    }
    assert!(transformers.contains("    num_return_sequences=1,\n"));
    assert_comment(&transformers, "refuses num_return_sequences > 1");
    assert_no_comment(&transformers, "Random draws");

    let vllm = to_vllm(&params, &HUB);
    assert!(vllm.contains("    n=1,\n"));
    assert!(vllm.contains("    temperature=0.0,\n"));
    assert_comment(&vllm, "vLLM rejects n > 1 at temperature 0");
    assert_no_comment(&vllm, "Random draws");

    let llama = to_llama_cpp(&params, &GGUF);
    assert!(llama.contains(" --temp 0 "), "{llama}");
    assert_comment(&transformers, "output.scores the processed ones.");
    assert_comment(&llama, "one run gives them all");
    let tiny = SamplingParams {
        temperature: 5e-6,
        ..SamplingParams::default()
    };
    assert!(to_llama_cpp(&tiny, &GGUF).contains(" --temp 0 "));
}

#[test]
fn vllm_temperature_limits_are_noted() {
    let cold = SamplingParams {
        temperature: 0.005,
        ..SamplingParams::default()
    };
    assert_comment(&to_vllm(&cold, &HUB), "raises temperatures below 0.01");
    assert_comment(&to_openai(&cold, &HUB), "raises temperatures below 0.01");
    let hot = SamplingParams {
        temperature: 2.5,
        ..SamplingParams::default()
    };
    assert_comment(&to_vllm(&hot, &HUB), "rejects temperatures above 2");
    assert_no_comment(&to_vllm(&rich(), &HUB), "temperatures");
}

#[test]
fn openai_notes_vllm_extensions_and_seed_range() {
    let big = SamplingParams {
        seed: Some(u64::MAX),
        ..SamplingParams::default()
    };
    let openai = to_openai(&big, &HUB);
    assert_comment(&openai, "vLLM extensions: OpenAI's own API rejects them");
    assert_comment(&openai, "takes seeds up to 9223372036854775807 only");
    assert_no_comment(&to_openai(&rich(), &HUB), "takes seeds up to");
}

#[test]
fn transformers_notes_follow_the_params() {
    let keep = SamplingParams {
        include_stop_str_in_output: true,
        ..rich()
    };
    let transformers = to_transformers(&keep, &HUB);
    assert_comment(
        &transformers,
        "cut the text right after the first stop string",
    );
    assert_comment(&transformers, "(samplab keeps it)");

    let no_min_p = SamplingParams {
        min_p: 0.0,
        ..rich()
    };
    assert_no_comment(&to_transformers(&no_min_p, &HUB), "applies min_p after");
    let no_top_p = SamplingParams {
        top_p: 1.0,
        ..rich()
    };
    assert_no_comment(&to_transformers(&no_top_p, &HUB), "applies min_p after");

    let plain = to_transformers(&SamplingParams::default(), &HUB);
    for absent in ["stop_strings", "eos_token_id", "output_scores", "set_seed"] {
        assert!(!plain.contains(absent), "{absent} in {plain}");
    }
    assert!(plain.contains("for sequence in output:\n"));
    assert_comment(&plain, "samplab gives sample i its own seed+i");
}

#[test]
fn seeds_beyond_32_bits_are_handled_per_target() {
    let params = SamplingParams {
        seed: Some(1 << 40),
        ..SamplingParams::default()
    };
    let transformers = to_transformers(&params, &HUB);
    assert!(transformers.starts_with("# ") && transformers.contains("\nimport torch\n"));
    assert!(transformers.contains("\ntorch.manual_seed(1099511627776)\n"));
    assert!(!transformers.contains("set_seed("), "{transformers}");
    assert!(!transformers.contains(", set_seed"), "{transformers}");
    assert_comment(&transformers, "numpy, which takes seeds below 2**32");

    let llama = to_llama_cpp(&params, &GGUF);
    assert!(!llama.contains(" -s "), "{llama}");
    assert_comment(&llama, "seed 1099511627776 cannot be passed");
    let random_sentinel = SamplingParams {
        seed: Some(u64::from(u32::MAX)),
        ..SamplingParams::default()
    };
    assert_comment(&to_llama_cpp(&random_sentinel, &GGUF), "cannot be passed");
    assert!(to_vllm(&params, &HUB).contains("    seed=1099511627776,\n"));
}

#[test]
fn llama_cpp_notes_follow_the_params() {
    let plain = to_llama_cpp(&SamplingParams::default(), &GGUF);
    assert_comment(&plain, "applies temperature last");
    for absent in [
        "--repeat-last-n -1 penalises",
        "stop token ids",
        "not exported",
        "one per run",
        "GGUF files only",
        " -r ",
    ] {
        assert!(!plain.contains(absent), "{absent:?} in {plain}");
    }
    let keep = SamplingParams {
        include_stop_str_in_output: true,
        ..rich()
    };
    let llama = to_llama_cpp(&keep, &GGUF);
    assert_comment(&llama, "the stop text stays in the output.");
    assert_no_comment(&llama, "samplab cuts it");
    let unseeded = SamplingParams {
        seed: None,
        ..rich()
    };
    assert_comment(
        &to_llama_cpp(&unseeded, &GGUF),
        "it makes one per run: run it 4 times.",
    );
    assert_comment(&to_llama_cpp(&rich(), &HUB), "GGUF files only");
}

fn tricky() -> SamplingParams {
    SamplingParams {
        stop: Some(TokenTexts(vec![
            TokenText::Text(TRICKY.into()),
            TokenText::Token(13),
        ])),
        ..rich()
    }
}

const TRICKY_CTX: ExportContext = ExportContext::raw(TRICKY, "it's a \"model\".gguf");

#[test]
fn python_literals_read_back_exactly() {
    let Some(vllm) = python_literals(&to_vllm(&tricky(), &TRICKY_CTX)) else {
        return;
    };
    assert_eq!(vllm["stop"], json!([TRICKY]));
    assert_eq!(vllm["prompt"], json!(TRICKY));
    assert_eq!(vllm["model"], json!(TRICKY_CTX.model));
    assert_eq!(vllm["temperature"], json!(0.7));
    assert_eq!(vllm["min_p"], json!(0.05));
    assert_eq!(vllm["repetition_penalty"], json!(1.1));
    assert_eq!(vllm["stop_token_ids"], json!([13]));
    assert_eq!(vllm["max_tokens"], json!(64));
    assert_eq!(vllm["include_stop_str_in_output"], json!(false));

    let Some(transformers) = python_literals(&to_transformers(&tricky(), &TRICKY_CTX)) else {
        return;
    };
    assert_eq!(transformers["stop_strings"], json!([TRICKY]));
    assert_eq!(transformers["prompt"], json!(TRICKY));
    assert_eq!(transformers["model_id"], json!(TRICKY_CTX.model));
    assert_eq!(transformers["top_p"], json!(0.9));
    assert_eq!(transformers["do_sample"], json!(true));

    for params in [SamplingParams::default(), greedy(), rich()] {
        python_literals(&to_transformers(&params, &HUB)).expect("python3 ran before");
        python_literals(&to_vllm(&params, &HUB)).expect("python3 ran before");
    }
}

#[test]
fn shell_words_read_back_exactly() {
    let snippet = to_llama_cpp(&tricky(), &TRICKY_CTX);
    let Some(args) = bash_args(&snippet) else {
        return;
    };
    let after = |flag: &str| {
        let at = args.iter().position(|a| a == flag).expect(flag);
        args[at + 1].clone()
    };
    assert_eq!(after("-r"), TRICKY);
    assert_eq!(after("-p"), TRICKY);
    assert_eq!(after("-m"), TRICKY_CTX.model);
    assert_eq!(
        after("--samplers"),
        "penalties;temperature;min_p;top_k;top_p"
    );
    assert_eq!(after("--temp"), "0.7");

    let quote_only = ExportContext::raw("it's 'quoted' $HOME `x` ; done", "m.gguf");
    let args = bash_args(&to_llama_cpp(&rich(), &quote_only)).expect("bash ran before");
    assert_eq!(args.last().map(String::as_str), Some(quote_only.prompt));
    assert!(args.contains(&"\n\n".to_owned()), "{args:?}");
}

#[test]
fn openai_body_reads_back_exactly() {
    let snippet = to_openai(&tricky(), &TRICKY_CTX);
    let body: Value = serde_json::from_str(&openai_body(&tricky(), &TRICKY_CTX)).unwrap();
    assert_eq!(body["prompt"], json!(TRICKY));
    assert_eq!(body["model"], json!(TRICKY_CTX.model));
    assert_eq!(body["stop"], json!([TRICKY]));
    assert_eq!(body["temperature"], json!(0.7));
    assert_eq!(body["min_p"], json!(0.05));
    assert_eq!(body["seed"], json!(42));
    assert_eq!(body["prompt_logprobs"], json!(0));

    let Some(sent) = bash_run(&snippet) else {
        return;
    };
    let sent: Value = serde_json::from_slice(&sent).expect("curl receives JSON");
    assert_eq!(sent, body);
}

fn profile(yaml: &str) -> SamplingParams {
    SamplingParams::from_yaml(yaml).expect("test params are valid")
}

/// The word after `flag` in a command's words.
fn value_after(args: &[String], flag: &str) -> String {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| panic!("{flag} missing from {args:?}"))
}

#[test]
fn the_llama_cpp_profile_exports_its_chain_and_every_flag() {
    let params = profile(
        "engine: llama.cpp\nsamplers: [dry, top_k, temperature]\ntop_k: 40\ndry_multiplier: 0.8\n\
         xtc_probability: 0.5\nmirostat: 0\nrepeat_last_n: 128\nlogit_bias: {13: -100, 7: 2.5}\n\
         ignore_eos: true\nseed: 5",
    );
    let snippet = to_llama_cpp(&params, &GGUF);
    assert_no_comment(&snippet, "samplab's order");
    let Some(args) = bash_args(&snippet) else {
        eprintln!("skipped: bash is not installed");
        return;
    };
    let after = |flag: &str| value_after(&args, flag);
    assert_eq!(after("--samplers"), "dry;top_k;temperature");
    assert_eq!(after("--repeat-last-n"), "128");
    assert_eq!(after("--dry-multiplier"), "0.8");
    assert_eq!(after("--xtc-probability"), "0.5");
    assert_eq!(after("--mirostat-ent"), "5");
    let breakers: Vec<&String> = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| *flag == "--dry-sequence-breaker")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(breakers, ["\n", ":", "\"", "*"]);
    let biases: Vec<&String> = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| *flag == "-l")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(biases, ["7+2.5", "13-100"]);
    assert!(args.contains(&"--ignore-eos".to_owned()));
}

/// adaptive-p under llama.cpp: its two flags, and `adaptive_p` last in `--samplers` (llama.cpp
/// runs it only when the list names it); while it is off, neither, so that builds older than
/// it still take the command. top_h reaches transformers as its keyword, the others as a note.
#[test]
fn adaptive_p_and_top_h_reach_their_engines_exports() {
    let params = profile(
        "engine: llama.cpp\nsamplers: [min_p, temperature]\nmin_p: 0.05\n\
         adaptive_target: 0.55\nadaptive_decay: 0.8",
    );
    let snippet = to_llama_cpp(&params, &GGUF);
    assert_comment(
        &to_vllm(&params, &GGUF),
        "adaptive_target=0.55 has no vLLM equivalent",
    );
    assert!(!to_llama_cpp(&profile("engine: llama.cpp"), &GGUF).contains("adaptive"));
    let top_h = profile("engine: transformers\ntop_h: 0.4");
    assert!(to_transformers(&top_h, &GGUF).contains("    top_h=0.4,"));
    assert_comment(
        &to_llama_cpp(&top_h, &GGUF),
        "top_h=0.4 has no llama.cpp equivalent",
    );
    let Some(args) = bash_args(&snippet) else {
        eprintln!("skipped: bash is not installed");
        return;
    };
    let after = |flag: &str| value_after(&args, flag);
    assert_eq!(after("--samplers"), "min_p;temperature;adaptive_p");
    assert_eq!(after("--adaptive-target"), "0.55");
    assert_eq!(after("--adaptive-decay"), "0.8");
}

#[test]
fn vllm_and_openai_take_the_new_vllm_fields() {
    let params = profile(
        "presence_penalty: 0.5\nfrequency_penalty: -0.25\nmin_tokens: 3\nignore_eos: true\n\
         logit_bias: {13: -100}\nbad_words: [dragon]\nallowed_token_ids: [1, 2, 3]",
    );
    let body: Value = serde_json::from_str(&openai_body(&params, &GGUF)).unwrap();
    assert_eq!(body["presence_penalty"], 0.5);
    assert_eq!(body["frequency_penalty"], -0.25);
    assert_eq!(body["min_tokens"], 3);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(body["logit_bias"]["13"], -100.0);
    assert_eq!(body["bad_words"][0], "dragon");
    assert_eq!(body["allowed_token_ids"][2], 3);
    let plain: Value = serde_json::from_str(&openai_body(&rich(), &GGUF)).unwrap();
    assert!(
        plain.get("presence_penalty").is_none(),
        "defaults stay out of the body"
    );
    let Some(vllm) = python_literals(&to_vllm(&params, &GGUF)) else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    assert_eq!(vllm["presence_penalty"], 0.5);
    assert_eq!(vllm["min_tokens"], 3);
    assert_eq!(vllm["logit_bias"]["13"], -100.0);
    assert_eq!(vllm["bad_words"][0], "dragon");
    assert_eq!(vllm["allowed_token_ids"][0], 1);
}

/// vLLM's `repetition_detection` is a request field (its `SamplingParams` and its server's
/// body); `logprobs_mode` is an engine argument, which `LLM(...)` and `vllm serve` take. The
/// targets without them note each one.
#[test]
fn vllm_exports_repetition_detection_and_logprobs_mode_and_the_others_note_them() {
    let params = profile(
        "repetition_detection: {max_pattern_size: 8, min_count: 3}\n\
         logprobs_mode: processed_logprobs",
    );
    let vllm = to_vllm(&params, &GGUF);
    for line in [
        "from vllm.sampling_params import RepetitionDetectionParams\n",
        "llm = LLM(model=\"stories260K.gguf\", logprobs_mode=\"processed_logprobs\")\n",
        "    repetition_detection=RepetitionDetectionParams(max_pattern_size=8, min_pattern_size=0, \
         min_count=3),\n",
    ] {
        assert!(vllm.contains(line), "{line:?} in\n{vllm}");
    }
    let body: Value = serde_json::from_str(&openai_body(&params, &GGUF)).unwrap();
    assert_eq!(
        body["repetition_detection"],
        json!({"max_pattern_size": 8, "min_pattern_size": 0, "min_count": 3})
    );
    assert!(body.get("logprobs_mode").is_none(), "no request field");
    assert_comment(
        &to_openai(&params, &GGUF),
        "vllm serve MODEL --logprobs-mode processed_logprobs",
    );
    for (name, snippet) in [
        ("transformers", to_transformers(&params, &GGUF)),
        ("llama.cpp", to_llama_cpp(&params, &GGUF)),
        ("twinkle", to_twinkle(&params, &GGUF)),
    ] {
        assert_comment(
            &snippet,
            &format!(
                r#"repetition_detection={{"max_pattern_size":8,"min_pattern_size":0,"min_count":3}} has no {name} equivalent"#
            ),
        );
        assert_comment(
            &snippet,
            &format!(r#"logprobs_mode="processed_logprobs" has no {name} equivalent"#),
        );
    }
    let both = profile(
        "repetition_detection: {max_pattern_size: 2, min_count: 2}\n\
         structured_outputs: {regex: 'a+'}",
    );
    let import = "from vllm.sampling_params import StructuredOutputsParams, \
                  RepetitionDetectionParams\n";
    assert!(to_vllm(&both, &GGUF).contains(import), "one import line");
    let Some(literals) = python_literals(&vllm) else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    assert_eq!(literals["logprobs_mode"], "processed_logprobs");
    assert_eq!(literals["max_pattern_size"], 8);
    assert_eq!(literals["min_count"], 3);
}

#[test]
fn transformers_takes_its_fields_and_notes_the_others() {
    let params = profile(
        "engine: transformers\ntypical_p: 0.9\nmin_tokens: 4\nlogit_bias: {5: 1.5}\n\
         bad_words: [dragon]",
    );
    let snippet = to_transformers(&params, &GGUF);
    assert!(snippet.contains("typical_p=0.9"), "{snippet}");
    assert!(snippet.contains("min_new_tokens=4"), "{snippet}");
    assert!(snippet.contains("sequence_bias={(5,): 1.5}"), "{snippet}");
    assert!(
        snippet.contains(
            "bad_words_ids=[tokenizer(w, add_special_tokens=False).input_ids for w in [\"dragon\"]]"
        ),
        "{snippet}"
    );
    let vllm = to_vllm(&params, &GGUF);
    assert_comment(&vllm, "samplab sampled with transformers' chain");
    assert_comment(&vllm, "typical_p=0.9 has no vLLM equivalent");
    let llama = profile("engine: llama.cpp\ntop_n_sigma: 1.5");
    assert_comment(
        &to_transformers(&llama, &GGUF),
        "top_n_sigma=1.5 has no transformers equivalent",
    );
    assert_comment(
        &to_twinkle(&llama, &GGUF),
        "top_n_sigma=1.5 has no twinkle equivalent",
    );
}

/// One row per parameter: a value away from its default, after the settings that make it
/// matter (DRY's base once DRY is on).
const MOVED: &[(&str, &str, &str)] = &[
    ("max_tokens", "", "77"),
    ("seed", "", "1234"),
    ("stop", "", "[\"zz\"]"),
    ("include_stop_str_in_output", "stop: [\"zz\"]", "true"),
    ("temperature", "", "0.5"),
    ("top_k", "", "7"),
    ("top_p", "", "0.7"),
    ("min_p", "", "0.2"),
    ("repetition_penalty", "", "1.3"),
    ("num_samples", "", "3"),
    ("logprobs", "", "2"),
    ("watch", "", "[13]"),
    ("prompt_logprobs", "", "2"),
    ("logprobs_mode", "", "processed_logprobs"),
    ("engine", "", "llama.cpp"),
    ("samplers", "", "[top_k, temperature]"),
    ("presence_penalty", "", "0.4"),
    ("frequency_penalty", "", "0.3"),
    ("repeat_last_n", "repetition_penalty: 1.3", "32"),
    ("min_tokens", "", "5"),
    ("ignore_eos", "", "true"),
    (
        "repetition_detection",
        "",
        "{max_pattern_size: 4, min_count: 3}",
    ),
    ("logit_bias", "", "{13: 2.5}"),
    ("bad_words", "", "[\"qq\"]"),
    ("allowed_token_ids", "", "[1, 2, 3]"),
    ("structured_outputs", "", "{regex: '[0-9]+'}"),
    ("grammar", "", "'root ::= \"a\"'"),
    ("json_schema", "", "{type: object}"),
    ("typical_p", "", "0.8"),
    ("top_h", "", "0.4"),
    ("top_n_sigma", "", "1.5"),
    ("xtc_probability", "", "0.5"),
    ("xtc_threshold", "xtc_probability: 0.5", "0.2"),
    ("dry_multiplier", "", "0.8"),
    ("dry_base", "dry_multiplier: 0.8", "2.0"),
    ("dry_allowed_length", "dry_multiplier: 0.8", "3"),
    ("dry_penalty_last_n", "dry_multiplier: 0.8", "128"),
    ("dry_sequence_breakers", "dry_multiplier: 0.8", "[\"x\"]"),
    ("mirostat", "", "2"),
    ("mirostat_tau", "mirostat: 2", "4.0"),
    ("mirostat_eta", "mirostat: 2", "0.2"),
    ("adaptive_target", "", "0.5"),
    ("adaptive_decay", "adaptive_target: 0.5", "0.8"),
    ("dynatemp_range", "", "0.5"),
    ("dynatemp_exponent", "dynatemp_range: 0.5", "2.0"),
    ("min_keep", "", "3"),
];

/// No parameter is dropped without a word: moved from its default, each one changes every
/// engine's export, written as the engine's own setting or as a note that it has none.
#[test]
fn every_parameter_is_exported_or_noted_by_every_engine() {
    let names: Vec<&str> = samplab::params::Field::ALL
        .iter()
        .map(|f| f.name())
        .collect();
    let rows: Vec<&str> = MOVED.iter().map(|(name, ..)| *name).collect();
    assert_eq!(rows, names, "one row per parameter, in the table's order");
    let exports: [(&str, samplab::export::Writer); 3] = [
        ("vLLM", to_vllm),
        ("transformers", to_transformers),
        ("llama.cpp", to_llama_cpp),
    ];
    for &(name, base, value) in MOVED {
        // Under an engine that has the parameter: a profile without it refuses it.
        let field = samplab::params::Field::ALL[rows.iter().position(|&r| r == name).unwrap()];
        let engine = Engine::ALL
            .into_iter()
            .find(|&e| field.spec().engines.has(e))
            .unwrap();
        let base = match engine {
            Engine::Vllm => base.to_owned(),
            other => format!("engine: {}\n{base}", other.name()),
        };
        let before = SamplingParams::from_yaml(&base).unwrap();
        let moved = SamplingParams::from_yaml(&format!("{base}\n{name}: {value}")).unwrap();
        for (target, export) in exports {
            assert_ne!(
                export(&before, &GGUF),
                export(&moved, &GGUF),
                "{name}: {value} leaves the {target} export as it was"
            );
        }
    }
}

/// One constraint of each kind, as each target writes it: vLLM's keyword argument, the OpenAI
/// body's field, llama.cpp's flag as bash reads it back (or the note where it has none), and
/// the notes of transformers and twinkle, which have no constraint of their own.
struct ConstraintCase {
    yaml: &'static str,
    vllm: &'static str,
    openai: (&'static str, &'static str),
    llama_cpp: Result<(&'static str, &'static str), &'static str>,
    shown: &'static str,
}

const CONSTRAINTS: &[ConstraintCase] = &[
    ConstraintCase {
        yaml: "structured_outputs: {json: {type: object, properties: {ok: {type: boolean, \
               default: true}, why: {type: [string, 'null']}}, required: [ok]}}",
        vllm: r#"StructuredOutputsParams(json={"type": "object", "properties": {"ok": {"type": "boolean", "default": True}, "why": {"type": ["string", "null"]}}, "required": ["ok"]})"#,
        openai: (
            "response_format",
            r#"{"type":"json_schema","json_schema":{"name":"samplab","schema":{"type":"object","properties":{"ok":{"type":"boolean","default":true},"why":{"type":["string","null"]}},"required":["ok"]},"strict":true}}"#,
        ),
        llama_cpp: Ok((
            "--json-schema",
            r#"{"type":"object","properties":{"ok":{"type":"boolean","default":true},"why":{"type":["string","null"]}},"required":["ok"]}"#,
        )),
        shown: r#"structured_outputs={"json":{"type":"object","#,
    },
    ConstraintCase {
        yaml: "structured_outputs: {regex: '[0-9]{3}-\\d+'}",
        vllm: r#"StructuredOutputsParams(regex="[0-9]{3}-\\d+")"#,
        openai: ("structured_outputs", r#"{"regex":"[0-9]{3}-\\d+"}"#),
        llama_cpp: Err(
            r#"structured_outputs={"regex":"[0-9]{3}-\\d+"} is left out: llama.cpp takes GBNF (--grammar) and JSON schemas (--json-schema), not a regex"#,
        ),
        shown: r#"structured_outputs={"regex":"[0-9]{3}-\\d+"}"#,
    },
    ConstraintCase {
        yaml: "structured_outputs: {choice: [yes, 'it''s \"so\"', \"tab\\there\"]}",
        vllm: r#"StructuredOutputsParams(choice=["yes", "it's \"so\"", "tab\there"])"#,
        openai: (
            "structured_outputs",
            r#"{"choice":["yes","it's \"so\"","tab\there"]}"#,
        ),
        llama_cpp: Ok((
            "--grammar",
            r#"root ::= "yes" | "it's \"so\"" | "tab\there""#,
        )),
        shown: r#"structured_outputs={"choice":["yes","it's \"so\"","tab\there"]}"#,
    },
    ConstraintCase {
        yaml: "structured_outputs: {grammar: \"root ::= item+\\nitem ::= [a-z] \\\"\\\\n\\\"\"}",
        vllm: r#"StructuredOutputsParams(grammar="root ::= item+\nitem ::= [a-z] \"\\n\"")"#,
        openai: (
            "structured_outputs",
            r#"{"grammar":"root ::= item+\nitem ::= [a-z] \"\\n\""}"#,
        ),
        llama_cpp: Ok(("--grammar", "root ::= item+\nitem ::= [a-z] \"\\n\"")),
        shown: r#"structured_outputs={"grammar":"root ::= item+\nitem"#,
    },
    ConstraintCase {
        yaml: "structured_outputs: {grammar: 'start: \"a\"+'}",
        vllm: r#"StructuredOutputsParams(grammar="start: \"a\"+")"#,
        openai: ("structured_outputs", r#"{"grammar":"start: \"a\"+"}"#),
        llama_cpp: Err("not a Lark grammar (only a build with llguidance reads Lark"),
        shown: r#"structured_outputs={"grammar":"start: \"a\"+"}"#,
    },
    ConstraintCase {
        yaml: "structured_outputs: {json_object: true}",
        vllm: "StructuredOutputsParams(json_object=True)",
        openai: ("response_format", r#"{"type":"json_object"}"#),
        llama_cpp: Ok(("--json-schema", r#"{"type":"object"}"#)),
        shown: r#"structured_outputs={"json_object":true}"#,
    },
    ConstraintCase {
        yaml: "engine: llama.cpp\ngrammar: 'root ::= \"x\"'",
        vllm: r#"StructuredOutputsParams(grammar="root ::= \"x\"")"#,
        openai: ("structured_outputs", r#"{"grammar":"root ::= \"x\""}"#),
        llama_cpp: Ok(("--grammar", r#"root ::= "x""#)),
        shown: r#"grammar="root ::= \"x\"""#,
    },
    ConstraintCase {
        yaml: "engine: llama.cpp\njson_schema: {type: integer, minimum: 0}",
        vllm: r#"StructuredOutputsParams(json={"type": "integer", "minimum": 0})"#,
        openai: (
            "response_format",
            r#"{"type":"json_schema","json_schema":{"name":"samplab","schema":{"type":"integer","minimum":0},"strict":true}}"#,
        ),
        llama_cpp: Ok(("--json-schema", r#"{"type":"integer","minimum":0}"#)),
        shown: r#"json_schema={"type":"integer","minimum":0}"#,
    },
];

#[test]
fn each_kind_of_constraint_reaches_every_target_in_its_shape() {
    for case in CONSTRAINTS {
        let params = profile(case.yaml);
        let yaml = case.yaml;

        let vllm = to_vllm(&params, &HUB);
        let kwarg = format!("\n    structured_outputs={},\n", case.vllm);
        assert!(vllm.contains(&kwarg), "{yaml}: {kwarg} not in\n{vllm}");
        assert!(
            vllm.contains(
                "from vllm import LLM, SamplingParams\n\
                 from vllm.sampling_params import StructuredOutputsParams\n\n"
            ),
            "{vllm}"
        );

        let body: Value = serde_json::from_str(&openai_body(&params, &HUB)).unwrap();
        let (name, value) = case.openai;
        assert_eq!(
            body[name],
            serde_json::from_str::<Value>(value).unwrap(),
            "{yaml}"
        );
        let other = match name {
            "response_format" => "structured_outputs",
            _ => "response_format",
        };
        assert!(body.get(other).is_none(), "{yaml}: {body}");
        let openai = to_openai(&params, &HUB);
        let vllm_only = "structured_outputs is a vLLM extension: OpenAI's own API constrains \
                         output only through response_format";
        match name {
            "structured_outputs" => assert_comment(&openai, vllm_only),
            _ => assert_no_comment(&openai, vllm_only),
        }

        let llama = to_llama_cpp(&params, &GGUF);
        match case.llama_cpp {
            Ok((flag, value)) => {
                assert_no_comment(&llama, "llama.cpp takes GBNF");
                if let Some(args) = bash_args(&llama) {
                    let at = args.iter().position(|a| a == flag).expect(flag);
                    assert_eq!(args[at + 1], value, "{yaml}");
                }
            }
            Err(note) => {
                assert_comment(&llama, note);
                let command = llama.lines().filter(|line| !line.starts_with("# "));
                assert!(
                    !command
                        .into_iter()
                        .any(|line| line.contains("--grammar") || line.contains("--json-schema")),
                    "{llama}"
                );
            }
        }

        let transformers = to_transformers(&params, &HUB);
        assert_comment(
            &transformers,
            &format!("transformers has no structured outputs: {}", case.shown),
        );
        assert_comment(
            &transformers,
            "needs a constraining logits processor passed as generate(logits_processor=[...])",
        );
        let twinkle = to_twinkle(&params, &HUB);
        assert_comment(&twinkle, case.shown);
        assert_comment(&twinkle, "has no twinkle equivalent and is left out.");
    }
}

#[test]
fn a_constraint_reads_back_exactly_in_python() {
    let json = profile(CONSTRAINTS[0].yaml);
    let Some(vllm) = python_literals(&to_vllm(&json, &HUB)) else {
        return;
    };
    assert_eq!(
        vllm["json"],
        json!({"type": "object", "properties": {"ok": {"type": "boolean", "default": true},
            "why": {"type": ["string", "null"]}}, "required": ["ok"]})
    );
    let choice = python_literals(&to_vllm(&profile(CONSTRAINTS[2].yaml), &HUB)).unwrap();
    assert_eq!(choice["choice"], json!(["yes", "it's \"so\"", "tab\there"]));
    let grammar = python_literals(&to_vllm(&profile(CONSTRAINTS[3].yaml), &HUB)).unwrap();
    assert_eq!(grammar["grammar"], "root ::= item+\nitem ::= [a-z] \"\\n\"");
    assert!(!to_vllm(&rich(), &HUB).contains("StructuredOutputsParams"));
}

#[test]
fn a_modelscope_id_passes_into_the_twinkle_snippet_as_twinkle_writes_it() {
    let context = ExportContext::raw("Once upon a time", "ms://Qwen/Qwen3.5-4B");
    let snippet = to_twinkle(&greedy(), &context);
    assert!(
        snippet.contains("\nmodel_id = \"ms://Qwen/Qwen3.5-4B\"\n"),
        "{snippet}"
    );
}
