//! Who may call a route, as each entry of the route table declares it, and what follows from
//! that alone: whether the public rate limit counts a request, and whether any web origin may
//! read the answer.
//!
//! Apart from the table ([`crate::http::router`]) because the CORS policy ([`crate::http::cors`])
//! reads the table, and the table needs the policy's any-origin rule (`OPTIONS` in `Allow`):
//! with the rule in either file the two would import each other, so both read it here.

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, from any web origin (CORS `*`, preflight answered).
    Public,
    /// An owner, with a bearer token (CORS only for the origins of `AIRQ_CORS_ORIGINS`).
    Owner,
    /// A device, with its `X-Device-ID` / `X-Device-Key`.
    Device,
    /// Anyone, for operators and tooling: health, readiness, metrics, the OpenAPI document.
    Service,
    /// Anyone, a page for people (HTML, [`crate::web`]): counted against the public rate limit
    /// like the public routes, but without CORS (a page is navigated to, not fetched by scripts
    /// of other sites).
    Page,
}

impl Access {
    /// The README's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public | Self::Service | Self::Page => "none",
            Self::Owner => "owner",
            Self::Device => "device",
        }
    }
}

/// Every path under this prefix is public, also one that matches no route (its 404 is readable
/// by widgets on any site too).
pub const PUBLIC_AREA: &str = "/api/v1/public/";

/// Paths outside the public area that any origin may read (and preflight): the OpenAPI document.
pub const ANY_ORIGIN_PATHS: &[&str] = &["/api/v1/openapi.json"];

/// Whether every origin may read a path of this access (and preflight it): the public area and
/// [`ANY_ORIGIN_PATHS`]. The router asks it while compiling its table (for `OPTIONS` in `Allow`),
/// the CORS policy ([`crate::http::cors`]) for every request.
pub fn any_origin(access: Option<Access>, path: &str) -> bool {
    access == Some(Access::Public) || ANY_ORIGIN_PATHS.contains(&path)
}
