//! A minimal JSON writer: the workload must stay std-only, and its output is a handful of flat
//! objects whose key order (`event` first) matters to readers.

use std::fmt::Write;

/// A JSON value to be written.
#[derive(Clone)]
pub enum Value {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(String),
    Obj(Obj),
    Arr(Vec<Value>),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::I64(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::U64(v.into())
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::U64(v as u64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<Obj> for Value {
    fn from(v: Obj) -> Self {
        Value::Obj(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A JSON object whose keys keep the order they were added in.
#[derive(Clone, Default)]
pub struct Obj(Vec<(&'static str, Value)>);

impl Obj {
    pub fn new() -> Self {
        Obj(Vec::new())
    }

    /// Adds a key (builder style).
    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.0.push((key, value.into()));
        self
    }

    /// Adds a key to an object being filled in place.
    pub fn put(&mut self, key: &'static str, value: impl Into<Value>) {
        self.0.push((key, value.into()));
    }

    /// The object as one line of JSON.
    pub fn to_line(&self) -> String {
        let mut out = String::with_capacity(256);
        write_obj(&mut out, self);
        out
    }
}

fn write_obj(out: &mut String, obj: &Obj) {
    out.push('{');
    for (i, (key, value)) in obj.0.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, key);
        out.push(':');
        write_value(out, value);
    }
    out.push('}');
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::U64(v) => {
            let _ = write!(out, "{v}");
        }
        Value::I64(v) => {
            let _ = write!(out, "{v}");
        }
        // JSON has no NaN or infinity: they become null rather than invalid output.
        Value::F64(v) if !v.is_finite() => out.push_str("null"),
        Value::F64(v) => {
            let _ = write!(out, "{v}");
        }
        Value::Str(s) => write_str(out, s),
        Value::Obj(o) => write_obj(out, o),
        Value::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_ordered_escaped_objects() {
        let line = Obj::new()
            .with("event", "start")
            .with("n", 3u64)
            .with("neg", -1i64)
            .with("f", 1.5f64)
            .with("nan", f64::NAN)
            .with("none", Option::<u64>::None)
            .with("s", "a\"b\\c\n\u{1}")
            .with("inner", Obj::new().with("ok", true))
            .with("list", Value::Arr(vec![Value::U64(1), Value::Null]))
            .to_line();
        assert_eq!(
            line,
            r#"{"event":"start","n":3,"neg":-1,"f":1.5,"nan":null,"none":null,"s":"a\"b\\c\n\u0001","inner":{"ok":true},"list":[1,null]}"#
        );
    }

    #[test]
    fn large_floats_have_no_exponent() {
        let line = Obj::new().with("v", 1e21f64).to_line();
        assert_eq!(line, r#"{"v":1000000000000000000000}"#);
    }
}
