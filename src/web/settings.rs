//! Where the pages' map comes from: the map library (Leaflet) and the tile server, both settings
//! with working defaults, so `cargo run` serves a working map.
//!
//! The library is pinned (Leaflet 1.9.4), served by the binary itself by default
//! ([`super::assets`], so the map needs no third party but the tiles) and loaded with subresource
//! integrity, so a CDN configured instead that served other bytes would be refused by the
//! browser. The integrity values are those of the files in the `leaflet@1.9.4` npm package (the
//! browser test checks them against it, another test against the served files). An operator who
//! hosts the library elsewhere points the URL there (`https://unpkg.com/leaflet@1.9.4/dist/`, the
//! default before); one who changes the version sets the integrity values too, or empties them
//! to load without a check.

use std::fmt;

/// Leaflet's `dist/` folder as this server serves it ([`super::assets::LEAFLET_PATH`]).
pub const DEFAULT_LIBRARY_URL: &str = super::assets::LEAFLET_PATH;
/// The integrity of `leaflet.js` in `leaflet@1.9.4`.
pub const DEFAULT_SCRIPT_INTEGRITY: &str =
    "sha384-cxOPjt7s7Iz04uaHJceBmS+qpjv2JkIHNVcuOrM+YHwZOmJGBXI00mdUXEq65HTH";
/// The integrity of `leaflet.css` in `leaflet@1.9.4`.
pub const DEFAULT_STYLE_INTEGRITY: &str =
    "sha384-sHL9NAb7lN7rfvG5lfHpm643Xkcjzp4jFvuavGOndn6pjVqS6ny56CAt3nsEVT4H";
/// OpenStreetMap's standard tiles.
pub const DEFAULT_TILE_URL: &str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";
/// The credit OpenStreetMap's tile policy asks for.
pub const DEFAULT_TILE_ATTRIBUTION: &str =
    "&copy; <a href=\"https://www.openstreetmap.org/copyright\">OpenStreetMap</a> contributors";

/// An absolute `http(s)://` URL or a path on this server (`/static/...`), without quotes or
/// angle brackets (it ends up in HTML attributes and in requests the browser makes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebUrl(String);

impl WebUrl {
    /// Parses a URL the browser is to load.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let scheme_ok = text.starts_with("https://")
            || text.starts_with("http://")
            || (text.starts_with('/') && !text.starts_with("//"));
        if !scheme_ok {
            return Err(format!(
                "`{text}` is not an http(s):// URL or a path starting with /"
            ));
        }
        if text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>'))
        {
            return Err(format!(
                "`{text}` contains spaces, quotes or angle brackets"
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WebUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The map library's folder: a [`WebUrl`] that ends with `/` (`leaflet.js` and `leaflet.css`
/// are taken from it).
pub fn parse_library_url(text: &str) -> Result<WebUrl, String> {
    let url = WebUrl::parse(text)?;
    if !url.0.ends_with('/') {
        return Err(format!(
            "`{url}` must name the folder holding leaflet.js and leaflet.css, ending with /"
        ));
    }
    Ok(url)
}

/// A tile URL template: a [`WebUrl`] with `{z}`, `{x}` and `{y}`.
pub fn parse_tile_url(text: &str) -> Result<WebUrl, String> {
    let url = WebUrl::parse(text)?;
    if ["{z}", "{x}", "{y}"]
        .iter()
        .any(|placeholder| !url.0.contains(placeholder))
    {
        return Err(format!("`{url}` must contain {{z}}, {{x}} and {{y}}"));
    }
    Ok(url)
}

/// A subresource integrity value (`sha256-…`, `sha384-…` or `sha512-…` with base64, several
/// separated by spaces), or empty for none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Integrity(Option<String>);

impl Integrity {
    /// Parses an integrity attribute value; empty means no check.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self(None));
        }
        for item in text.split_whitespace() {
            let (algorithm, digest) = item.split_once('-').unwrap_or_default();
            let digest_ok = !digest.is_empty()
                && digest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
            if !matches!(algorithm, "sha256" | "sha384" | "sha512") || !digest_ok {
                return Err(format!(
                    "`{item}` is not an integrity value such as sha384-<base64>"
                ));
            }
        }
        Ok(Self(Some(text.to_owned())))
    }

    /// The attribute value, `None` when the resource is loaded unchecked.
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl fmt::Display for Integrity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or_default())
    }
}

/// Where the map library and the tiles come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSettings {
    /// The folder holding `leaflet.js` and `leaflet.css`.
    pub library_url: WebUrl,
    /// The integrity of `leaflet.js`.
    pub script_integrity: Integrity,
    /// The integrity of `leaflet.css`.
    pub style_integrity: Integrity,
    /// The tile URL template.
    pub tile_url: WebUrl,
    /// The tiles' credit, as HTML (the operator's setting, shown as is).
    pub tile_attribution: String,
}

impl MapSettings {
    /// `leaflet.js` in the library folder.
    pub fn script_url(&self) -> String {
        format!("{}leaflet.js", self.library_url)
    }

    /// `leaflet.css` in the library folder.
    pub fn style_url(&self) -> String {
        format!("{}leaflet.css", self.library_url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_parse() {
        assert!(parse_library_url(DEFAULT_LIBRARY_URL).is_ok());
        assert!(parse_tile_url(DEFAULT_TILE_URL).is_ok());
        assert!(Integrity::parse(DEFAULT_SCRIPT_INTEGRITY).is_ok());
        assert!(Integrity::parse(DEFAULT_STYLE_INTEGRITY).is_ok());
    }

    #[test]
    fn urls_the_browser_could_misread_are_refused() {
        for bad in [
            "javascript:alert(1)",
            "//cdn.example/leaflet/",
            "https://cdn.example/a\"b/",
            "https://cdn.example/a b/",
            "cdn.example/leaflet/",
        ] {
            assert!(WebUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(parse_library_url("https://cdn.example/leaflet").is_err());
        assert!(parse_library_url("/static/leaflet/").is_ok());
        assert!(parse_tile_url("https://tiles.example/{z}/{x}.png").is_err());
    }

    #[test]
    fn integrity_is_empty_or_hash_values() {
        assert_eq!(Integrity::parse(" ").map(|i| i.0), Ok(None));
        assert!(Integrity::parse("sha384-abc+/= sha256-xyz").is_ok());
        assert!(Integrity::parse("md5-abc").is_err());
        assert!(Integrity::parse("sha384-\"x").is_err());
    }
}
