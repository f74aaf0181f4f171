//! A small JSON text writer for the answers the module gives SPDK
//! (`dump_info_json`, `write_config_json`, RPC results), which the C shim
//! hands to `spdk_json_write_val_raw`.

use std::fmt::Write;

/// Builds one JSON object, field by field.
pub struct JsonObject {
    text: String,
    empty: bool,
}

impl Default for JsonObject {
    fn default() -> Self {
        JsonObject::new()
    }
}

impl JsonObject {
    pub fn new() -> JsonObject {
        JsonObject { text: String::from("{"), empty: true }
    }

    fn key(&mut self, key: &str) {
        if !self.empty {
            self.text.push(',');
        }
        self.empty = false;
        push_string(&mut self.text, key);
        self.text.push(':');
    }

    pub fn string(mut self, key: &str, value: &str) -> JsonObject {
        self.key(key);
        push_string(&mut self.text, value);
        self
    }

    pub fn number(mut self, key: &str, value: u64) -> JsonObject {
        self.key(key);
        let _ = write!(self.text, "{value}");
        self
    }

    pub fn boolean(mut self, key: &str, value: bool) -> JsonObject {
        self.key(key);
        self.text.push_str(if value { "true" } else { "false" });
        self
    }

    /// `value` must already be valid JSON text.
    pub fn raw(mut self, key: &str, value: &str) -> JsonObject {
        self.key(key);
        self.text.push_str(value);
        self
    }

    pub fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

/// A JSON array of already encoded values.
pub fn array<I: IntoIterator<Item = String>>(values: I) -> String {
    let items: Vec<String> = values.into_iter().collect();
    format!("[{}]", items.join(","))
}

/// A JSON string literal (the crate's one escaper, `crate::json`).
pub use crate::json::string;

fn push_string(out: &mut String, value: &str) {
    let _ = crate::json::write_string(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_parse_back_with_every_field() {
        let inner = JsonObject::new().number("n", 7).finish();
        let text = JsonObject::new()
            .string("name", "a\"b\\c\n\u{1}")
            .number("size", u64::MAX)
            .boolean("ok", false)
            .raw("inner", &inner)
            .raw("list", &array([string("x"), string("y")]))
            .finish();
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value["name"], "a\"b\\c\n\u{1}");
        assert_eq!(value["size"], u64::MAX);
        assert_eq!(value["ok"], false);
        assert_eq!(value["inner"]["n"], 7);
        assert_eq!(value["list"][1], "y");
        assert_eq!(JsonObject::new().finish(), "{}");
    }
}
