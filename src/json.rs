//! JSON text -> [`Value`], refusing an object that names a key twice, at any depth. serde_json
//! keeps the last of duplicate keys, so `{"command":"view",…,"command":"create",…}` would run
//! a create that a reviewer of the text reads as a view; every face parses what it is sent
//! through here (the memory-stores API's typed bodies refuse duplicates through serde).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `text` as one JSON value, refusing duplicate keys (`duplicate key `k``, with serde's
/// line and column).
///
/// # Errors
/// The text is not JSON, or an object in it has a duplicate key.
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Unique>(text).map(|u| u.0)
}

struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize(d).map(|u| u.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let Unique(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_parse_as_serde_json_parses_them() {
        for text in [
            r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":"\u00e9"}"#,
            "[]",
            "18446744073709551615",
            "-9223372036854775808",
            "1e300",
            r#""""#,
        ] {
            let ours = parse(text.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        for text in [
            r#"{"command":"view","path":"/memories","command":"create"}"#,
            r#"{"input":{"a":1,"a":1}}"#,
            r#"[{"x":{"y":[{"k":1,"k":2}]}}]"#,
            r#"{"a":1,"\u0061":2}"#,
        ] {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.starts_with("duplicate key `"), "{text}: {e}");
        }
        assert_eq!(
            parse(br#"{"a":{"k":1},"b":{"k":1}}"#).unwrap(),
            json!({"a":{"k":1},"b":{"k":1}})
        );
    }

    #[test]
    fn not_json_is_refused_and_depth_is_bounded() {
        assert!(parse(b"{not json").is_err());
        assert!(parse(b"\"\xff\"").is_err());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(deep.as_bytes()).is_err());
    }
}
