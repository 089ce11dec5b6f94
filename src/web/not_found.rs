//! The pages' "not found" page, for a person who followed a link to a device that is not
//! public, or not there: a readable 404 with a way back to the map. Which clients get it and
//! which get the RFC 9457 problem instead is decided by its route (`crate::http::routes::pages`).
//! Unknown and private devices get the very same page, as on the public API routes.

use maud::{html, Markup};

use super::layout::{self, Chrome};

/// The page, saying `detail`.
pub fn render(detail: &str) -> Markup {
    layout::document(
        "Not found · airq",
        Chrome::Full,
        html! {},
        html! {
            div class="not-found" {
                h1 { "Not found" }
                p { (detail) "." }
                p { "A device shows here only while its owner publishes it. See the " a href="/map" { "live map" } " for the public ones." }
            }
        },
    )
}
