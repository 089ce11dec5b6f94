//! Column lists derived from the one list of measured values ([`Measure::ALL`]): no backend
//! spells a value's name, so adding a value changes every statement at once (the schema files
//! add its columns).

use crate::domain::Measure;

/// `f(name)` for every measured value, in list order, joined with `, `.
pub(crate) fn each(f: impl Fn(&'static str) -> String) -> String {
    Measure::ALL
        .iter()
        .map(|measure| f(measure.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `?first, ?first+1, …`: `count` numbered SQLite placeholders.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|index| format!("?{index}"))
        .collect::<Vec<_>>()
        .join(", ")
}
