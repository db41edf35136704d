//! `--model http(s)://host:port/v1#model-name`: where the API is, and which of its models.

/// A served model as `--model` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// The API's base, without a trailing `/`: `http://127.0.0.1:8000/v1`.
    pub base: String,
    /// The model after `#`; `None` asks the server (`GET /models`).
    pub model: Option<String>,
}

impl RemoteSpec {
    /// `None` when `spec` is no URL (a path or a Hub id); an error when it is a URL samplab
    /// cannot use.
    pub fn parse(spec: &str) -> Option<Result<RemoteSpec, String>> {
        let scheme = ["http://", "https://"].into_iter().find(|scheme| {
            spec.len() > scheme.len() && spec[..scheme.len()].eq_ignore_ascii_case(scheme)
        })?;
        Some(Self::parse_url(spec, scheme))
    }

    fn parse_url(spec: &str, scheme: &str) -> Result<RemoteSpec, String> {
        let (url, model) = match spec.split_once('#') {
            Some((url, model)) if model.trim().is_empty() => {
                return Err(format!(
                    "{spec}: nothing after `#`; name the served model (`{url}#my-model`) or \
                     leave out the `#` to take the server's only one"
                ));
            }
            Some((url, model)) => (url, Some(model.to_owned())),
            None => (spec, None),
        };
        let rest = &url[scheme.len()..];
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(format!(
                "{spec}: no host in the URL; write it as http://host:port/v1"
            ));
        }
        if host.contains('@') {
            return Err(format!(
                "{spec}: credentials in the URL would show in titles and exports; put the API \
                 key in SAMPLAB_API_KEY (or OPENAI_API_KEY) instead"
            ));
        }
        let path = path.trim_end_matches('/');
        if path.contains(['?', '#']) {
            return Err(format!(
                "{spec}: the URL has a query; give the API's base only, e.g. http://{host}/v1"
            ));
        }
        // The OpenAI-compatible servers all serve under /v1; a bare host means that.
        let path = if path.is_empty() { "/v1" } else { path };
        Ok(RemoteSpec {
            base: format!("{}{host}{path}", &url[..scheme.len()].to_ascii_lowercase()),
            model,
        })
    }

    /// The URL of an endpoint under the base: `completions`, `models`.
    pub fn url(&self, endpoint: &str) -> String {
        format!("{}/{endpoint}", self.base)
    }

    /// The server's root (the base without its last `/v1`), where llama.cpp's `/props` and
    /// vLLM's `/version` live.
    pub fn root(&self) -> &str {
        self.base.strip_suffix("/v1").unwrap_or(&self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<RemoteSpec, String> {
        RemoteSpec::parse(spec).expect("a URL")
    }

    #[test]
    fn urls_name_the_base_and_the_model() {
        let spec = parse("http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B").unwrap();
        assert_eq!(spec.base, "http://127.0.0.1:8000/v1");
        assert_eq!(spec.model.as_deref(), Some("Qwen/Qwen2.5-7B"));
        assert_eq!(
            spec.url("completions"),
            "http://127.0.0.1:8000/v1/completions"
        );
        assert_eq!(spec.root(), "http://127.0.0.1:8000");
        assert_eq!(
            parse("HTTPS://api.example.com/").unwrap().base,
            "https://api.example.com/v1"
        );
        assert_eq!(
            parse("http://h:1/openai/v1/").unwrap().base,
            "http://h:1/openai/v1"
        );
        assert!(RemoteSpec::parse("org/name").is_none());
        assert!(RemoteSpec::parse("./model.gguf").is_none());
    }

    #[test]
    fn urls_samplab_cannot_use_say_what_would_work() {
        for (spec, want) in [
            ("http://h:1/v1#", "nothing after `#`"),
            ("http:///v1", "no host"),
            ("https://user:key@h/v1", "SAMPLAB_API_KEY"),
            ("http://h/v1?x=1", "has a query"),
        ] {
            let err = parse(spec).unwrap_err();
            assert!(err.contains(want), "{spec}: {err}");
        }
    }
}
