//! The one JSON writer: every tool's `--json` output (`hhc torture`, `bench`,
//! `log inspect`, `recover`, `mttdl`, `simulate`'s results.json) and, through
//! `string`/`write_string`, the SPDK module's answers. Values are built in
//! order and written compactly; object keys keep their insertion order, so
//! output is stable. Nothing here needs parsing, so nothing here parses.
//!
//! Strings are escaped as RFC 8259 requires: the quote, the backslash and
//! every control character below U+0020 (`\b \f \n \r \t` by name, the rest
//! as `\u00XX`). Only `core::fmt` and `String` are used, so any module can
//! write through it.

use std::fmt::{self, Write};

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    U64(u64),
    /// A measured figure: integral values below 10^15 as integers, others
    /// with four decimals; NaN and infinities (a missing figure) as null.
    Number(f64),
    /// A quantity spanning many decades, in exponent notation (`1.2e6`);
    /// NaN and infinities as null.
    Exp(f64),
    Text(String),
    Array(Vec<Json>),
    Object(Object),
}

/// A JSON object; keys keep their insertion order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object {
    fields: Vec<(String, Json)>,
}

impl Object {
    pub fn new() -> Object {
        Object::default()
    }

    /// The object with one more field.
    pub fn field(mut self, key: &str, value: impl Into<Json>) -> Object {
        self.push(key, value);
        self
    }

    pub fn push(&mut self, key: &str, value: impl Into<Json>) {
        self.fields.push((key.to_string(), value.into()));
    }
}

impl Json {
    pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(Object { fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect() })
    }

    pub fn text(value: impl Into<String>) -> Json {
        Json::Text(value.into())
    }

    pub fn encode(&self) -> String {
        self.to_string()
    }
}

/// `text` as a JSON string literal, quotes included.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    let _ = write_string(&mut out, text);
    out
}

/// Writes `text` as a JSON string literal, quotes included.
pub fn write_string(out: &mut impl Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            '\u{8}' => out.write_str("\\b")?,
            '\u{c}' => out.write_str("\\f")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::U64(n) => write!(f, "{n}"),
            Json::Number(n) | Json::Exp(n) if !n.is_finite() => f.write_str("null"),
            Json::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => write!(f, "{}", *n as i64),
            Json::Number(n) => write!(f, "{n:.4}"),
            Json::Exp(n) => write!(f, "{n:e}"),
            Json::Text(s) => write_string(f, s),
            Json::Array(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Object(object) => object.fmt(f),
        }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            write_string(f, key)?;
            write!(f, ":{value}")?;
        }
        f.write_char('}')
    }
}

impl From<u64> for Json {
    fn from(value: u64) -> Json {
        Json::U64(value)
    }
}

impl From<u32> for Json {
    fn from(value: u32) -> Json {
        Json::U64(value as u64)
    }
}

impl From<u8> for Json {
    fn from(value: u8) -> Json {
        Json::U64(value as u64)
    }
}

impl From<bool> for Json {
    fn from(value: bool) -> Json {
        Json::Bool(value)
    }
}

impl From<&str> for Json {
    fn from(value: &str) -> Json {
        Json::Text(value.to_string())
    }
}

impl From<String> for Json {
    fn from(value: String) -> Json {
        Json::Text(value)
    }
}

impl From<Object> for Json {
    fn from(value: Object) -> Json {
        Json::Object(value)
    }
}

impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(value: Option<T>) -> Json {
        value.map_or(Json::Null, Into::into)
    }
}

impl<T: Into<Json>> From<Vec<T>> for Json {
    fn from(items: Vec<T>) -> Json {
        Json::Array(items.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_character_is_escaped_and_parses_back() {
        let text: String = (0u8..0x20).map(char::from).chain("\"\\/é\u{7f}".chars()).collect();
        let encoded = string(&text);
        assert!(encoded[1..encoded.len() - 1].chars().all(|c| c as u32 >= 0x20), "{encoded}");
        assert!(encoded.contains("\\n") && encoded.contains("\\t") && encoded.contains("\\u0001") && encoded.contains("\\b"));
        let parsed: serde_json::Value = serde_json::from_str(&encoded).expect("valid JSON");
        assert_eq!(parsed, serde_json::Value::String(text));
    }

    #[test]
    fn writes_nested_values_compactly_in_insertion_order() {
        let inner = Object::new().field("n", 3u64).field("none", None::<u64>);
        let value = Json::object([
            ("s", Json::text("a\"b\n")),
            ("ok", Json::Bool(true)),
            ("inner", inner.into()),
            ("x", Json::Number(0.125)),
            ("whole", Json::Number(3.0)),
            ("bad", Json::Number(f64::NAN)),
            ("big", Json::Exp(1.2e6)),
            ("list", Json::from(vec![1u64, 2])),
        ]);
        let expected = r#"{"s":"a\"b\n","ok":true,"inner":{"n":3,"none":null},"x":0.1250,"whole":3,"bad":null,"big":1.2e6,"list":[1,2]}"#;
        assert_eq!(value.encode(), expected);
        assert!(serde_json::from_str::<serde_json::Value>(expected).is_ok());
    }
}
