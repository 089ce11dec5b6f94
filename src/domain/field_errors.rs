//! Per-field problems, as listed in a 422 problem's `errors` array.

use serde::Serialize;

/// The stable problem codes of `errors[].code` (`docs/api.md`, "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// A required field or parameter is missing (or null).
    Required,
    /// The value has the wrong JSON type.
    Type,
    /// The value is below its lower bound.
    Minimum,
    /// The value is above its upper bound.
    Maximum,
    /// The string is shorter than allowed.
    MinLength,
    /// The string is longer than allowed.
    MaxLength,
    /// The string does not have the required format.
    Format,
    /// The value is not one of the allowed values.
    Enum,
    /// Two values are inconsistent with each other (a range that ends before it starts).
    Range,
}

/// Where the faulty value was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum In {
    /// The JSON request body.
    Body,
    /// The query string.
    Query,
    /// A path segment.
    Path,
}

/// One field problem.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// The stable code.
    pub code: Code,
    /// A sentence for humans.
    pub detail: String,
    /// Where the value was.
    #[serde(rename = "in")]
    pub location: In,
    /// Dotted field name (`pms_data.pm2_5`) or parameter name.
    pub name: String,
}

/// Every field problem of one request, collected before answering.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldErrors(Vec<FieldError>);

impl FieldErrors {
    /// No problems yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A list holding one problem.
    pub fn single(
        location: In,
        name: impl Into<String>,
        code: Code,
        detail: impl Into<String>,
    ) -> Self {
        let mut errors = Self::new();
        errors.push(location, name, code, detail);
        errors
    }

    /// Records a problem.
    pub fn push(
        &mut self,
        location: In,
        name: impl Into<String>,
        code: Code,
        detail: impl Into<String>,
    ) {
        self.0.push(FieldError {
            code,
            detail: detail.into(),
            location,
            name: name.into(),
        });
    }

    /// Takes over the problems of another list.
    pub fn extend(&mut self, other: FieldErrors) {
        self.0.extend(other.0);
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order they were found.
    pub fn as_slice(&self) -> &[FieldError] {
        &self.0
    }

    /// `Ok(value)` when nothing was recorded, else the problems.
    pub fn into_result<T>(self, value: impl FnOnce() -> T) -> Result<T, FieldErrors> {
        if self.is_empty() {
            Ok(value())
        } else {
            Err(self)
        }
    }
}

/// Both values, or the problems of both: path and query faults are reported together.
pub fn both<A, B>(
    a: Result<A, FieldErrors>,
    b: Result<B, FieldErrors>,
) -> Result<(A, B), FieldErrors> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (a, b) => {
            let mut errors = FieldErrors::new();
            if let Err(more) = a {
                errors.extend(more);
            }
            if let Err(more) = b {
                errors.extend(more);
            }
            Err(errors)
        }
    }
}
