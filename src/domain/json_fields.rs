//! Reading fields out of a parsed JSON body while collecting every problem.
//!
//! Bodies are parsed by simd-json into a generic value first, not straight into structs: a
//! derive-based parser stops at the first fault, while clients deserve the whole list. A `null`
//! counts as absent, so `"location": null` is the same as leaving `location` out.

use simd_json::StaticNode;

use super::field_errors::{Code, FieldErrors, In};
use super::json_document::{Json, JsonArray, JsonDocument, JsonMap};

/// A JSON object of the body, with the dotted path that leads to it.
#[derive(Debug, Clone)]
pub struct JsonObject<'a> {
    map: JsonMap<'a>,
    path: Option<String>,
}

/// The name under which a problem with the whole body is reported.
pub const ROOT: &str = "$";

impl<'a> JsonObject<'a> {
    /// The body itself, which must be an object.
    pub fn root(document: &'a JsonDocument, errors: &mut FieldErrors) -> Option<Self> {
        match document.root() {
            Json::Object(map) => Some(Self { map, path: None }),
            other => {
                errors.push(
                    In::Body,
                    ROOT,
                    Code::Type,
                    format!("the body must be a JSON object, not {}", kind(&other)),
                );
                None
            }
        }
    }

    /// An element of the body (such as `readings[3]`), which must be an object; problems inside
    /// it are named after `path`.
    pub fn element(value: Json<'a>, path: String, errors: &mut FieldErrors) -> Option<Self> {
        match value {
            Json::Object(map) => Some(Self {
                map,
                path: Some(path),
            }),
            other => {
                let detail = format!("`{path}` must be an object, not {}", kind(&other));
                errors.push(In::Body, path, Code::Type, detail);
                None
            }
        }
    }

    /// A required array.
    pub fn required_array(&self, key: &str, errors: &mut FieldErrors) -> Option<JsonArray<'a>> {
        match self.present(key) {
            None => {
                self.missing(key, errors);
                None
            }
            Some(Json::Array(items)) => Some(items),
            Some(other) => {
                self.wrong_type(key, "an array", &other, errors);
                None
            }
        }
    }

    /// The dotted name of `key` inside this object.
    pub fn name(&self, key: &str) -> String {
        match &self.path {
            Some(path) => format!("{path}.{key}"),
            None => key.to_owned(),
        }
    }

    /// Whether `key` holds a value (not absent, not `null`).
    pub fn has(&self, key: &str) -> bool {
        self.present(key).is_some()
    }

    /// Whether `key` is in the object at all, `null` included (where `null` means something of
    /// its own, such as a patch's `"device_id": null`: every device).
    pub fn mentions(&self, key: &str) -> bool {
        self.map.get(key).is_some()
    }

    fn present(&self, key: &str) -> Option<Json<'a>> {
        self.map
            .get(key)
            .filter(|v| !matches!(v, Json::Static(StaticNode::Null)))
    }

    fn missing(&self, key: &str, errors: &mut FieldErrors) {
        errors.push(
            In::Body,
            self.name(key),
            Code::Required,
            format!("`{}` is required", self.name(key)),
        );
    }

    fn wrong_type(&self, key: &str, expected: &str, got: &Json<'_>, errors: &mut FieldErrors) {
        errors.push(
            In::Body,
            self.name(key),
            Code::Type,
            format!("`{}` must be {expected}, not {}", self.name(key), kind(got)),
        );
    }

    /// A required scalar.
    pub fn required<T: JsonScalar>(&self, key: &str, errors: &mut FieldErrors) -> Option<T> {
        match self.present(key) {
            None => {
                self.missing(key, errors);
                None
            }
            Some(value) => self.convert(key, value, errors),
        }
    }

    /// An optional scalar: `None` when absent (or null, or faulty, which is recorded).
    pub fn optional<T: JsonScalar>(&self, key: &str, errors: &mut FieldErrors) -> Option<T> {
        self.present(key)
            .and_then(|value| self.convert(key, value, errors))
    }

    fn convert<T: JsonScalar>(
        &self,
        key: &str,
        value: Json<'_>,
        errors: &mut FieldErrors,
    ) -> Option<T> {
        let converted = T::from_json(&value);
        if converted.is_none() {
            self.wrong_type(key, T::EXPECTED, &value, errors);
        }
        converted
    }

    /// A required string.
    pub fn required_str(&self, key: &str, errors: &mut FieldErrors) -> Option<&'a str> {
        match self.present(key) {
            None => {
                self.missing(key, errors);
                None
            }
            Some(value) => self.string(key, value, errors),
        }
    }

    /// An optional string.
    pub fn optional_str(&self, key: &str, errors: &mut FieldErrors) -> Option<&'a str> {
        self.present(key)
            .and_then(|value| self.string(key, value, errors))
    }

    fn string(&self, key: &str, value: Json<'a>, errors: &mut FieldErrors) -> Option<&'a str> {
        match value {
            Json::String(text) => Some(text),
            other => {
                self.wrong_type(key, "a string", &other, errors);
                None
            }
        }
    }

    /// A required nested object.
    pub fn required_object(&self, key: &str, errors: &mut FieldErrors) -> Option<Self> {
        match self.present(key) {
            None => {
                self.missing(key, errors);
                None
            }
            Some(value) => self.object(key, value, errors),
        }
    }

    /// An optional nested object.
    pub fn optional_object(&self, key: &str, errors: &mut FieldErrors) -> Option<Self> {
        self.present(key)
            .and_then(|value| self.object(key, value, errors))
    }

    fn object(&self, key: &str, value: Json<'a>, errors: &mut FieldErrors) -> Option<Self> {
        match value {
            Json::Object(map) => Some(Self {
                map,
                path: Some(self.name(key)),
            }),
            other => {
                self.wrong_type(key, "an object", &other, errors);
                None
            }
        }
    }
}

/// A JSON scalar that a field can hold.
pub trait JsonScalar: Sized {
    /// How the expected type reads in a problem detail ("a number").
    const EXPECTED: &'static str;
    /// The value, or `None` when the JSON value has another type.
    fn from_json(value: &Json<'_>) -> Option<Self>;
}

impl JsonScalar for bool {
    const EXPECTED: &'static str = "a boolean";
    fn from_json(value: &Json<'_>) -> Option<Self> {
        match value {
            Json::Static(StaticNode::Bool(b)) => Some(*b),
            _ => None,
        }
    }
}

impl JsonScalar for f64 {
    const EXPECTED: &'static str = "a finite number";
    fn from_json(value: &Json<'_>) -> Option<Self> {
        let number = match value {
            Json::Static(StaticNode::F64(f)) => *f,
            Json::Static(StaticNode::I64(i)) => *i as f64,
            Json::Static(StaticNode::U64(u)) => *u as f64,
            _ => return None,
        };
        number.is_finite().then_some(number)
    }
}

impl JsonScalar for i64 {
    const EXPECTED: &'static str = "an integer";
    /// Integers, and numbers without a fraction such as `42.0` (many JSON encoders write every
    /// number as a float). Values beyond the `i64` range are clamped to it, so the caller's
    /// bounds report them as `minimum`/`maximum`: every integer field has bounds.
    fn from_json(value: &Json<'_>) -> Option<Self> {
        match value {
            Json::Static(StaticNode::I64(i)) => Some(*i),
            Json::Static(StaticNode::U64(u)) => Some(i64::try_from(*u).unwrap_or(i64::MAX)),
            Json::Static(StaticNode::F64(f)) if f.is_finite() && f.fract() == 0.0 => {
                // `as` saturates at the i64 range.
                Some(*f as i64)
            }
            _ => None,
        }
    }
}

/// The JSON type of a value, for problem details.
fn kind(value: &Json<'_>) -> &'static str {
    match value {
        Json::Static(StaticNode::Null) => "null",
        Json::Static(StaticNode::Bool(_)) => "a boolean",
        Json::Static(StaticNode::F64(_)) => "a number with a fraction",
        Json::Static(_) => "an integer",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}
