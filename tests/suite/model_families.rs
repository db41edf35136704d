//! Small random-weight models of each family (tests/fixtures/archs/, written with llama.cpp's
//! logits by scripts/make_arch_fixtures.py) against llama.cpp: the F32 file's logits, the
//! same weights as a config.json + safetensors directory, and a Q8_0 variant.

use crate::common::log_softmax;

use candle_core::Device;
use candle_core::quantized::{QTensor, gguf_file};
use samplab::model::{Architecture, Model};
use std::path::{Path, PathBuf};

struct Fixture {
    family: &'static str,
    architecture: Architecture,
    /// How far our log-softmax may be from llama.cpp's on the F32 file: the largest and the
    /// mean distance over every logit.
    tolerance: (f64, f64),
    /// A config.json + safetensors twin lies in `hf/`, and gives the GGUF file's logprobs within
    /// this (the same values but where a checkpoint stores another form of them).
    hf: Option<f64>,
}

/// Gemma 3's tolerance is llama.cpp's rounding: its CPU GELU rounds the input to f16 and reads
/// an f16 table. Measured on this fixture: worst 3.7e-3, mean 5.8e-4; with our GELU rounded
/// the same way (a scratch experiment, not kept) the worst was under 1e-4, so everything else
/// agrees as the llama-family models do.
const FIXTURES: &[Fixture] = &[
    Fixture {
        family: "gemma3",
        architecture: Architecture::Gemma3,
        tolerance: (5e-3, 1e-3),
        hf: Some(1e-5),
    },
    Fixture {
        family: "smollm3",
        architecture: Architecture::SmolLm3,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    Fixture {
        family: "olmo2",
        architecture: Architecture::Olmo2,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    // OLMo 3: OLMo 2 with a window on three layers of four.
    Fixture {
        family: "olmo3",
        architecture: Architecture::Olmo2,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    // Phi-3: fused matrices, half of each head rotated, LongRoPE's long factors.
    Fixture {
        family: "phi3",
        architecture: Architecture::Phi3,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    // Ministral 3: YaRN and queries scaled with their position.
    Fixture {
        family: "mistral3",
        architecture: Architecture::Mistral3,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    Fixture {
        family: "qwen3moe",
        architecture: Architecture::Qwen3Moe,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    Fixture {
        family: "granite",
        architecture: Architecture::Granite,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    Fixture {
        family: "granitemoe",
        architecture: Architecture::GraniteMoe,
        tolerance: (1e-4, 1e-5),
        hf: None,
    },
    // Mixtral: llama with experts.
    Fixture {
        family: "mixtral",
        architecture: Architecture::Llama,
        tolerance: (1e-4, 1e-5),
        hf: None,
    },
    // Qwen3.5: Gated DeltaNet layers beside gated attention.
    Fixture {
        family: "qwen35",
        architecture: Architecture::Qwen35,
        tolerance: (1e-4, 1e-5),
        // config.json keeps `A_log`: `-exp(log(-a))` rounds each decay rate, which the
        // recurrence carries on (measured worst 3.3e-5).
        hf: Some(1e-4),
    },
    // Qwen3.5 MoE: the same layers, experts beside a sigmoid-gated shared expert; its
    // config.json twin keeps `A_log` as the dense one does and its experts fused. The rounded
    // decay rates reach the experts' and the shared expert's inputs (measured worst 1.6e-5; 9.9e-5 with the recurrence summed in another order).
    Fixture {
        family: "qwen35moe",
        architecture: Architecture::Qwen35Moe,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-4),
    },
    // gpt-oss: sinks, biases, a window on every other layer, YaRN, clamped SwiGLU experts.
    Fixture {
        family: "gpt-oss",
        architecture: Architecture::GptOss,
        tolerance: (1e-4, 1e-5),
        hf: Some(1e-5),
    },
    // Gemma 4: listed windowed layers, two head sizes, proportional RoPE, shared keys,
    // per-layer embeddings, a softcap. llama.cpp rounds its GELUs as Gemma 3's, here in the
    // per-layer gates too: measured worst 9.4e-3, mean 7.3e-4; with both GELUs rounded to f16
    // (a scratch experiment, not kept) worst 7.9e-4, mean 4.4e-5.
    Fixture {
        family: "gemma4",
        architecture: Architecture::Gemma4,
        tolerance: (1.5e-2, 1e-3),
        hf: None,
    },
    // Gemma 4 with experts beside each dense feed-forward (26B-A4B's layers): worst 4.9e-3,
    // mean 5.7e-4; with the GELUs rounded as above worst 3.2e-4, mean 2.5e-5.
    Fixture {
        family: "gemma4moe",
        architecture: Architecture::Gemma4,
        tolerance: (1.5e-2, 1e-3),
        hf: None,
    },
];

pub(crate) fn folder(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/archs")
        .join(family)
}

pub(crate) fn reference(family: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(folder(family).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every position's log-softmax for each of the reference's prompts.
pub(crate) fn our_logprobs(model: &Model, prompts: &[Vec<u32>]) -> Vec<Vec<Vec<f32>>> {
    prompts
        .iter()
        .map(|p| {
            let logits = model.session().prefill(p, true).unwrap();
            logits.iter().map(|l| log_softmax(l)).collect()
        })
        .collect()
}

pub(crate) fn their_logprobs(reference: &serde_json::Value, key: &str) -> Vec<Vec<Vec<f32>>> {
    let logits: Vec<Vec<Vec<f32>>> = serde_json::from_value(reference[key].clone()).unwrap();
    logits
        .iter()
        .map(|prompt| prompt.iter().map(|l| log_softmax(l)).collect())
        .collect()
}

/// The largest and the mean |a - b| over every logit of every position.
pub(crate) fn distance(a: &[Vec<Vec<f32>>], b: &[Vec<Vec<f32>>]) -> (f64, f64) {
    let (mut worst, mut sum, mut count) = (0f64, 0f64, 0usize);
    for (a, b) in a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b)) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            let d = f64::from((x - y).abs());
            worst = worst.max(d);
            sum += d;
            count += 1;
        }
    }
    (worst, sum / count as f64)
}

pub(crate) fn prompts(reference: &serde_json::Value) -> Vec<Vec<u32>> {
    serde_json::from_value(reference["prompts"].clone()).unwrap()
}

#[test]
fn f32_files_give_llama_cpps_logits() {
    for fixture in FIXTURES {
        let reference = reference(fixture.family);
        let model = Model::load(&folder(fixture.family).join("model.gguf"), &Device::Cpu).unwrap();
        assert_eq!(model.config().architecture, fixture.architecture);
        let ours = our_logprobs(&model, &prompts(&reference));
        let (worst, mean) = distance(&ours, &their_logprobs(&reference, "f32"));
        eprintln!(
            "{}: |logprob - llama.cpp| worst {worst:.2e}, mean {mean:.2e}",
            fixture.family
        );
        let (most, most_mean) = fixture.tolerance;
        assert!(
            worst < most && mean < most_mean,
            "{}: worst {worst}, mean {mean}",
            fixture.family
        );
    }
}

#[test]
fn a_config_json_directory_gives_the_same_logits_as_the_gguf_file() {
    for (fixture, most) in FIXTURES.iter().filter_map(|f| f.hf.map(|most| (f, most))) {
        let reference = reference(fixture.family);
        let prompts = prompts(&reference);
        let gguf = Model::load(&folder(fixture.family).join("model.gguf"), &Device::Cpu).unwrap();
        let hf = Model::load(&folder(fixture.family).join("hf"), &Device::Cpu).unwrap();
        assert_eq!(hf.config().architecture, fixture.architecture);
        assert_eq!(hf.config().layers, gguf.config().layers);
        let (worst, _) = distance(&our_logprobs(&hf, &prompts), &our_logprobs(&gguf, &prompts));
        assert!(worst < most, "{}: worst {worst}", fixture.family);
    }
}

/// Our Q8_0 run is no further from llama.cpp's F32 run than llama.cpp's own Q8_0 run is.
#[test]
fn quantized_files_are_no_further_from_the_f32_model_than_llama_cpps() {
    for fixture in FIXTURES {
        let reference = reference(fixture.family);
        let path = folder(fixture.family).join("model.q8_0.gguf");
        let model = Model::load(&path, &Device::Cpu).unwrap();
        let exact = their_logprobs(&reference, "f32");
        let (_, ours) = distance(&our_logprobs(&model, &prompts(&reference)), &exact);
        let (_, theirs) = distance(&their_logprobs(&reference, "q8_0"), &exact);
        eprintln!(
            "{} q8_0: mean |logprob - f32| samplab {ours:.2e}, llama.cpp {theirs:.2e}",
            fixture.family
        );
        assert!(
            ours <= theirs,
            "{}: samplab {ours} vs llama.cpp {theirs}",
            fixture.family
        );
    }
}

/// A family's fixture rewritten: `metadata` changes its keys (`None` removes one) and `drop`
/// leaves a tensor out.
pub(crate) fn altered(
    family: &str,
    dir: &Path,
    metadata: &[(&str, Option<gguf_file::Value>)],
    drop: &str,
) -> PathBuf {
    let source = folder(family).join("model.gguf");
    let mut file = std::fs::File::open(&source).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut values = content.metadata.clone();
    for (key, value) in metadata {
        match value {
            Some(v) => values.insert((*key).to_owned(), v.clone()),
            None => values.remove(*key),
        };
    }
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .filter(|name| name.as_str() != drop)
        .map(|name| {
            (
                name.clone(),
                content.tensor(&mut file, name, &Device::Cpu).unwrap(),
            )
        })
        .collect();
    let path = dir.join("altered.gguf");
    crate::common::write_gguf(&path, &values, &tensors);
    path
}

/// `family`'s config.json checkpoint copied into `dir`, its config's `key` set to `value`.
fn edited_config(family: &str, dir: &Path, key: &str, value: serde_json::Value) {
    let hf = folder(family).join("hf");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(hf.join("config.json")).unwrap()).unwrap();
    config[key] = value;
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(hf.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
}

pub(crate) fn load_error(path: &Path) -> String {
    Model::load(path, &Device::Cpu)
        .expect_err("loading must fail")
        .to_string()
}

#[test]
fn a_gemma_file_without_a_window_or_with_a_missing_norm_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let key = "gemma3.attention.sliding_window";
    let zero = altered(
        "gemma3",
        dir.path(),
        &[(key, Some(gguf_file::Value::U32(0)))],
        "",
    );
    let err = load_error(&zero);
    assert!(err.contains(key) && err.contains("is 0"), "{err}");
    let missing = altered("gemma3", dir.path(), &[(key, None)], "");
    let err = load_error(&missing);
    assert!(err.contains(key) && err.contains("missing"), "{err}");
    let norm = "blk.3.post_ffw_norm.weight";
    let err = load_error(&altered("gemma3", dir.path(), &[], norm));
    assert!(err.contains(norm) && err.contains("gemma3 model"), "{err}");
}

#[test]
fn a_gemma_config_json_with_bad_layer_types_or_scales_says_so() {
    let cases: &[(&str, serde_json::Value, &str)] = &[
        (
            "layer_types",
            serde_json::json!(["full_attention"]),
            "lists 1 layers for 7",
        ),
        (
            "layer_types",
            serde_json::json!([
                "sliding_attention",
                "local",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention",
                "full_attention"
            ]),
            "`local`",
        ),
        (
            "sliding_window",
            serde_json::json!(0),
            "`sliding_window` is 0",
        ),
        (
            "query_pre_attn_scalar",
            serde_json::json!(0),
            "query_pre_attn_scalar",
        ),
        (
            "hidden_activation",
            serde_json::json!("relu"),
            "hidden_activation `relu`",
        ),
    ];
    for (key, value, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        edited_config("gemma3", dir.path(), key, value.clone());
        let err = load_error(dir.path());
        assert!(err.contains(said), "{key} = {value}: {err}");
    }
}

#[test]
fn expert_counts_that_no_model_has_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (count, used) = ("qwen3moe.expert_count", "qwen3moe.expert_used_count");
    let u32 = |n| Some(gguf_file::Value::U32(n));
    for (key, value, said) in [
        (count, u32(0), "`qwen3moe.expert_count` is 0"),
        (
            used,
            u32(5),
            "`qwen3moe.expert_used_count` is 5; each token takes 1 to",
        ),
        (used, u32(0), "`qwen3moe.expert_used_count` is 0"),
        (count, None, "`qwen3moe.expert_count` is missing"),
    ] {
        let err = load_error(&altered("qwen3moe", dir.path(), &[(key, value)], ""));
        assert!(err.contains(said), "{key}: {err}");
    }
    let experts = "blk.1.ffn_down_exps.weight";
    let err = load_error(&altered("qwen3moe", dir.path(), &[], experts));
    assert!(
        err.contains(experts) && err.contains("qwen3moe model"),
        "{err}"
    );
}

/// Rows decoded side by side take their experts each as a row decoded alone does: the same
/// bits, whichever experts the other rows chose.
#[test]
fn batched_rows_of_a_mixture_of_experts_equal_single_rows() {
    for family in ["qwen3moe", "mixtral", "gpt-oss", "gemma4moe", "qwen35moe"] {
        let model = Model::load(&folder(family).join("model.q8_0.gguf"), &Device::Cpu).unwrap();
        let prompt = [2u32, 260, 262, 264, 261];
        let next = [263u32, 10, 40, 266];
        let bits = |l: &[f32]| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let single: Vec<Vec<u32>> = next
            .iter()
            .map(|&t| {
                let mut session = model.session();
                session.prefill(&prompt, false).unwrap();
                bits(&session.decode_step(&[t]).unwrap()[0])
            })
            .collect();
        let mut session = model.session();
        session.prefill(&prompt, false).unwrap();
        session.fork(next.len()).unwrap();
        let batch: Vec<Vec<u32>> = session
            .decode_step(&next)
            .unwrap()
            .iter()
            .map(|l| bits(l))
            .collect();
        assert_eq!(batch, single, "{family}");
    }
}

#[test]
fn phi3_takes_longrope_factors_by_the_context_and_refuses_rotations_no_model_has() {
    use samplab::model::RopeScaling;
    let dir = tempfile::tempdir().unwrap();
    let factors = |model: &Model| match &model.config().rope_scaling {
        Some(RopeScaling::FreqFactors(f)) => f.clone(),
        other => panic!("{other:?}"),
    };
    let long = Model::load(&folder("phi3").join("model.gguf"), &Device::Cpu).unwrap();
    assert_eq!(factors(&long), [1.0, 1.5, 3.0, 8.0]);
    // A context no longer than the original one takes the short factors.
    let original = "phi3.rope.scaling.original_context_length";
    let u32 = |n| Some(gguf_file::Value::U32(n));
    let short = altered("phi3", dir.path(), &[(original, u32(64))], "");
    let short = Model::load(&short, &Device::Cpu).unwrap();
    assert_eq!(factors(&short), [1.0, 1.1, 1.3, 2.0]);
    let rot = "phi3.rope.dimension_count";
    for (metadata, drop, said) in [
        (
            vec![(rot, u32(7))],
            "",
            "rotates 7 dimensions of a 16-dimension head",
        ),
        (vec![(rot, u32(32))], "", "rotates 32 dimensions"),
        (vec![(rot, u32(12))], "", "rope_factors_long.weight"),
        (vec![], "blk.1.ffn_up.weight", "blk.1.ffn_up.weight"),
    ] {
        let err = load_error(&altered("phi3", dir.path(), &metadata, drop));
        assert!(err.contains(said), "{said}: {err}");
    }
    let err = load_error(&altered(
        "phi3",
        dir.path(),
        &[],
        "blk.2.attn_output.weight",
    ));
    assert!(err.contains("phi3 model"), "{err}");
}

#[test]
fn olmo3_windows_three_layers_of_four_and_olmo2_none() {
    let windows = |family: &str| {
        let model = Model::load(&folder(family).join("model.gguf"), &Device::Cpu).unwrap();
        let hf = Model::load(&folder(family).join("hf"), &Device::Cpu).unwrap();
        assert_eq!(hf.config().layers, model.config().layers);
        model
            .config()
            .layers
            .iter()
            .map(|l| l.window)
            .collect::<Vec<_>>()
    };
    assert_eq!(windows("olmo3"), [Some(4), Some(4), Some(4), None, Some(4)]);
    assert_eq!(windows("olmo2"), [None, None, None]);
}

#[test]
fn gpt_oss_windows_every_other_layer_from_the_first() {
    let gguf = Model::load(&folder("gpt-oss").join("model.gguf"), &Device::Cpu).unwrap();
    let hf = Model::load(&folder("gpt-oss").join("hf"), &Device::Cpu).unwrap();
    let windows: Vec<Option<usize>> = gguf.config().layers.iter().map(|l| l.window).collect();
    assert_eq!(windows, [Some(4), None, Some(4)]);
    assert_eq!(hf.config().layers, gguf.config().layers);
    // The windowed layers rotate as the others do: YaRN, no base of their own.
    assert_eq!(gguf.config().rope_theta_local, None);
    assert_eq!(hf.config().rope_theta_local, None);
}

/// llama.cpp reads YaRN's betas from Ministral 3 files alone: a gpt-oss file that states
/// others rotates with the defaults all the same.
#[test]
fn gpt_oss_ignores_yarn_betas_in_its_metadata_as_llama_cpp_does() {
    let dir = tempfile::tempdir().unwrap();
    let f32 = |x| Some(gguf_file::Value::F32(x));
    let with_betas = altered(
        "gpt-oss",
        dir.path(),
        &[
            ("gpt-oss.rope.scaling.yarn_beta_fast", f32(4.0)),
            ("gpt-oss.rope.scaling.yarn_beta_slow", f32(0.25)),
        ],
        "",
    );
    let prompts = prompts(&reference("gpt-oss"));
    let plain = Model::load(&folder("gpt-oss").join("model.gguf"), &Device::Cpu).unwrap();
    let stated = Model::load(&with_betas, &Device::Cpu).unwrap();
    assert_eq!(stated.config().rope_scaling, plain.config().rope_scaling);
    let (worst, _) = distance(
        &our_logprobs(&stated, &prompts),
        &our_logprobs(&plain, &prompts),
    );
    assert_eq!(worst, 0.0);
}

#[test]
fn a_gpt_oss_file_missing_a_sink_or_with_counts_that_do_not_fit_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = "blk.1.attn_sinks.weight";
    let err = load_error(&altered("gpt-oss", dir.path(), &[], sinks));
    assert!(
        err.contains(sinks) && err.contains("gpt-oss model"),
        "{err}"
    );
    let expert_bias = "blk.2.ffn_up_exps.bias";
    let u32 = |n| Some(gguf_file::Value::U32(n));
    for (key, value, said) in [
        // The file's tensors hold four experts.
        ("gpt-oss.expert_count", u32(3), "blk.0.ffn_gate_inp.weight"),
        (
            "gpt-oss.expert_used_count",
            u32(5),
            "`gpt-oss.expert_used_count` is 5",
        ),
        (
            "gpt-oss.attention.head_count_kv",
            u32(3),
            "2 heads are not a multiple of 3 kv heads",
        ),
        (
            "gpt-oss.attention.sliding_window",
            None,
            "gpt-oss.attention.sliding_window",
        ),
    ] {
        let err = load_error(&altered("gpt-oss", dir.path(), &[(key, value)], ""));
        assert!(err.contains(said), "{key}: {err}");
    }
    // Expert biases are optional as a whole; present, each must fit.
    let err = load_error(&altered(
        "gpt-oss",
        dir.path(),
        &[("gpt-oss.expert_feed_forward_length", u32(16))],
        "",
    ));
    assert!(err.contains("ffn_gate_exps"), "{err}");
    let model = Model::load(
        &altered("gpt-oss", dir.path(), &[], expert_bias),
        &Device::Cpu,
    );
    assert!(model.is_ok(), "a file without expert biases loads");
}

#[test]
fn a_gpt_oss_checkpoint_whose_fused_experts_do_not_cut_says_so() {
    let hf = folder("gpt-oss").join("hf");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(hf.join("config.json"), dir.path().join("config.json")).unwrap();
    // The fused gate-up of layer 0 with an odd last axis.
    let name = "model.layers.0.mlp.experts.gate_up_proj";
    let mut tensors =
        candle_core::safetensors::load(hf.join("model.safetensors"), &Device::Cpu).unwrap();
    let fused = &tensors[name];
    let width = fused.dim(2).unwrap();
    tensors.insert(name.to_owned(), fused.narrow(2, 0, width - 1).unwrap());
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains(name) && err.contains("cannot be cut"), "{err}");
    // A sink missing from the checkpoint is named as the loader looks for it.
    let mut tensors =
        candle_core::safetensors::load(hf.join("model.safetensors"), &Device::Cpu).unwrap();
    tensors.remove("model.layers.2.self_attn.sinks");
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("model.layers.2.self_attn.sinks"), "{err}");
    // OpenAI's MXFP4 layout is refused by name.
    let mut tensors =
        candle_core::safetensors::load(hf.join("model.safetensors"), &Device::Cpu).unwrap();
    let blocks = "model.layers.0.mlp.experts.down_proj_blocks";
    tensors.insert(
        blocks.to_owned(),
        candle_core::Tensor::zeros((4, 32, 1, 16), candle_core::DType::U8, &Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains(blocks) && err.contains("MXFP4"), "{err}");
    // A clamp other than llama.cpp's.
    edited_config(
        "gpt-oss",
        dir.path(),
        "swiglu_limit",
        serde_json::json!(10.0),
    );
    let err = load_error(dir.path());
    assert!(err.contains("swiglu_limit 10"), "{err}");
}

/// gpt-oss as released, its experts in MXFP4: MXFP4 itself moves the logprobs far from the F32
/// model's (about a nat per position on this fixture, whose gates are scaled up), and our run of
/// the file lands where llama.cpp's does, within a tenth of that (we dequantize MXFP4 exactly;
/// llama.cpp also rounds the activations to 8 bits).
#[test]
fn gpt_oss_with_mxfp4_experts_runs_as_llama_cpp_runs_it() {
    let reference = reference("gpt-oss");
    let model = Model::load(&folder("gpt-oss").join("model.mxfp4.gguf"), &Device::Cpu).unwrap();
    let kernels = model.kernels();
    assert!(
        kernels.iter().any(|(dtype, _)| dtype == "mxfp4"),
        "{kernels:?}"
    );
    let ours = our_logprobs(&model, &prompts(&reference));
    let theirs = their_logprobs(&reference, "mxfp4");
    let (_, quantization) = distance(&theirs, &their_logprobs(&reference, "f32"));
    let (worst, mean) = distance(&ours, &theirs);
    eprintln!(
        "gpt-oss mxfp4: llama.cpp's mean |logprob - f32| {quantization:.2e}; samplab vs \
         llama.cpp on the same file worst {worst:.2e}, mean {mean:.2e}"
    );
    assert!(mean < quantization / 10.0, "{mean} vs {quantization}");
}

#[test]
fn a_qwen35_config_json_with_bad_linear_attention_keys_says_so() {
    let layers = |last: &str| {
        let mut types = vec!["linear_attention"; 5];
        types.push(last);
        serde_json::json!(types)
    };
    let cases: &[(&str, serde_json::Value, &str)] = &[
        (
            "linear_key_head_dim",
            serde_json::Value::Null,
            "`linear_key_head_dim` is missing",
        ),
        (
            "linear_num_key_heads",
            serde_json::json!(3),
            "is not a multiple of `linear_num_key_heads` (3)",
        ),
        (
            "linear_conv_kernel_dim",
            serde_json::json!(0),
            "`linear_conv_kernel_dim` is 0",
        ),
        (
            "layer_types",
            serde_json::json!(["linear_attention"]),
            "lists 1 layers for 6",
        ),
        ("layer_types", layers("mamba"), "`mamba`"),
    ];
    for (key, value, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        edited_config("qwen35", dir.path(), key, value.clone());
        let err = load_error(dir.path());
        assert!(err.contains(said), "{key} = {value}: {err}");
    }
}

#[test]
fn a_qwen35moe_config_json_with_bad_expert_keys_or_tensors_says_so() {
    let cases: &[(&str, serde_json::Value, &str)] = &[
        (
            "num_experts",
            serde_json::Value::Null,
            "`num_experts` is missing",
        ),
        (
            "num_experts_per_tok",
            serde_json::json!(5),
            "`num_experts_per_tok` is 5; each token takes 1 to `num_experts` (4)",
        ),
        (
            "moe_intermediate_size",
            serde_json::json!(0),
            "`moe_intermediate_size` is 0",
        ),
        (
            "shared_expert_intermediate_size",
            serde_json::json!(0),
            "`shared_expert_intermediate_size` is 0",
        ),
        // The fixture's experts are 32 wide: 48 does not fit its tensors.
        (
            "moe_intermediate_size",
            serde_json::json!(48),
            "model.layers.0.mlp.experts.0.gate_up_proj.weight",
        ),
        (
            "norm_topk_prob",
            serde_json::json!(false),
            "`norm_topk_prob` is false",
        ),
    ];
    for (key, value, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        edited_config("qwen35moe", dir.path(), key, value.clone());
        let err = load_error(dir.path());
        assert!(err.contains(said), "{key} = {value}: {err}");
    }
    // Without experts, a config must say how wide its feed-forward is.
    let dir = tempfile::tempdir().unwrap();
    edited_config(
        "qwen35",
        dir.path(),
        "intermediate_size",
        serde_json::Value::Null,
    );
    let err = load_error(dir.path());
    assert!(err.contains("`intermediate_size` is missing"), "{err}");
    // A fused tensor with no expert axis cannot be cut into experts.
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = qwen35moe_tensors();
    let name = "model.layers.1.mlp.experts.gate_up_proj";
    tensors.insert(name.to_owned(), tensors[name].get(0).unwrap());
    write_qwen35moe(dir.path(), &tensors);
    let err = load_error(dir.path());
    assert!(
        err.contains(name) && err.contains("cannot be cut into experts"),
        "{err}"
    );
}

fn qwen35moe_tensors() -> std::collections::HashMap<String, candle_core::Tensor> {
    let file = folder("qwen35moe").join("hf/model.safetensors");
    candle_core::safetensors::load(file, &Device::Cpu).unwrap()
}

fn write_qwen35moe(dir: &Path, tensors: &std::collections::HashMap<String, candle_core::Tensor>) {
    let hf = folder("qwen35moe").join("hf");
    std::fs::copy(hf.join("config.json"), dir.join("config.json")).unwrap();
    candle_core::safetensors::save(tensors, dir.join("model.safetensors")).unwrap();
}

/// Checkpoints written before transformers 5 keep one tensor per expert: they load as the
/// fused ones do, to the same logits.
#[test]
fn a_qwen35moe_checkpoint_with_one_tensor_per_expert_gives_the_fused_ones_logits() {
    let mut apart = std::collections::HashMap::new();
    for (name, t) in qwen35moe_tensors() {
        // `model.layers.{i}.mlp.experts` of `model.layers.{i}.mlp.experts.gate_up_proj`.
        let experts = name.rsplit_once('.').map_or("", |(head, _)| head);
        let expert = |e: usize, proj: &str| format!("{experts}.{e}.{proj}.weight");
        if name.ends_with(".gate_up_proj") {
            let size = t.dim(1).unwrap() / 2;
            for e in 0..t.dim(0).unwrap() {
                let both = t.get(e).unwrap();
                apart.insert(expert(e, "gate_proj"), both.narrow(0, 0, size).unwrap());
                apart.insert(expert(e, "up_proj"), both.narrow(0, size, size).unwrap());
            }
        } else if name.ends_with(".experts.down_proj") {
            for e in 0..t.dim(0).unwrap() {
                apart.insert(expert(e, "down_proj"), t.get(e).unwrap());
            }
        } else {
            apart.insert(name, t);
        }
    }
    assert!(apart.contains_key("model.layers.5.mlp.experts.3.up_proj.weight"));
    let dir = tempfile::tempdir().unwrap();
    write_qwen35moe(dir.path(), &apart);
    let prompts = prompts(&reference("qwen35moe"));
    let fused = Model::load(&folder("qwen35moe").join("hf"), &Device::Cpu).unwrap();
    let apart = Model::load(dir.path(), &Device::Cpu).unwrap();
    assert_eq!(
        our_logprobs(&apart, &prompts),
        our_logprobs(&fused, &prompts)
    );
}

/// transformers 5 writes RoPE's base and the rotated share of each head inside
/// `rope_parameters`, as Qwen3.5's checkpoints ship: read there, they give the same model.
#[test]
fn a_qwen35moe_config_json_with_rope_parameters_rotates_the_same_share() {
    let hf = folder("qwen35moe").join("hf");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(hf.join("config.json")).unwrap()).unwrap();
    let plain = Model::load(&hf, &Device::Cpu).unwrap();
    let object = config.as_object_mut().unwrap();
    let factor = object.remove("partial_rotary_factor").unwrap();
    let theta = object.remove("rope_theta").unwrap();
    config["rope_parameters"] = serde_json::json!({
        "rope_type": "default", "rope_theta": theta, "partial_rotary_factor": factor,
        "mrope_interleaved": true, "mrope_section": [2, 1, 1],
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    std::fs::copy(
        hf.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    let nested = Model::load(dir.path(), &Device::Cpu).unwrap();
    assert_eq!(nested.config().rope_dims, 8);
    assert_eq!(nested.config(), plain.config());
}

/// Set in the child process that takes a GPU's paths (see below).
const GPU_PATHS_CHILD: &str = "SAMPLAB_TEST_GPU_PATHS";

/// Every family's fixture through the paths a GPU takes (candle's products, attention with
/// masks, windows and sinks, adds; experts one after another; logits copied out whole), run on
/// the CPU, gives the CPU paths' logprobs and tokens: what a GPU runs is checked where no GPU
/// is. The switch is process-wide, so the comparison runs alone in a child process.
#[test]
fn the_gpu_paths_give_every_family_the_cpu_paths_logits() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "model_families::gpu_paths_against_cpu_paths_in_this_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(GPU_PATHS_CHILD, "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    eprintln!("{said}");
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains("1 passed"),
        "the child ran no comparison: {said}"
    );
}

/// The child's side of the test above; run alone, it does nothing (the switch would reach the
/// tests running beside it).
#[test]
#[ignore = "run by the_gpu_paths_give_every_family_the_cpu_paths_logits in a process of its own"]
fn gpu_paths_against_cpu_paths_in_this_process() {
    use samplab::engine::{Prompt, Request};
    use samplab::model::device::{DeviceChoice, take_gpu_paths};
    if std::env::var_os(GPU_PATHS_CHILD).is_none() {
        return;
    }
    let params: samplab::params::SamplingParams =
        serde_yaml_ng::from_str("num_samples: 3\nmax_tokens: 6\nseed: 3\nlogprobs: 0").unwrap();
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw("a b c"),
        lane: 0,
        params,
        branches: Vec::new(),
    };
    let mut families: Vec<String> = std::fs::read_dir(folder(""))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    families.sort();
    assert!(families.len() >= 15, "{families:?}");
    for family in &families {
        let path = folder(family).join("model.gguf");
        let reference = reference(family);
        let run = |gpu: bool| {
            take_gpu_paths(gpu);
            let model = Model::load(&path, &Device::Cpu).unwrap();
            let logprobs = our_logprobs(&model, &prompts(&reference));
            let mut loaded = crate::common::load_at(&path, DeviceChoice::Cpu);
            let response = loaded.run(&request, &mut || false, &mut |_| {}).unwrap();
            take_gpu_paths(false);
            let samples: Vec<(Vec<u32>, Vec<f32>)> = response
                .trajectories
                .iter()
                .map(|t| (t.token_ids.clone(), t.logprobs.clone()))
                .collect();
            (logprobs, samples)
        };
        let (cpu, cpu_samples) = run(false);
        let (gpu, gpu_samples) = run(true);
        let (worst, mean) = distance(&cpu, &gpu);
        eprintln!("{family}: GPU paths against CPU paths: worst {worst:.2e}, mean {mean:.2e}");
        // f32 summation order alone: candle's products sum in other blocks than samplab's,
        // and Qwen3.5's recurrence carries what differs on (measured worst 1.5e-4 there, under
        // 3e-5 in every other family).
        assert!(
            worst < 5e-4 && mean < 2e-5,
            "{family}: worst {worst}, mean {mean}"
        );
        for ((cpu_ids, cpu_lp), (gpu_ids, gpu_lp)) in cpu_samples.iter().zip(&gpu_samples) {
            assert_eq!(cpu_ids, gpu_ids, "{family}: a batched sample's tokens");
            for (a, b) in cpu_lp.iter().zip(gpu_lp) {
                assert!((a - b).abs() < 1e-4, "{family}: logprob {a} against {b}");
            }
        }
    }
}
