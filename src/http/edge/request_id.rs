//! The request id: echoed in the `x-request-id` header of every response and attached to every
//! log line of the request, so a 500 seen by a client can be found in the log.

use std::fmt;

use hyper::header::HeaderValue;
use hyper::HeaderMap;

/// The header carrying the id, both ways.
pub const HEADER: &str = "x-request-id";

/// A request id: the caller's when it is short and plain, else a fresh one.
#[derive(Debug, Clone)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The id for a request with these headers. A caller's id is kept only when it is at most 64
    /// characters of `[A-Za-z0-9._-]`, so nothing odd reaches the log.
    pub fn for_request(headers: &HeaderMap) -> Self {
        let given = headers.get(HEADER).filter(|value| {
            let bytes = value.as_bytes();
            !bytes.is_empty()
                && bytes.len() <= 64
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
        });
        match given {
            Some(value) => Self(value.clone()),
            None => {
                // A v4 UUID from the thread's generator: `Uuid::new_v4` asks the kernel for its
                // bytes, a system call on every request (seen in single uploads' profile).
                let fresh = uuid::Builder::from_random_bytes(rand::random())
                    .into_uuid()
                    .simple()
                    .to_string();
                Self(HeaderValue::try_from(fresh).unwrap_or(HeaderValue::from_static("unknown")))
            }
        }
    }

    /// The id as a header value.
    pub fn header_value(&self) -> HeaderValue {
        self.0.clone()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.to_str().unwrap_or("?"))
    }
}
