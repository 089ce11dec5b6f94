//! The owner of devices: the verified `sub` of a bearer token.

use std::fmt;

/// An owner: the auth layer makes one from a verified token, the CLI one for a token it mints.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerId(String);

impl OwnerId {
    /// Longest `sub` accepted.
    pub const MAX_LEN: usize = 255;

    /// An owner from a token's `sub`; `None` when it is empty, too long, or holds control
    /// characters (which some stores cannot even hold: PostgreSQL text refuses NUL).
    pub fn parse(sub: &str) -> Option<Self> {
        (!sub.is_empty() && sub.len() <= Self::MAX_LEN && !sub.chars().any(char::is_control))
            .then(|| Self(sub.to_owned()))
    }

    /// The identifier as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
