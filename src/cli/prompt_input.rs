//! The prompt as `sample` and `export` take it: `--prompt-file` (a file or standard input) and
//! `--messages` (a conversation), each read with errors that name the file and what is wrong.

use samplab::model::text::chat_template::Message;
use std::io::Read;
use std::path::Path;

/// `--prompt-file`'s text; errors name the file and say what is wrong with it.
pub fn read_prompt_file(path: &Path) -> anyhow::Result<String> {
    let (bytes, shown) = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow::anyhow!("cannot read the prompt from standard input: {e}"))?;
        (bytes, "standard input".to_owned())
    } else {
        let shown = format!("the prompt file {}", path.display());
        let bytes = samplab::regular_file::check(path)
            .and_then(|()| std::fs::read(path))
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => anyhow::anyhow!("{shown} does not exist"),
                _ => anyhow::anyhow!("cannot read {shown}: {e}"),
            })?;
        (bytes, shown)
    };
    let mut text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{shown} is not UTF-8 text (byte {} is not valid UTF-8): convert it, e.g. with \
             `iconv -t UTF-8`",
            e.utf8_error().valid_up_to()
        )
    })?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// A `--messages` file: a list of `{role, content}` messages, at least one.
pub fn read_conversation(path: &Path) -> anyhow::Result<Vec<Message>> {
    let shown = path.display();
    let text = samplab::regular_file::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the messages file {shown}: {e}"))?;
    let value = samplab::yaml_guard::parse(&text)
        .map_err(|e| anyhow::anyhow!("the messages file {shown} is not valid YAML or JSON: {e}"))?;
    let messages: Vec<Message> = serde_yaml_ng::from_value(value).map_err(|e| {
        anyhow::anyhow!(
            "the messages file {shown} must be a list of messages like \
             `- {{role: user, content: \"Hi\"}}`: {e}"
        )
    })?;
    if messages.is_empty() {
        anyhow::bail!("the messages file {shown} has no messages: give at least one");
    }
    Ok(messages)
}
