//! What an LLM API request body will cost, read before it is sent (feature `json`).
//!
//! [`read_request`] reads an OpenAI (chat completions, completions, responses, embeddings) or
//! Anthropic (messages) request body and gives the model it names and an estimate of the
//! tokens it will be charged: what a driver passes as the request's `model` (which keys the
//! per-model budgets, see [`crate::Request::model`]) and `costs` (`{"tokens": estimate}`).
//! The Python, Node and browser packages expose the same function (`read_llm_request`,
//! `readLlmRequest`), so every language estimates alike.
//!
//! # The estimate
//!
//! `tokens` = the prompt's estimate + the completion budget:
//!
//! - **The prompt**: every string value (object keys are not counted) under the fields that
//!   carry it — `messages`, `system`, `prompt`, `input`, `instructions`, `tools` and
//!   `functions` — counts its characters (Unicode scalar values) divided by
//!   [`CHARS_PER_TOKEN`], the sum rounded up; a whole number there (a prompt given as token
//!   ids) counts one token; an attachment (a `data:` URL, or the `data` of a base64 `source`
//!   or `input_audio`) counts [`ATTACHMENT_TOKENS`] instead of its characters.
//! - **The completion budget**: `max_completion_tokens`, else `max_tokens`, else
//!   `max_output_tokens`, times `n` when the body asks for several choices; when none is
//!   given, [`DEFAULT_COMPLETION_TOKENS`] (a legacy completion, `prompt` without `messages`:
//!   [`DEFAULT_LEGACY_COMPLETION_TOKENS`], OpenAI's documented default; an embedding, whose
//!   model names one or whose body has `encoding_format` or `dimensions`: 0).
//!
//! The estimate errs both ways (a tokenizer is not four characters, a model stops before its
//! budget); the engine learns the margin from the answers' `usage`, so a rule this simple
//! costs little once a few answers have settled (see the [`crate::Limiter`] docs, "Costs").
//!
//! ```
//! let body = br#"{"model": "gpt-4o-mini", "max_tokens": 100,
//!                 "messages": [{"role": "user", "content": "Say hello in French."}]}"#;
//! let req = ratelane::llm::read_request(body).unwrap();
//! assert_eq!(req.model.as_deref(), Some("gpt-4o-mini"));
//! // "user" (4 chars) + "Say hello in French." (20 chars): 24 / 4 = 6, plus 100.
//! assert_eq!(req.tokens, 106);
//! assert_eq!(ratelane::llm::read_request(b"not json"), None);
//! ```

use serde_json::{Map, Value};

/// Characters per token in the prompt's estimate (OpenAI's rule of thumb for English).
pub const CHARS_PER_TOKEN: u64 = 4;

/// What an attachment (an image, a file, audio) counts, in tokens: about what a large image
/// costs (Anthropic: width × height / 750 for 1092 × 1092 pixels).
pub const ATTACHMENT_TOKENS: u64 = 1_600;

/// The completion budget of a chat, responses or messages body that asks for none.
pub const DEFAULT_COMPLETION_TOKENS: u64 = 1_024;

/// The completion budget of a legacy completion body that asks for none (OpenAI's default
/// `max_tokens` for `/v1/completions`).
pub const DEFAULT_LEGACY_COMPLETION_TOKENS: u64 = 16;

/// The fields of a body that carry the prompt.
const PROMPT_FIELDS: [&str; 7] = ["messages", "system", "prompt", "input", "instructions", "tools", "functions"];

/// An LLM API request, as [`read_request`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LlmRequest {
    /// The body's `model`, if it names one.
    pub model: Option<String>,
    /// The estimated tokens: the prompt's estimate plus the completion budget (see the module
    /// docs).
    pub tokens: u64,
}

/// The model and estimated tokens of an OpenAI or Anthropic request body; `None` for a body
/// that is not a JSON object with `messages`, `prompt` or `input` (not such a request). Never
/// fails otherwise: fields of the wrong type are ignored. See the module docs for the rule.
pub fn read_request(body: &[u8]) -> Option<LlmRequest> {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    if !["messages", "prompt", "input"].iter().any(|k| body.contains_key(*k)) {
        return None;
    }
    let model = body.get("model").and_then(Value::as_str).map(str::to_string);
    let mut count = Count::default();
    for field in PROMPT_FIELDS {
        if let Some(v) = body.get(field) {
            count.add(v, false);
        }
    }
    let prompt = count.chars.div_ceil(CHARS_PER_TOKEN).saturating_add(count.tokens);
    Some(LlmRequest { tokens: prompt.saturating_add(completion_budget(&body, model.as_deref())), model })
}

/// The completion budget the body asks for (see the module docs).
fn completion_budget(body: &Map<String, Value>, model: Option<&str>) -> u64 {
    let asked = ["max_completion_tokens", "max_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64));
    let choices = body.get("n").and_then(Value::as_u64).filter(|&n| n > 1).unwrap_or(1);
    let budget = match asked {
        Some(t) => t,
        None if is_embedding(body, model) => 0,
        None if body.contains_key("prompt") && !body.contains_key("messages") => DEFAULT_LEGACY_COMPLETION_TOKENS,
        None => DEFAULT_COMPLETION_TOKENS,
    };
    budget.saturating_mul(choices)
}

fn is_embedding(body: &Map<String, Value>, model: Option<&str>) -> bool {
    model.is_some_and(|m| m.contains("embed")) || body.contains_key("encoding_format") || body.contains_key("dimensions")
}

/// Characters of text, and tokens counted whole (token ids, attachments).
#[derive(Default)]
struct Count {
    chars: u64,
    tokens: u64,
}

impl Count {
    /// Counts `v`; `data`: it is the value of a key named `data` (base64 content).
    fn add(&mut self, v: &Value, data: bool) {
        match v {
            Value::String(s) if data || s.starts_with("data:") => self.tokens = self.tokens.saturating_add(ATTACHMENT_TOKENS),
            Value::String(s) => self.chars = self.chars.saturating_add(s.chars().count() as u64),
            Value::Number(n) if n.is_u64() => self.tokens = self.tokens.saturating_add(1),
            Value::Array(items) => items.iter().for_each(|item| self.add(item, false)),
            Value::Object(fields) => fields.iter().for_each(|(k, item)| self.add(item, k == "data")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Option<LlmRequest> {
        read_request(body.as_bytes())
    }

    #[test]
    fn each_api_s_body_is_read() {
        // OpenAI chat: the role and the content count (12 chars: 3 tokens), and the budget.
        let chat = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "abcdefgh"}], "max_completion_tokens": 50}"#;
        assert_eq!(read(chat), Some(LlmRequest { model: Some("gpt-4o".into()), tokens: 53 }));
        // Content parts, `n` choices, no budget: the default times n.
        let parts = r#"{"model": "m", "n": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": "abcd"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}"#;
        // "user" "text" "abcd" "image_url": 4 + 4 + 4 + 9 = 21 chars: 6 tokens; the image 1600.
        assert_eq!(read(parts).map(|r| r.tokens), Some(6 + 1600 + 2 * DEFAULT_COMPLETION_TOKENS));
        // Legacy completion: token ids count one each; the documented default budget.
        assert_eq!(read(r#"{"model": "davinci-002", "prompt": [1, 2, 3]}"#).map(|r| r.tokens), Some(3 + 16));
        // Responses: instructions and input, max_output_tokens.
        let responses = r#"{"model": "o3", "instructions": "abcd", "input": "efgh", "max_output_tokens": 10}"#;
        assert_eq!(read(responses).map(|r| r.tokens), Some(2 + 10));
        // Embeddings: no completion.
        let embed = r#"{"model": "text-embedding-3-small", "input": ["abcdefgh", "ij"]}"#;
        assert_eq!(read(embed).map(|r| r.tokens), Some(3));
        assert_eq!(read(r#"{"model": "x", "input": "abcd", "encoding_format": "float"}"#).map(|r| r.tokens), Some(1));
        // Anthropic: system blocks, a base64 image source, max_tokens.
        let anthropic = r#"{"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": [{"type": "text", "text": "abcd"}],
            "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]}]}"#;
        // "text" "abcd" "user" "image" "base64" "image/png": 4+4+4+5+6+9 = 32 chars: 8 tokens.
        assert_eq!(read(anthropic), Some(LlmRequest { model: Some("claude-sonnet-4-5".into()), tokens: 8 + 1600 + 1000 }));
    }

    #[test]
    fn anything_else_is_none_and_odd_fields_are_ignored() {
        for body in ["", "not json", "[]", "42", r#""messages""#, r#"{"model": "gpt-4o"}"#, "{\"messages\": [}"] {
            assert_eq!(read(body), None, "{body:?}");
        }
        // A model that is not a string, a budget that is not a whole number: ignored.
        let odd = r#"{"model": 4, "max_tokens": -1, "messages": [{"content": null, "x": 1.5, "y": true}]}"#;
        assert_eq!(read(odd), Some(LlmRequest { model: None, tokens: DEFAULT_COMPLETION_TOKENS }));
        // Characters, not bytes; a rounded-up sum over the whole prompt.
        assert_eq!(read(r#"{"prompt": "ééééé", "max_tokens": 0}"#).map(|r| r.tokens), Some(2));
        let huge = format!(r#"{{"messages": [], "max_tokens": {}, "n": 3}}"#, u64::MAX);
        assert_eq!(read(&huge).map(|r| r.tokens), Some(u64::MAX));
    }
}
