//! The contract check: is one HTTP answer of the server what its OpenAPI document says?
//!
//! Why: the document the server serves at `/api/v1/openapi.json` (source `src/http/openapi.json`)
//! is what clients read and generate code from, and nothing but a test keeps it true. Each test
//! asserts what it is about; this check asserts, for every answer any test receives, that the
//! document describes it. [`super::proxy`] relays every request of a [`super::TestApp`] and
//! hands each exchange to [`Contract::check`]; a drifting document fails the test that saw the
//! drift, on every backend pair.
//!
//! What one exchange must satisfy, all read from the document:
//! - **route**: the request path is matched against every `paths` key behind its server URL (the
//!   path item's `servers`, else the document's: `/api/v1` for the API, `/` for the service
//!   routes); `{param}` matches one non-empty segment, and a literal segment outranks a
//!   parameter. A path that matches no template must be answered as
//!   `components.responses.RouteNotFound` (404), a method that is not an operation of the
//!   matched path as `components.responses.MethodNotAllowed` (405).
//! - **status**: documented for the operation (the exact code, else `4XX`-style, else `default`).
//! - **headers**: every `required` header of that response is present, and every documented one
//!   validates against its schema (`Content-Type` is left to the content check, as OpenAPI says).
//! - **body**: none when the response documents no content, and never for `HEAD`, 204 or 304;
//!   otherwise the `Content-Type` (its media type without parameters) is one the response
//!   documents, and the body validates against that media type's schema: JSON bodies as JSON,
//!   `text/*` bodies as one JSON string. A `Content-Encoding: gzip` body is decompressed for the
//!   check only (the test still receives it compressed).
//!
//! Schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect; its own keywords such as `example`
//! are annotations) with `format` asserted, so `date-time`, `date` and `uuid` are checked too.
//! Each schema is compiled once per process (the served document is fetched once, see
//! `served_contract`), with the document's `components.schemas` embedded under the same pointer
//! so that `#/components/schemas/...` references resolve where they point.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex};

use hyper::header::{HeaderMap, CONTENT_ENCODING, CONTENT_TYPE};
use hyper::Method;
use jsonschema::{Draft, Validator};
use serde_json::{json, Value};

/// The keys of a path item that are operations.
const OPERATIONS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// At most this many schema errors are quoted per body.
const MAX_ERRORS: usize = 8;

/// At most this many characters of a failing body are quoted.
const MAX_QUOTE: usize = 600;

/// Where the schemas live that the others refer to.
const SCHEMAS: &str = "/components/schemas";

/// Where the document describes the answer to a path no template matches.
pub const ROUTE_NOT_FOUND: &str = "/components/responses/RouteNotFound";

/// Where the document describes the answer to a method a matched path does not accept.
pub const METHOD_NOT_ALLOWED: &str = "/components/responses/MethodNotAllowed";

/// One request and the answer the server gave it.
pub struct Exchange<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// The request target as sent: path and query.
    pub target: &'a str,
    /// The answer's status.
    pub status: u16,
    /// The answer's headers.
    pub headers: &'a HeaderMap,
    /// The answer's body, as received (still encoded).
    pub body: &'a [u8],
}

/// A path template of the document, as a full path (server URL included).
struct Template {
    /// The `paths` key.
    key: String,
    /// Its segments after the server URL; `None` is a `{parameter}`.
    segments: Vec<Option<String>>,
}

impl Template {
    /// Whether `segments` (a request path split at `/`) is this template, and how many literal
    /// segments it matched (the more, the more specific).
    fn matches(&self, segments: &[&str]) -> Option<usize> {
        if segments.len() != self.segments.len() {
            return None;
        }
        let mut literals = 0;
        for (expected, actual) in self.segments.iter().zip(segments) {
            match expected {
                Some(literal) if literal == actual => literals += 1,
                Some(_) => return None,
                None if actual.is_empty() => return None,
                None => {}
            }
        }
        Some(literals)
    }
}

/// The OpenAPI document, ready to check exchanges against.
pub struct Contract {
    document: Value,
    templates: Vec<Template>,
    /// Compiled schemas by the JSON pointer of the schema in the document.
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

impl Contract {
    /// Reads the document's path templates; schemas are compiled when first needed.
    pub fn new(document: Value) -> Result<Self, String> {
        let paths = document["paths"]
            .as_object()
            .ok_or("the document has no `paths` object")?;
        let default_server = server_path(&document["servers"]);
        let mut templates = Vec::new();
        for (key, item) in paths {
            let server = if item["servers"].is_array() {
                server_path(&item["servers"])
            } else {
                default_server.clone()
            };
            let full = format!("{}{key}", server.trim_end_matches('/'));
            let segments = full
                .trim_start_matches('/')
                .split('/')
                .map(|segment| {
                    let parameter = segment.starts_with('{') && segment.ends_with('}');
                    (!parameter).then(|| segment.to_owned())
                })
                .collect();
            templates.push(Template {
                key: key.clone(),
                segments,
            });
        }
        Ok(Self {
            document,
            templates,
            validators: Mutex::new(HashMap::new()),
        })
    }

    /// The document.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Everything about `exchange` that the document does not describe; empty when it conforms.
    pub fn check(&self, exchange: &Exchange<'_>) -> Vec<String> {
        let at = format!(
            "{} {} → {}",
            exchange.method, exchange.target, exchange.status
        );
        let (pointer, what) = match self.response_for(exchange) {
            Ok(found) => found,
            Err(violation) => return vec![format!("{at}: {violation}")],
        };
        let (pointer, response) = match self.dereference(&pointer) {
            Ok(found) => found,
            Err(violation) => return vec![format!("{at}: {what}: {violation}")],
        };
        let mut violations = Vec::new();
        self.check_headers(exchange, &pointer, response, &mut violations);
        self.check_body(exchange, &pointer, response, &mut violations);
        violations
            .into_iter()
            .map(|violation| format!("{at}: {what}: {violation}"))
            .collect()
    }

    /// The JSON pointer of the response object that describes the exchange, and a phrase naming
    /// it; or why there is none.
    fn response_for(&self, exchange: &Exchange<'_>) -> Result<(String, String), String> {
        let path = exchange
            .target
            .split_once('?')
            .map_or(exchange.target, |(path, _)| path);
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let template = self
            .templates
            .iter()
            .filter_map(|template| Some((template.matches(&segments)?, template)))
            .max_by_key(|(literals, _)| *literals)
            .map(|(_, template)| template);
        let Some(template) = template else {
            return self.fallback(exchange, ROUTE_NOT_FOUND, 404, "a path no template matches");
        };
        let item = &self.document["paths"][&template.key];
        // HEAD is answered on every GET route as GET without the body (RFC 9110, and the
        // document says so); it is not an operation of its own in the document.
        let method = if exchange.method == Method::HEAD && !item["get"].is_null() {
            "get".to_owned()
        } else {
            exchange.method.as_str().to_ascii_lowercase()
        };
        if !OPERATIONS.contains(&method.as_str()) || item[&method].is_null() {
            let reason = format!(
                "{} is not an operation of {}",
                exchange.method, template.key
            );
            return self.fallback(exchange, METHOD_NOT_ALLOWED, 405, &reason);
        }
        let responses = item[&method]["responses"].as_object().ok_or_else(|| {
            format!(
                "{} {} documents no responses",
                exchange.method, template.key
            )
        })?;
        let status = exchange.status.to_string();
        let range = format!("{}XX", exchange.status / 100);
        let key = [status.as_str(), range.as_str(), "default"]
            .into_iter()
            .find(|key| responses.contains_key(*key))
            .ok_or_else(|| {
                let documented: Vec<&String> = responses.keys().collect();
                format!(
                    "status {status} is not documented for {} {} (documented: {documented:?})",
                    exchange.method, template.key
                )
            })?;
        Ok((
            format!("/paths/{}/{method}/responses/{key}", escape(&template.key)),
            format!("{} {} {key}", exchange.method, template.key),
        ))
    }

    /// The answer the document gives for requests outside its operations.
    fn fallback(
        &self,
        exchange: &Exchange<'_>,
        pointer: &str,
        status: u16,
        reason: &str,
    ) -> Result<(String, String), String> {
        if self.document.pointer(pointer).is_none() {
            return Err(format!(
                "{reason}, and the document has no `#{pointer}` to describe the answer"
            ));
        }
        if exchange.status != status {
            return Err(format!(
                "{reason}: expected {status} as `#{pointer}`, got {}",
                exchange.status
            ));
        }
        Ok((pointer.to_owned(), format!("{reason} (`#{pointer}`)")))
    }

    /// Follows local `$ref`s from `pointer` to the node they end at, with its pointer.
    fn dereference(&self, pointer: &str) -> Result<(String, &Value), String> {
        let mut pointer = pointer.to_owned();
        for _ in 0..16 {
            let node = self
                .document
                .pointer(&pointer)
                .ok_or_else(|| format!("`#{pointer}` does not resolve"))?;
            match node.get("$ref").and_then(Value::as_str) {
                Some(reference) => {
                    pointer = reference
                        .strip_prefix('#')
                        .ok_or_else(|| format!("`{reference}` is not a local reference"))?
                        .to_owned();
                }
                None => return Ok((pointer, node)),
            }
        }
        Err(format!("`#{pointer}`: too many references in a row"))
    }

    /// Required headers present, documented headers valid.
    fn check_headers(
        &self,
        exchange: &Exchange<'_>,
        pointer: &str,
        response: &Value,
        violations: &mut Vec<String>,
    ) {
        let Some(headers) = response["headers"].as_object() else {
            return;
        };
        for name in headers.keys() {
            if name.eq_ignore_ascii_case("content-type") {
                continue;
            }
            let header_pointer = format!("{pointer}/headers/{}", escape(name));
            let (header_pointer, header) = match self.dereference(&header_pointer) {
                Ok(found) => found,
                Err(violation) => {
                    violations.push(format!("header {name}: {violation}"));
                    continue;
                }
            };
            let Some(value) = exchange.headers.get(name.as_str()) else {
                if header["required"] == true {
                    violations.push(format!("the required header {name} is missing"));
                }
                continue;
            };
            let Ok(value) = value.to_str() else {
                violations.push(format!("header {name} is not visible ASCII"));
                continue;
            };
            if header.get("schema").is_none() {
                continue;
            }
            let schema_pointer = format!("{header_pointer}/schema");
            let instance = match self.dereference(&schema_pointer) {
                Ok((_, schema)) => header_value(value, schema),
                Err(violation) => {
                    violations.push(format!("header {name}: {violation}"));
                    continue;
                }
            };
            for error in self.schema_errors(&schema_pointer, &instance) {
                violations.push(format!("header {name}: {value:?}: {error}"));
            }
        }
    }

    /// No body where none is documented; else a documented media type and a valid body.
    fn check_body(
        &self,
        exchange: &Exchange<'_>,
        pointer: &str,
        response: &Value,
        violations: &mut Vec<String>,
    ) {
        let bodiless = exchange.method == Method::HEAD || matches!(exchange.status, 204 | 304);
        let content = response["content"]
            .as_object()
            .filter(|map| !map.is_empty());
        let Some(content) = content.filter(|_| !bodiless) else {
            if !exchange.body.is_empty() {
                violations.push(format!(
                    "a body of {} bytes where the document describes none: {}",
                    exchange.body.len(),
                    quote(exchange.body)
                ));
            }
            return;
        };
        let Some(content_type) = exchange.headers.get(CONTENT_TYPE) else {
            violations.push(format!(
                "no Content-Type (documented: {:?})",
                content.keys().collect::<Vec<_>>()
            ));
            return;
        };
        let content_type = content_type.to_str().unwrap_or_default();
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let wildcard = format!("{}/*", essence.split('/').next().unwrap_or_default());
        let Some(media_key) = [essence.as_str(), wildcard.as_str(), "*/*"]
            .into_iter()
            .find_map(|key| content.keys().find(|documented| documented.as_str() == key))
        else {
            violations.push(format!(
                "Content-Type {content_type:?} is not documented (documented: {:?})",
                content.keys().collect::<Vec<_>>()
            ));
            return;
        };
        if content[media_key].get("schema").is_none() {
            return;
        }
        let body = match decode(exchange.headers, exchange.body) {
            Ok(body) => body,
            Err(violation) => {
                violations.push(violation);
                return;
            }
        };
        let instance = if essence == "application/json" || essence.ends_with("+json") {
            match serde_json::from_slice::<Value>(&body) {
                Ok(instance) => instance,
                Err(error) => {
                    violations.push(format!(
                        "the {essence} body is not JSON ({error}): {}",
                        quote(&body)
                    ));
                    return;
                }
            }
        } else if essence.starts_with("text/") {
            match String::from_utf8(body.clone()) {
                Ok(text) => Value::String(text),
                Err(_) => {
                    violations.push(format!("the {essence} body is not UTF-8"));
                    return;
                }
            }
        } else {
            // A binary media type: nothing a JSON Schema could say about it.
            return;
        };
        let schema_pointer = format!("{pointer}/content/{}/schema", escape(media_key));
        let errors = self.schema_errors(&schema_pointer, &instance);
        if !errors.is_empty() {
            violations.push(format!(
                "the body does not match `#{schema_pointer}`:\n    {}\n  body: {}",
                errors.join("\n    "),
                quote(&body)
            ));
        }
    }

    /// The schema errors of `instance` against the schema at `pointer` (a JSON pointer into
    /// the document; at most [`MAX_ERRORS`]), or why the schema cannot be used.
    pub fn schema_errors(&self, pointer: &str, instance: &Value) -> Vec<String> {
        let validator = match self.validator(pointer) {
            Ok(validator) => validator,
            Err(error) => return vec![error],
        };
        validator
            .iter_errors(instance)
            .take(MAX_ERRORS)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {error}")
            })
            .collect()
    }

    /// The compiled schema at `pointer`, compiled on first use. A schema that is only a `$ref`
    /// is the schema it names, so the many `{"$ref": "#/components/schemas/Problem"}` share one.
    fn validator(&self, pointer: &str) -> Result<Arc<Validator>, String> {
        let pointer = self.canonical(pointer)?;
        let mut validators = self
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(validator) = validators.get(&pointer) {
            return Ok(Arc::clone(validator));
        }
        // The root carries the document's `components.schemas` under the same pointer, so
        // every `#/components/schemas/...` reference resolves where it points (`components`
        // is no schema keyword: the validator ignores it except as a reference target).
        let node = self
            .document
            .pointer(&pointer)
            .ok_or_else(|| format!("`#{pointer}` does not resolve"))?;
        let mut root = if pointer.starts_with(SCHEMAS) || !node.is_object() {
            json!({ "$ref": fragment(&pointer) })
        } else {
            node.clone()
        };
        root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        root["components"] = json!({ "schemas": self.document.pointer(SCHEMAS).cloned() });
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .should_validate_formats(true)
            .build(&root)
            .map_err(|error| format!("the schema `#{pointer}` does not compile: {error}"))?;
        let validator = Arc::new(validator);
        validators.insert(pointer, Arc::clone(&validator));
        Ok(validator)
    }

    /// `pointer`, or while the schema there is nothing but a local `$ref`, the one it names.
    fn canonical(&self, pointer: &str) -> Result<String, String> {
        let mut pointer = pointer.to_owned();
        for _ in 0..16 {
            let node = self
                .document
                .pointer(&pointer)
                .ok_or_else(|| format!("`#{pointer}` does not resolve"))?;
            let only_ref = node.as_object().filter(|map| map.len() == 1);
            let Some(reference) = only_ref.and_then(|map| map.get("$ref")?.as_str()) else {
                return Ok(pointer);
            };
            pointer = reference
                .strip_prefix('#')
                .ok_or_else(|| format!("`{reference}` is not a local reference"))?
                .to_owned();
        }
        Err(format!("`#{pointer}`: too many references in a row"))
    }
}

/// The path of the first server URL of a `servers` array (`/` when there is none).
fn server_path(servers: &Value) -> String {
    let url = servers[0]["url"].as_str().unwrap_or("/");
    match url.split_once("://") {
        // An absolute URL: only its path counts.
        Some((_, rest)) => rest
            .find('/')
            .map_or_else(|| "/".to_owned(), |at| rest[at..].to_owned()),
        None => url.to_owned(),
    }
}

/// A JSON pointer token for `key` (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A JSON pointer as a URI fragment (`#...`), percent-encoding what a fragment cannot hold.
fn fragment(pointer: &str) -> String {
    let mut fragment = String::from("#");
    for byte in pointer.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            fragment.push(char::from(byte));
        } else {
            fragment.push_str(&format!("%{byte:02X}"));
        }
    }
    fragment
}

/// A header value as the JSON instance its schema describes: a number or boolean when the
/// schema says so and the text is one, else the text.
fn header_value(text: &str, schema: &Value) -> Value {
    let typed = matches!(
        schema["type"].as_str(),
        Some("integer" | "number" | "boolean")
    );
    if typed {
        if let Ok(value @ (Value::Number(_) | Value::Bool(_))) =
            serde_json::from_str::<Value>(text.trim())
        {
            return value;
        }
    }
    Value::String(text.to_owned())
}

/// The body without its `Content-Encoding`.
fn decode(headers: &HeaderMap, body: &[u8]) -> Result<Vec<u8>, String> {
    let encoding = headers.get(CONTENT_ENCODING).map(|value| {
        value
            .to_str()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    match encoding.as_deref() {
        None | Some("identity") => Ok(body.to_vec()),
        Some("gzip") => {
            let mut decoded = Vec::new();
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut decoded)
                .map_err(|error| format!("the gzip body does not decompress: {error}"))?;
            Ok(decoded)
        }
        Some(other) => Err(format!(
            "Content-Encoding {other:?}: the check cannot decode it"
        )),
    }
}

/// The start of a body, for a violation message.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match text.char_indices().nth(MAX_QUOTE) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], body.len()),
        None => text.into_owned(),
    }
}
