//! `--chat-template FILE|NAME`: a model's named templates, a Jinja file of the user's, and a
//! model whose templates are all named (no `default`), which says so and lists the names.

use crate::common;
use crate::common::samplab;
use samplab::model::text::chat_template::{ChatTemplate, ModelTemplates};
use std::collections::BTreeMap;

const ONE: &str = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
const TOOLS: &str = "TOOLS {{ messages[-1].content }}";

fn tokens() -> BTreeMap<String, String> {
    BTreeMap::from([("eos_token".to_owned(), "</s>".to_owned())])
}

#[test]
fn a_name_picks_a_named_template_and_an_unknown_one_lists_the_names() {
    let templates = ModelTemplates::new(
        Some(ONE.to_owned()),
        vec![("tool_use".to_owned(), TOOLS.to_owned())],
        tokens(),
    );
    let chosen = templates.choose("tool_use").unwrap();
    assert_eq!(chosen.render("hi").unwrap(), "TOOLS hi");
    assert_eq!(
        templates.choose("default").unwrap().render("hi").unwrap(),
        "[user] hi\n"
    );
    let err = templates.choose("tools").unwrap_err();
    assert!(
        err.contains("`tools` is neither a Jinja file nor a template of the model")
            && err.contains("default, tool_use"),
        "{err}"
    );
    assert_eq!(templates.missing_default(), None);
}

#[test]
fn a_file_is_read_as_the_template_with_the_models_special_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.jinja");
    std::fs::write(&file, "{{ messages[0].content }}{{ eos_token }}").unwrap();
    let templates = ModelTemplates::new(None, Vec::new(), tokens());
    let chosen = templates.choose(file.to_str().unwrap()).unwrap();
    assert_eq!(chosen.render("hi").unwrap(), "hi</s>");
    let err = templates.choose("nothing-here.jinja").unwrap_err();
    assert!(err.contains("the model has no named templates"), "{err}");
}

#[test]
fn named_templates_without_a_default_say_so_and_list_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"chat_template": [
        {"name": "tool_use", "template": TOOLS},
        {"name": "rag", "template": ONE},
    ]});
    std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
    assert_eq!(ChatTemplate::from_hf_dir(dir.path()).unwrap(), None);
    let templates = ChatTemplate::templates_of_hf_dir(dir.path()).unwrap();
    let why = templates.missing_default().expect("no default");
    assert!(
        why.contains("named chat templates (tool_use, rag) but none called `default`")
            && why.contains("--chat-template NAME"),
        "{why}"
    );
    assert_eq!(
        templates.choose("rag").unwrap().render("x").unwrap(),
        "[user] x\n"
    );
}

/// From outside, on the real SmolLM2: a template file renders the prompt the model sees (and
/// implies --chat), and an unknown name names the model's templates.
#[test]
fn sample_renders_with_the_chat_template_file_given() {
    let Some(model) = common::real_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("terse.jinja");
    std::fs::write(
        &file,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
         <|im_start|>assistant\nIn one word:",
    )
    .unwrap();
    let out = samplab(&[
        "sample",
        "--model",
        model,
        "--prompt",
        "Name a colour.",
        "--chat-template",
        file.to_str().unwrap(),
        "--json",
        "--set",
        "max_tokens=1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["prompt"]["rendered"],
        "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\nIn one word:"
    );

    let out = samplab(&[
        "sample",
        "--model",
        model,
        "--prompt",
        "hi",
        "--chat-template",
        "tool_use",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`tool_use` is neither a Jinja file nor a template of the model")
            && err.contains("the model's templates are default"),
        "{err}"
    );
}

#[test]
fn exports_pass_the_chosen_template_in_each_targets_form() {
    use samplab::export::{ExportContext, to_llama_cpp, to_openai, to_transformers, to_vllm};
    use samplab::model::text::chat_template::Message;
    use samplab::params::SamplingParams;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.jinja");
    std::fs::write(&file, TOOLS).unwrap();
    let file = file.to_str().unwrap();
    let messages = [Message::new("user", "hi")];
    let with = |chat_template| ExportContext {
        messages: Some(&messages),
        chat_template: Some(chat_template),
        ..ExportContext::raw("hi", "m.gguf")
    };
    let params = SamplingParams::default();

    let vllm = to_vllm(&params, &with(file));
    assert!(
        vllm.contains("llm.chat(messages, params, chat_template=chat_template)")
            && vllm.contains(&format!("with open({file:?}, encoding=\"utf-8\") as f:")),
        "{vllm}"
    );
    let openai = to_openai(&params, &with(file));
    assert!(
        openai.contains(r#""chat_template": "TOOLS {{ messages[-1].content }}""#),
        "{openai}"
    );
    assert!(
        to_llama_cpp(&params, &with(file))
            .contains(&format!("--jinja --chat-template-file {file}"))
    );

    // By name: transformers resolves names; the others are told to give the text.
    let transformers = to_transformers(&params, &with("tool_use"));
    assert!(
        transformers.contains("messages, chat_template=\"tool_use\", add_generation_prompt=True"),
        "{transformers}"
    );
    let vllm = to_vllm(&params, &with("tool_use"));
    assert!(
        vllm.contains("takes a chat template's text, not its name"),
        "{vllm}"
    );
    assert!(
        vllm.contains("outputs = llm.chat(messages, params)\n"),
        "{vllm}"
    );
}

/// A model without a template says so in the prompt's title, not only in `l`.
#[test]
fn the_prompt_title_says_when_no_loaded_model_has_a_chat_template() {
    use common::tui::{render, row, state_sized};
    use samplab::tui::{Action, ModelId, Theme, update};
    let mut s = state_sized(120, 30);
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(
        !title.contains("no chat template"),
        "not before it loads: {title}"
    );
    let loaded = common::tui::loaded_with_template(false);
    update(&mut s, Action::Engine(ModelId(0), loaded));
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(title.contains("prompt · no chat template"), "{title}");
}
