//! Which server answers, and which of its models: `GET /models`, its entries' `owned_by`, and
//! the paths only one kind of server has (vLLM's `/version`, llama.cpp's `/props`).

use super::http::Client;
use serde_json::Value;

/// The servers whose parameters samplab knows; any other OpenAI-compatible one gets OpenAI's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Vllm,
    /// llama.cpp's `llama-server`.
    LlamaServer,
    /// llama-cpp-python's `llama_cpp.server`.
    LlamaCppPython,
    OpenAi,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Vllm => "vLLM",
            ServerKind::LlamaServer => "llama.cpp server",
            ServerKind::LlamaCppPython => "llama-cpp-python",
            ServerKind::OpenAi => "OpenAI-compatible",
        }
    }

    /// Whether it serves one request at a time: llama-cpp-python's server drops a stream
    /// when another request comes (its `interrupt_requests`), so samples go one after another.
    pub fn one_at_a_time(self) -> bool {
        self == ServerKind::LlamaCppPython
    }

    /// What the logprobs it returns are, for the inspector and the status bar.
    pub fn logprobs_are(self) -> &'static str {
        match self {
            ServerKind::Vllm => "raw logprobs (vLLM's logprobs_mode default)",
            ServerKind::LlamaServer | ServerKind::LlamaCppPython => {
                "raw logprobs (llama.cpp's, before sampling)"
            }
            ServerKind::OpenAi => "the server's logprobs (OpenAI's are raw)",
        }
    }
}

/// The server as found.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub kind: ServerKind,
    /// The model's id as the server names it.
    pub model: String,
    /// The server's version, where it says.
    pub version: Option<String>,
}

impl ServerInfo {
    /// The model as samplab names it: its id, or the file name of an id that is a path (as
    /// llama-cpp-python names a model after its file unless given `--model_alias`).
    pub fn name(&self) -> String {
        if self.model.starts_with('/') || self.model.starts_with("./") {
            let file = self.model.rsplit('/').next().unwrap_or(&self.model);
            return file.strip_suffix(".gguf").unwrap_or(file).to_owned();
        }
        self.model.clone()
    }
}

/// Finds the model `wanted` (or the server's only one) and what serves it.
pub fn discover(client: &Client, wanted: Option<&str>) -> anyhow::Result<ServerInfo> {
    let url = client.spec.url("models");
    let listing = client.get_json(&url)?;
    let entries = listing
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            anyhow::anyhow!("{url} has no `data` list of models; is it an OpenAI-compatible API?")
        })?;
    let ids: Vec<&str> = entries
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .collect();
    let model = match (wanted, ids.as_slice()) {
        (Some(wanted), _) if ids.contains(&wanted) => wanted.to_owned(),
        (Some(wanted), []) => wanted.to_owned(),
        (Some(wanted), ids) => anyhow::bail!(
            "{} serves no model `{wanted}`; it serves: {}",
            client.spec.base,
            list(ids)
        ),
        (None, [one]) => (*one).to_owned(),
        (None, []) => anyhow::bail!(
            "{} lists no model: name one after `#` ({}#my-model)",
            client.spec.base,
            client.spec.base
        ),
        (None, several) => anyhow::bail!(
            "{} serves {} models: pick one with `#`, e.g. {}#{} (it serves: {})",
            client.spec.base,
            several.len(),
            client.spec.base,
            several[0],
            list(several)
        ),
    };
    let owned_by = entries
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model.as_str()))
        .and_then(|m| m.get("owned_by"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let root = client.spec.root().to_owned();
    let version = || {
        client
            .probe(&format!("{root}/version"))
            .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned))
    };
    let (kind, version) = match owned_by {
        "vllm" => (ServerKind::Vllm, version()),
        "llamacpp" => (ServerKind::LlamaServer, None),
        // llama-cpp-python's server names every model's owner "me".
        "me" => (ServerKind::LlamaCppPython, None),
        _ => match version() {
            Some(version) => (ServerKind::Vllm, Some(version)),
            None if client.probe(&format!("{root}/props")).is_some() => {
                (ServerKind::LlamaServer, None)
            }
            None => (ServerKind::OpenAi, None),
        },
    };
    Ok(ServerInfo {
        kind,
        model,
        version,
    })
}

/// Up to ten names, then how many more.
fn list(ids: &[&str]) -> String {
    let mut shown = ids.iter().take(10).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > 10 {
        shown.push_str(&format!(" and {} more", ids.len() - 10));
    }
    shown
}
