//! A serde `Deserializer` over a JSON value that reads a struct only from a mapping.
//!
//! serde's derived visitors also accept a list for a struct, filling the fields by position,
//! and `serde_json::Value` offers one: a Rollout's `strategy` written as a list became two
//! strategies. A CRD's structural schema refuses it (`spec.strategy in body must be of type
//! object`), so this deserializer does too, at every depth. Everything else reads as
//! `serde_json`'s own value deserializer reads it, with the same messages.
//!
//! What serde buffers itself (untagged enums, `#[serde(flatten)]`) is read by serde's
//! deserializer, not this one; canarysim's typed views use neither for a struct.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Error, Map, Value};

/// Deserializes from `value`, refusing a list wherever a struct is expected.
#[derive(Clone, Copy)]
pub struct StructsAsMaps<'a>(pub &'a Value);

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (None, Some(i), _) => Unexpected::Signed(i),
            (None, None, Some(f)) => Unexpected::Float(f),
            _ => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl<'de> de::Deserializer<'de> for StructsAsMaps<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visit_list(items, visitor),
            Value::Object(map) => visit_mapping(map, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visit_mapping(map, visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(Variant {
                name: variant,
                value: None,
            }),
            Value::Object(map) => {
                let mut entries = map.iter();
                match (entries.next(), entries.next()) {
                    (Some((variant, value)), None) => visitor.visit_enum(Variant {
                        name: variant,
                        value: Some(value),
                    }),
                    _ => Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    )),
                }
            }
            other => Err(de::Error::invalid_type(unexpected(other), &"string or map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier
    }
}

/// serde_json's check: a visitor that stops early has not read the whole list.
fn visit_list<'de, V: Visitor<'de>>(items: &'de [Value], visitor: V) -> Result<V::Value, Error> {
    let mut seq = Items(items.iter());
    let value = visitor.visit_seq(&mut seq)?;
    match seq.0.len() {
        0 => Ok(value),
        _ => Err(de::Error::invalid_length(
            items.len(),
            &"fewer elements in array",
        )),
    }
}

fn visit_mapping<'de, V: Visitor<'de>>(
    map: &'de Map<String, Value>,
    visitor: V,
) -> Result<V::Value, Error> {
    let mut entries = Entries {
        entries: map.iter(),
        value: None,
    };
    let value = visitor.visit_map(&mut entries)?;
    match entries.entries.len() {
        0 => Ok(value),
        _ => Err(de::Error::invalid_length(
            map.len(),
            &"fewer elements in map",
        )),
    }
}

struct Items<'de>(std::slice::Iter<'de, Value>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|item| seed.deserialize(StructsAsMaps(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'de> {
    entries: serde_json::map::Iter<'de>,
    value: Option<&'de Value>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(BorrowedStrDeserializer::<Error>::new(key))
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(StructsAsMaps(value)),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An enum written as `"Variant"` or `{Variant: value}`.
struct Variant<'de> {
    name: &'de str,
    value: Option<&'de Value>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self), Error> {
        let name = BorrowedStrDeserializer::<Error>::new(self.name);
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            None => Ok(()),
            Some(value) => serde::Deserialize::deserialize(StructsAsMaps(value)),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(value) => seed.deserialize(StructsAsMaps(value)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(Value::Array(items)) => visit_list(items, visitor),
            Some(other) => Err(de::Error::invalid_type(unexpected(other), &"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Some(Value::Object(map)) => visit_mapping(map, visitor),
            Some(other) => Err(de::Error::invalid_type(
                unexpected(other),
                &"struct variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        replicas: Option<u32>,
        strategy: Option<Strategy>,
        #[serde(default)]
        steps: Vec<Step>,
        extra: Option<Value>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Strategy {
        canary: Option<Value>,
        #[serde(rename = "blueGreen")]
        blue_green: Option<Value>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    enum Step {
        SetWeight(i32),
        Pause { duration: Option<String> },
        Promote,
    }

    fn read(value: Value) -> Result<Spec, String> {
        Spec::deserialize(StructsAsMaps(&value)).map_err(|e| e.to_string())
    }

    fn read_as_serde_json_does(value: Value) -> Result<Spec, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn a_list_where_a_struct_is_expected_is_refused_at_any_depth() {
        let listed = json!({"strategy": [{"canary": {}}, {"blueGreen": {}}]});
        // serde_json fills the struct's fields by position; the API server refuses it.
        assert!(read_as_serde_json_does(listed.clone()).is_ok());
        let e = read(listed).unwrap_err();
        assert!(
            e.contains("invalid type: sequence, expected struct Strategy"),
            "{e}"
        );
        let e = read(json!({"steps": [{"pause": ["1m"]}]})).unwrap_err();
        assert!(
            e.contains("invalid type: sequence, expected struct variant"),
            "{e}"
        );
        assert!(read(json!([1, null])).is_err());
    }

    #[test]
    fn everything_else_reads_as_serde_json_reads_it_with_its_messages() {
        let cases = [
            json!({"replicas": 3, "strategy": {"canary": {"steps": []}},
                   "steps": [{"setWeight": 20}, {"pause": {}}, {"pause": {"duration": "1m"}},
                             "promote"],
                   "extra": {"any": [1, "two", null, {"x": 1.5}]}}),
            json!({"replicas": null, "strategy": null, "unknown": [1, 2]}),
            json!({"replicas": -1}),
            json!({"replicas": 4_294_967_296_u64}),
            json!({"replicas": 1.5}),
            json!({"replicas": "two"}),
            json!({"steps": "setWeight"}),
            json!({"steps": [{"setWeight": 1, "pause": {}}]}),
            json!({"steps": [{"nonsense": 1}]}),
            json!({"steps": [7]}),
            json!({"steps": [{"pause": "1m"}]}),
            json!({"steps": [{"promote": 1}]}),
            json!({"strategy": "canary"}),
            json!({"strategy": null, "replicas": true}),
            json!("text"),
            json!(null),
        ];
        for case in cases {
            assert_eq!(
                read(case.clone()),
                read_as_serde_json_does(case.clone()),
                "{case}"
            );
        }
    }
}
