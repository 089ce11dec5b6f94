//! The service's request limits, by name: what a 429 says refused it and what `/metrics` counts,
//! apart from how the limiter (`src/http/rate_limit.rs`) keeps them.

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Uploads per device.
    Device,
    /// Public requests per client address.
    Public,
}

impl Limit {
    /// Every limit, in the order `/metrics` lists them.
    pub const ALL: [Self; 2] = [Self::Device, Self::Public];

    /// Its label on `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Device => "device",
            Self::Public => "public",
        }
    }
}
