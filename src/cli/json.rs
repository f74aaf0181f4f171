//! Just enough JSON output for the tools' `--json` flags: objects of
//! numbers, strings, booleans and nulls. Written by hand to keep the
//! dependency list short; nothing here needs parsing.

use std::fmt::{self, Write};

pub enum Value {
    U64(u64),
    Bool(bool),
    Str(String),
    Null,
    Object(Object),
}

impl From<u64> for Value {
    fn from(value: u64) -> Self {
        Value::U64(value)
    }
}

impl From<u32> for Value {
    fn from(value: u32) -> Self {
        Value::U64(value as u64)
    }
}

impl From<u8> for Value {
    fn from(value: u8) -> Self {
        Value::U64(value as u64)
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Str(value.to_string())
    }
}

impl From<Object> for Value {
    fn from(value: Object) -> Self {
        Value::Object(value)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::Null, Into::into)
    }
}

/// Keys keep their insertion order.
#[derive(Default)]
pub struct Object {
    fields: Vec<(String, Value)>,
}

impl Object {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.push((key.to_string(), value.into()));
        self
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U64(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write_string(f, s),
            Value::Null => f.write_str("null"),
            Value::Object(object) => object.fmt(f),
        }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (index, (key, value)) in self.fields.iter().enumerate() {
            if index > 0 {
                f.write_char(',')?;
            }
            write_string(f, key)?;
            write!(f, ":{value}")?;
        }
        f.write_char('}')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_objects_and_escapes() {
        let inner = Object::new().field("n", 3u64).field("none", None::<u64>);
        let object = Object::new().field("s", "a\"b\\c\n").field("ok", true).field("inner", inner);
        assert_eq!(object.to_string(), r#"{"s":"a\"b\\c\u000a","ok":true,"inner":{"n":3,"none":null}}"#);
    }
}
