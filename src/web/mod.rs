//! Pages for people, apart from the JSON API: the front door (`/`), the live map (`/map`), the public device page
//! (`/devices/{id}`), the embeddable AQI badge (`/api/v1/public/devices/{id}/badge.svg`) and the
//! not-found page they share.
//!
//! This module only renders: each file turns data it is given into HTML, SVG or script, and
//! imports nothing of `http`. What a page shows is read, and the answer that carries it is made,
//! by its route beside the API's (`crate::http::routes::pages`, the badge in
//! `crate::http::routes::public`), so the route table points down into the pages and the pages
//! never point back up.
//!
//! Pages are rendered on the server with `maud`: markup written as Rust, checked when the crate
//! compiles, and every value spliced into it HTML-escaped unless it is explicitly marked as
//! markup, so a device name (user input) can never become markup. Pages read the same store
//! traits as the API and colour AQI values from one table ([`crate::domain::AqiCategory`]);
//! charts are inline SVG, so the device page works without JavaScript. Only the map needs a
//! script: the map library (Leaflet 1.9.4, pinned, with subresource integrity) is served by the
//! binary itself ([`assets`]) unless [`settings`] point elsewhere; the tiles come from
//! [`settings`].

pub mod assets;
pub mod badge;
pub mod chart;
pub mod device_page;
pub mod home;
pub mod layout;
pub mod map_page;
pub mod not_found;
pub mod settings;
pub mod text;
