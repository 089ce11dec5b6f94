//! Device credentials: the public `device_id` and the secret `device_key`.
//!
//! A key carries 256 random bits and exists in clear only in the response that issues it. The
//! store keeps its blake3 hash; a presented key is hashed and compared in constant time
//! (`blake3::Hash`'s equality is constant-time), so timing says nothing about a stored hash.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::distributions::{Alphanumeric, DistString};
use rand::RngCore;

/// The public identifier a device sends as `X-Device-ID`: `dev_` and 24 base62 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceId(String);

impl DeviceId {
    const PREFIX: &'static str = "dev_";
    const RANDOM_LEN: usize = 24;

    /// A fresh random identifier.
    pub fn generate() -> Self {
        let random = Alphanumeric.sample_string(&mut rand::thread_rng(), Self::RANDOM_LEN);
        Self(format!("{}{random}", Self::PREFIX))
    }

    /// An identifier as presented by a client; `None` unless it has the exact shape.
    pub fn parse(text: &str) -> Option<Self> {
        let random = text.strip_prefix(Self::PREFIX)?;
        (random.len() == Self::RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| Self(text.to_owned()))
    }

    /// The identifier as sent and stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A secret device key, `sk_` and 43 base64url characters (256 bits). Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceKey(String);

impl DeviceKey {
    const PREFIX: &'static str = "sk_";

    /// A fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut bits = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bits);
        Self(format!("{}{}", Self::PREFIX, URL_SAFE_NO_PAD.encode(bits)))
    }

    /// The key in clear, for the one response that hands it out.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the store keeps instead of the key.
    pub fn hash(&self) -> KeyHash {
        KeyHash::of(&self.0)
    }
}

impl fmt::Debug for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceKey(<redacted>)")
    }
}

/// The blake3 hash of a device key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHash(blake3::Hash);

impl KeyHash {
    /// The hash of a presented key (any text: a malformed key simply never matches).
    pub fn of(presented: &str) -> Self {
        Self(blake3::hash(presented.as_bytes()))
    }

    /// A hash as stored.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(blake3::Hash::from_bytes(bytes))
    }

    /// The bytes to store.
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    /// Whether `presented` is the key this hash was made from; constant time in the hash.
    pub fn verifies(&self, presented: &str) -> bool {
        self.0 == blake3::hash(presented.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_credentials_have_the_documented_shape() {
        let id = DeviceId::generate();
        assert_eq!(DeviceId::parse(id.as_str()), Some(id.clone()));
        assert_eq!(id.as_str().len(), 28);
        let key = DeviceKey::generate();
        assert!(key.expose().starts_with("sk_"));
        assert_eq!(key.expose().len(), 46);
        assert!(key.hash().verifies(key.expose()));
        assert!(!key.hash().verifies(DeviceKey::generate().expose()));
        assert!(!format!("{key:?}").contains(key.expose()));
    }

    #[test]
    fn device_ids_of_another_shape_are_refused() {
        assert_eq!(DeviceId::parse("dev_short"), None);
        assert_eq!(DeviceId::parse("key_abcdefghijklmnopqrstuvwx"), None);
        assert_eq!(DeviceId::parse("dev_abcdefghijklmnopqrstuv-x"), None);
    }
}
