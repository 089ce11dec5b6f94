//! What every page shares: the document skeleton, the style sheet, the header and footer
//! ("chrome", left out of embedded pages), and the media type of every page (the response that
//! carries one is made by its route, `crate::http::routes::pages`).

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::domain::AqiCategory;

/// The media type of every page.
pub const HTML: &str = "text/html; charset=utf-8";

/// The style sheet of every page (small enough to inline: one request less per page).
const STYLE: &str = include_str!("style.css");

/// Whether a page is shown whole or embedded in another site's frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chrome {
    /// With the site's header and footer.
    Full,
    /// Without them, for an `<iframe>`: links open in a new tab.
    Embedded,
}

impl Chrome {
    /// `embed=1` (or `true`) in the query asks for the embedded form.
    pub fn from_query(query: Option<&str>) -> Self {
        let embedded = query.is_some_and(|query| {
            form_urlencoded::parse(query.as_bytes())
                .any(|(name, value)| name == "embed" && (value == "1" || value == "true"))
        });
        if embedded {
            Self::Embedded
        } else {
            Self::Full
        }
    }
}

/// A whole HTML document: `head` goes into `<head>` after the shared parts, `body` between the
/// header and the footer (or alone, embedded).
pub fn document(title: &str, chrome: Chrome, head: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
                (head)
            }
            body class=(match chrome { Chrome::Full => "full", Chrome::Embedded => "embedded" }) {
                @if chrome == Chrome::Full {
                    header class="site" {
                        a class="brand" href="/map" { "airq" }
                        nav { a href="/map" { "Live map" } }
                    }
                }
                main { (body) }
                @if chrome == Chrome::Full {
                    footer class="site" {
                        "Data from public airq sensors. The "
                        a href="/api/v1/openapi.json" { "API" }
                        " serves the same data as JSON, GeoJSON and CSV."
                    }
                }
            }
        }
    }
}

/// A coloured AQI value: the number on its category's colour, with the category's name.
pub fn aqi_chip(aqi: i64) -> Markup {
    let category = AqiCategory::of(aqi);
    html! {
        span class="aqi-chip" data-aqi=(aqi) data-category=(category.name())
            style={ "background:" (category.colour()) ";color:" (category.text_colour()) } {
            span class="aqi-value" { (aqi) }
            " "
            span class="aqi-name" { (category.name()) }
        }
    }
}

/// The grey of a value that is not current air quality (an offline device's last means, a
/// badge without data): no category colour, so nobody reads it as the air now.
pub const NOT_CURRENT: &str = "#9f9f9f";

/// An offline device's last AQI: the number in grey, marked "offline" instead of its category,
/// like its badge ([`super::badge`]).
pub fn offline_aqi_chip(aqi: i64) -> Markup {
    html! {
        span class="aqi-chip offline" data-aqi=(aqi) data-status="offline"
            style={ "background:" (NOT_CURRENT) ";color:#fff" } {
            span class="aqi-value" { (aqi) }
            " "
            span class="aqi-name" { "offline" }
        }
    }
}

/// The legend of the AQI colours, one item per category. The map's script reads its bands and
/// colours from these items, so the page and the script cannot disagree.
pub fn legend() -> Markup {
    html! {
        div id="legend" class="legend" {
            strong { "US AQI" }
            ul {
                @for category in AqiCategory::ALL {
                    li data-lowest=(category.lowest()) data-colour=(category.colour())
                        data-name=(category.name()) {
                        span class="swatch" style={ "background:" (category.colour()) } {}
                        span class="range" {
                            (category.lowest())
                            @match category.highest() {
                                Some(highest) => { "–" (highest) }
                                None => { "+" }
                            }
                        }
                        " " (category.name())
                    }
                }
                li data-offline data-colour=(NOT_CURRENT) {
                    span class="swatch" style={ "background:" (NOT_CURRENT) } {}
                    span class="range" {}
                    " offline (nothing for 20 minutes)"
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embed_is_asked_for_by_the_query() {
        assert_eq!(Chrome::from_query(None), Chrome::Full);
        assert_eq!(Chrome::from_query(Some("embed=1")), Chrome::Embedded);
        assert_eq!(Chrome::from_query(Some("x=2&embed=true")), Chrome::Embedded);
        assert_eq!(Chrome::from_query(Some("embed=0")), Chrome::Full);
    }

    #[test]
    fn the_embedded_page_has_no_chrome() {
        let full = document("t", Chrome::Full, html! {}, html! { p { "x" } }).into_string();
        let embedded = document("t", Chrome::Embedded, html! {}, html! { p { "x" } }).into_string();
        assert!(full.contains("<header") && full.contains("<footer"));
        assert!(!embedded.contains("<header") && !embedded.contains("<footer"));
    }

    #[test]
    fn the_legend_lists_every_category_with_its_colour() {
        let legend = legend().into_string();
        for category in AqiCategory::ALL {
            assert!(legend.contains(category.colour()), "{category:?}");
        }
        assert!(legend.contains("0–50"));
        assert!(legend.contains("301+"));
        assert!(legend.contains(NOT_CURRENT) && legend.contains("offline"));
    }
}
