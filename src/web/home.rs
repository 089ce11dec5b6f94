//! `GET /`: the front door. What a person who opens the server's address in a browser needs:
//! what airq is, where the map, the API document and the health checks are, and the first steps
//! of the README, so nobody meets a JSON 404 at the root.
//!
//! Like the map page it is static for the life of the process (the version is its only input);
//! its route (`crate::http::routes::pages`) tags and revalidates it like every page.

use maud::{html, Markup};

use super::layout::{self, Chrome};

/// The commands of the first steps, as the README's "Try it" runs them (against this server's
/// default address; a token from the data directory's local issuer).
const FIRST_STEPS: &str = r#"# A bearer token for the owner "alice" (the embedded deployment's local issuer):
TOKEN=$(airq token alice)

# Register a device; the answer carries its device_id and device_key (shown only now):
curl -s -X POST http://127.0.0.1:8080/api/v1/devices \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"name": "Balcony", "is_public": true, "is_location_public": true}'

# The device uploads a reading (201 once it is committed):
curl -s -X POST http://127.0.0.1:8080/api/v1/data \
  -H "X-Device-ID: $DEVICE_ID" -H "X-Device-Key: $DEVICE_KEY" -H 'Content-Type: application/json' \
  -d '{"aqi": 42, "pms_data": {"pm1_0": 5.1, "pm2_5": 9.8, "pm10_0": 14.2, "provider": "PMS5003"},
       "temperature_data": {"temperature": 21.5, "heat_index": 21.9, "humidity": 48, "provider": "BME280"}}'

# Read it back as the owner:
curl -s http://127.0.0.1:8080/api/v1/air-quality/current -H "Authorization: Bearer $TOKEN""#;

/// The page.
pub fn render() -> Markup {
    let body = html! {
        div class="page" {
            h1 { "airq" }
            p {
                "The backend for fleets of air-quality sensors: owners register devices and get a key per device; devices upload readings (PM1, PM2.5, PM10, AQI, temperature, humidity, heat index, optional location); owners read current and historical air quality; public devices feed a community map."
            }
            h2 { "Here" }
            ul {
                li { a href="/map" { "The live map" } " of public devices." }
                li {
                    a href="/api/v1/openapi.json" { "The API document" }
                    " (OpenAPI 3.1): every route, body, answer and problem."
                }
                li { a href="/healthz" { "Health" } " and " a href="/readyz" { "readiness" } " of this server, and its " a href="/metrics" { "metrics" } "." }
            }
            h2 { "First steps" }
            pre { code { (FIRST_STEPS) } }
            p { "airq " (env!("CARGO_PKG_VERSION")) }
        }
    };
    layout::document("airq", Chrome::Full, html! {}, body)
}
