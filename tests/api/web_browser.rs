//! The pages in a real browser: headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromedriver`, through `fantoccini`), with the real Leaflet 1.9.4 (from the npm package, read
//! from npm's cache or the registry) and stand-in tiles served by a small local server, so no
//! test reaches beyond this machine.
//!
//! Where Chromium, chromedriver or the Leaflet package is missing, a test prints
//! `skipped: <reason>` and returns: it is reported, never passed silently. Screenshots of every
//! check are written to `target/screenshots/` to be looked at (the README's come from there).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use fantoccini::{Client, ClientBuilder, Locator};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use airq::clock::Clock;
use airq::domain::AqiCategory;
use airq::web::layout::NOT_CURRENT;

use crate::common::{located, measured, sample_with, TestApp};

/// The Leaflet the server's defaults pin.
const LEAFLET: &str = "leaflet@1.9.4";

/// The browser window of most checks.
const MAP_WINDOW: (u32, u32) = (1000, 640);

/// How long a page may take to show what a check waits for.
const PATIENCE: Duration = Duration::from_secs(30);

/// The `dist/` folder of the Leaflet npm package, unpacked once into the build's temporary
/// folder; `Err` says why it is not available.
fn leaflet_dist() -> Result<&'static Path, String> {
    static DIST: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIST.get_or_init(|| {
        let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join(LEAFLET);
        let dist = folder.join("package/dist");
        if dist.join("leaflet.js").is_file() {
            return Ok(dist);
        }
        std::fs::create_dir_all(&folder).map_err(|error| error.to_string())?;
        let packed = Command::new("npm")
            .args(["pack", LEAFLET, "--silent", "--pack-destination"])
            .arg(&folder)
            .stderr(Stdio::null())
            .output()
            .map_err(|error| format!("npm could not be run ({error})"))?;
        let name = String::from_utf8_lossy(&packed.stdout).trim().to_owned();
        if !packed.status.success() || name.is_empty() {
            return Err(format!(
                "`npm pack {LEAFLET}` failed: neither npm's cache nor the registry has it"
            ));
        }
        let unpacked = Command::new("tar")
            .arg("xzf")
            .arg(folder.join(&name))
            .arg("-C")
            .arg(&folder)
            .status()
            .map_err(|error| format!("tar could not be run ({error})"))?;
        if !unpacked.success() {
            return Err(format!("{name} could not be unpacked"));
        }
        Ok(dist)
    })
    .as_deref()
    .map_err(Clone::clone)
}

/// A program on `PATH`.
fn program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium and chromedriver, or why not.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let chromium = program(&["chromium", "chromium-browser"]).ok_or("chromium not found")?;
    let driver = program(&["chromedriver"]).ok_or("chromedriver not found")?;
    Ok((chromium, driver))
}

/// The SRI value (`sha384-…`) of a file's bytes.
fn integrity(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA384, bytes);
    format!(
        "sha384-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

#[airq_test::test]
fn the_default_integrity_values_are_those_of_leaflet_1_9_4_on_npm() {
    let dist = match leaflet_dist() {
        Ok(dist) => dist,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let read = |name: &str| std::fs::read(dist.join(name)).expect("a file of the package");
    assert_eq!(
        integrity(&read("leaflet.js")),
        airq::web::settings::DEFAULT_SCRIPT_INTEGRITY
    );
    assert_eq!(
        integrity(&read("leaflet.css")),
        airq::web::settings::DEFAULT_STYLE_INTEGRITY
    );
    assert!(airq::web::settings::DEFAULT_LIBRARY_URL.contains("leaflet-1.9.4"));
    // And the files the binary serves by default are the package's, byte for byte.
    let vendored =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web/vendor/leaflet-1.9.4");
    for name in [
        "leaflet.js",
        "leaflet.css",
        "images/marker-icon.png",
        "images/layers.png",
    ] {
        assert_eq!(
            std::fs::read(vendored.join(name)).expect("a vendored file"),
            read(name),
            "{name}"
        );
    }
}

/// A tile standing in for a map's: a light square with a grid, so screenshots read as a map.
fn tile(path: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"256\" height=\"256\">\
         <rect width=\"256\" height=\"256\" fill=\"#e8ecef\"/>\
         <path d=\"M0 0H256V256\" fill=\"none\" stroke=\"#cfd6dc\" stroke-width=\"2\"/>\
         <path d=\"M0 128H256M128 0V256\" fill=\"none\" stroke=\"#dde3e8\"/>\
         <text x=\"8\" y=\"20\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#a3adb6\">{}</text></svg>",
        path.trim_start_matches("/tiles/")
    )
}

/// Serves Leaflet's files under `/leaflet/` and stand-in tiles under `/tiles/`, with the CORS
/// header that `crossorigin` loads need.
async fn static_server(dist: &'static Path) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let path = request.uri().path().to_owned();
                async move {
                    let (status, content_type, body) = if let Some(name) = path
                        .strip_prefix("/leaflet/")
                        .filter(|name| !name.contains(".."))
                    {
                        let content_type = match name.rsplit('.').next() {
                            Some("js") => "text/javascript",
                            Some("css") => "text/css",
                            Some("png") => "image/png",
                            _ => "application/octet-stream",
                        };
                        match std::fs::read(dist.join(name)) {
                            Ok(bytes) => (200, content_type, bytes),
                            Err(_) => (404, "text/plain", b"no such file".to_vec()),
                        }
                    } else if path.starts_with("/tiles/") {
                        (200, "image/svg+xml", tile(&path).into_bytes())
                    } else {
                        (404, "text/plain", b"no such file".to_vec())
                    };
                    let response = hyper::Response::builder()
                        .status(status)
                        .header("content-type", content_type)
                        .header("access-control-allow-origin", "*")
                        .body(Full::new(Bytes::from(body)))
                        .expect("a response");
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

/// chromedriver on a free port, ended when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start(driver: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let deadline = Instant::now() + PATIENCE;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chromedriver listens");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium session, with JavaScript or without.
    async fn session(&self, chromium: &Path, javascript: bool, size: (u32, u32)) -> Client {
        let mut options = json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                format!("--window-size={},{}", size.0, size.1), "--hide-scrollbars", "--lang=en-GB"
            ],
        });
        if !javascript {
            options["prefs"] = json!({ "profile.managed_default_content_settings.javascript": 2 });
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".to_owned(), options);
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("a Chromium session")
    }
}

/// Saves what the browser shows as `target/screenshots/NAME.png`.
async fn screenshot(client: &Client, name: &str) {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&folder).expect("screenshot folder");
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(folder.join(format!("{name}.png")), png).expect("screenshot saved");
}

/// Waits until `script` (a JavaScript function body) returns something truthy, and returns it.
async fn until(client: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let value = client
            .execute(script, Vec::new())
            .await
            .expect("the script runs");
        let truthy = match &value {
            Value::Null | Value::Bool(false) => false,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            _ => true,
        };
        if truthy {
            return value;
        }
        if Instant::now() > deadline {
            screenshot(client, "timed-out").await;
            panic!("timed out waiting for {what} (last: {value}); see target/screenshots/timed-out.png");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server, configured to load the map library and tiles from `assets`.
async fn app_with_local_assets(assets: SocketAddr) -> TestApp {
    TestApp::spawn_with(|config| {
        config.map.library_url =
            airq::web::settings::parse_library_url(&format!("http://{assets}/leaflet/"))
                .expect("url");
        config.map.tile_url = airq::web::settings::parse_tile_url(&format!(
            "http://{assets}/tiles/{{z}}/{{x}}/{{y}}.svg"
        ))
        .expect("url");
        config.map.tile_attribution = "Stand-in tiles".to_owned();
        config.map_cache_ttl = Duration::from_millis(200);
    })
    .await
}

/// What a test needs from the machine, or the reason it is skipped.
struct Browser {
    chromium: PathBuf,
    driver: Driver,
    assets: SocketAddr,
}

async fn prerequisites() -> Result<Browser, String> {
    let (chromium, driver) = browser()?;
    let dist = leaflet_dist()?;
    Ok(Browser {
        chromium,
        driver: Driver::start(&driver).await,
        assets: static_server(dist).await,
    })
}

/// Registers a device of alice's with `flags` and one reading with `aqi` at (`lat`, `lon`).
async fn placed(app: &TestApp, name: &str, flags: Value, aqi: i64, at: (f64, f64)) -> String {
    let mut body = json!({ "name": name });
    if let (Some(body), Some(flags)) = (body.as_object_mut(), flags.as_object()) {
        body.extend(flags.clone());
    }
    let device = app.register("alice", body).await;
    let reading = located(sample_with(aqi, aqi as f64 / 4.0, 18.5), at.0, at.1);
    app.upload_ok(&device, &reading).await;
    device["id"].as_str().expect("id").to_owned()
}

/// A script: what the live map has drawn on its canvas (the page's `airqDrawn`): per marker its
/// device `id` or cluster figures, `fill` and `ring` colour, and viewport position `x`, `y`.
const DRAWN: &str = "const m = document.getElementById('map');\
     const d = m && m.airqDrawn ? m.airqDrawn() : [];";

/// A script: the single devices on the map as `[device id, fill colour]`, once there are `count`.
fn markers(count: usize) -> String {
    format!(
        "{DRAWN} const s = d.filter(e => e.id).map(e => [e.id, e.fill]);\
         return s.length === {count} ? s : null;"
    )
}

/// A script: the drawn marker of device `id` (`null` until it is drawn).
fn marker_of(id: &str) -> String {
    format!("{DRAWN} return d.find(e => e.id === '{id}') || null;")
}

/// Clicks the page at viewport position (`x`, `y`) with the mouse, as a person would: on a
/// canvas there is no element per marker to click.
async fn click_at(client: &Client, at: &Value) {
    use fantoccini::actions::{InputSource as _, MouseActions, PointerAction, MOUSE_BUTTON_LEFT};
    let (x, y) = (
        at["x"].as_f64().expect("x").round(),
        at["y"].as_f64().expect("y").round(),
    );
    let mouse = MouseActions::new("mouse".to_owned())
        .then(PointerAction::MoveTo {
            duration: None,
            x,
            y,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    client
        .perform_actions(mouse)
        .await
        .expect("the click is performed");
}

/// A script: the fields of the open popup by `data-field`, once its current snapshot (the hour's
/// means) has been fetched and written into it (`null` until then).
const OPEN_POPUP: &str = "const p = document.querySelector('.leaflet-popup .airq-popup');\
     return p && p.dataset.current === 'loaded' && Object.fromEntries(\
       Array.from(p.querySelectorAll('[data-field]')).map(e => [e.dataset.field, e.textContent]));";

#[airq_test::test]
async fn the_live_map_shows_public_devices_with_popups_and_picks_up_new_ones() {
    let browser = match prerequisites().await {
        Ok(browser) => browser,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let app = app_with_local_assets(browser.assets).await;
    let everything = json!({ "is_public": true, "is_location_public": true, "is_outdoor": true });
    let clean = placed(
        &app,
        "Tiergarten <b>",
        everything.clone(),
        38,
        (52.514, 13.350),
    )
    .await;
    let mut expected = vec![(clean.clone(), "#00e400".to_owned())];
    for (name, aqi, at) in [
        ("Kreuzberg", 162, (52.497, 13.410)),
        ("Neukölln", 118, (52.481, 13.435)),
        ("Wedding", 57, (52.550, 13.360)),
        ("Friedrichshain", 224, (52.512, 13.455)),
        ("Schöneberg", 44, (52.483, 13.355)),
    ] {
        let id = placed(&app, name, everything.clone(), aqi, at).await;
        expected.push((id, AqiCategory::of(aqi).colour().to_owned()));
    }
    let quiet = app
        .register(
            "alice",
            json!({ "name": "Quiet", "is_public": true, "is_location_public": true }),
        )
        .await;
    let stale = located(sample_with(30, 7.5, 18.5), 52.505, 13.38);
    app.upload_ok(
        &quiet,
        &measured(stale, app.clock.now() - TimeDelta::minutes(30)),
    )
    .await;
    expected.push((
        quiet["id"].as_str().expect("id").to_owned(),
        NOT_CURRENT.to_owned(),
    ));
    placed(
        &app,
        "Hidden spot",
        json!({ "is_public": true }),
        80,
        (52.52, 13.40),
    )
    .await;
    placed(&app, "Private", json!({}), 90, (52.53, 13.39)).await;

    let client = browser
        .driver
        .session(&browser.chromium, true, MAP_WINDOW)
        .await;
    client
        .goto(&format!("{}/map?lat=52.513&lon=13.40&zoom=12", app.base))
        .await
        .expect("the map page loads");
    let drawn = until(
        &client,
        "the public devices' markers",
        &markers(expected.len()),
    )
    .await;
    let mut shown: Vec<(String, String)> = serde_json::from_value(drawn).expect("pairs");
    shown.sort();
    expected.sort();
    assert_eq!(
        shown, expected,
        "public devices only, coloured by category, offline ones grey"
    );

    // The popup of a marker shows its values; the name stays text.
    let marker = until(&client, "the marker", &marker_of(&clean)).await;
    click_at(&client, &marker).await;
    let popup = until(&client, "the popup with its hour", OPEN_POPUP).await;
    assert_eq!(popup["name"], "Tiergarten <b>");
    assert_eq!(popup["aqi"], "38 · Good");
    assert_eq!(popup["pm2_5"], "9.5 µg/m³");
    assert_eq!(popup["temperature"], "18.5 °C");
    assert_eq!(popup["sample_count"], "1 reading");
    assert_eq!(popup["status"], "online");
    assert_eq!(popup["latest_aqi"], "38 · Good");
    assert!(popup["measured_at"]
        .as_str()
        .unwrap_or_default()
        .ends_with(" UTC"));
    // The name sits in an isolating element: it cannot reorder the popup's own text.
    let isolated = until(
        &client,
        "the popup's name in a <bdi>",
        "const b = document.querySelector('.leaflet-popup .airq-popup [data-field=name] > bdi');\
         return b && b.textContent;",
    )
    .await;
    assert_eq!(isolated, "Tiergarten <b>");
    // The popup fades in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    screenshot(&client, "map").await;

    // Polling picks up a device that starts reporting.
    let newcomer = placed(&app, "Mitte", everything, 75, (52.520, 13.405)).await;
    let drawn = until(&client, "the new device's marker", &marker_of(&newcomer)).await;
    assert_eq!(drawn["fill"], "#ffff00");

    // The page asked for the clusters of its zoom and box only, and unchanged views were 304s.
    let requests = until(
        &client,
        "a 304 among the feed requests",
        "const r = performance.getEntriesByType('resource')\
           .filter(e => e.name.includes('/api/v1/public/map/'))\
           .map(e => [e.name, e.responseStatus]);\
         return r.some(([, status]) => status === 304) ? r : null;",
    )
    .await;
    let requests: Vec<(String, u16)> = serde_json::from_value(requests).expect("pairs");
    assert!(
        requests
            .iter()
            .all(|(url, _)| url.contains("/api/v1/public/map/clusters?zoom=12&bbox=")),
        "{requests:?}"
    );

    let embedded = browser
        .driver
        .session(&browser.chromium, true, (720, 600))
        .await;
    embedded
        .goto(&format!(
            "{}/map?embed=1&lat=52.513&lon=13.40&zoom=12",
            app.base
        ))
        .await
        .expect("the embedded map loads");
    until(
        &embedded,
        "markers on the embedded map",
        &markers(expected.len() + 1),
    )
    .await;
    assert!(embedded
        .find_all(Locator::Css("header, footer"))
        .await
        .expect("a query")
        .is_empty());
    screenshot(&embedded, "map-embedded").await;
    embedded.close().await.expect("session closed");
    client.close().await.expect("session closed");
}

#[airq_test::test]
async fn the_live_map_draws_clusters_and_zooms_from_clusters_into_devices() {
    let browser = match prerequisites().await {
        Ok(browser) => browser,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let app = app_with_local_assets(browser.assets).await;
    let everything = json!({ "is_public": true, "is_location_public": true, "is_outdoor": true });
    // Twelve devices 300 to 450 m apart: one cluster at zoom 11, four at 13, twelve at 15.
    let aqis = [20, 35, 40, 45, 48, 52, 60, 75, 90, 110, 130, 160];
    let mut ids = Vec::new();
    for (index, aqi) in aqis.iter().enumerate() {
        let at = (
            52.51 + 0.004 * (index / 4) as f64,
            13.38 + 0.004 * (index % 4) as f64,
        );
        ids.push(
            placed(
                &app,
                &format!("Block {index}"),
                everything.clone(),
                *aqi,
                at,
            )
            .await,
        );
    }
    // Two devices that stopped reporting half an hour ago, 20 km away: a grey cluster.
    for (name, lon) in [("Quiet one", 13.70), ("Quiet two", 13.701)] {
        let device = app
            .register(
                "alice",
                json!({ "name": name, "is_public": true, "is_location_public": true }),
            )
            .await;
        let stale = located(sample_with(30, 7.5, 18.5), 52.45, lon);
        app.upload_ok(
            &device,
            &measured(stale, app.clock.now() - TimeDelta::minutes(30)),
        )
        .await;
    }

    let client = browser
        .driver
        .session(&browser.chromium, true, MAP_WINDOW)
        .await;
    client
        .goto(&format!("{}/map?lat=52.48&lon=13.50&zoom=11", app.base))
        .await
        .expect("the map page loads");
    let drawn = until(
        &client,
        "two clusters",
        &format!("{DRAWN} return d.length === 2 && d.every(e => e.count > 1) ? d : null;"),
    )
    .await;
    let drawn = drawn.as_array().expect("markers");
    let block = drawn
        .iter()
        .find(|cluster| cluster["count"] == 12)
        .expect("the block's cluster");
    // Lower median of the twelve: 52 (Moderate); the ring in the worst AQI's colour: 160.
    assert_eq!(block["aqi_median"], 52);
    assert_eq!(block["fill"], AqiCategory::of(52).colour());
    assert_eq!(block["ring"], AqiCategory::of(160).colour());
    let quiet = drawn
        .iter()
        .find(|cluster| cluster["count"] == 2)
        .expect("the quiet cluster");
    assert_eq!(quiet["offline"], 2);
    assert_eq!(
        (&quiet["fill"], &quiet["ring"]),
        (&json!(NOT_CURRENT), &json!(NOT_CURRENT))
    );
    let status = client
        .find(Locator::Id("map-status"))
        .await
        .expect("the status line")
        .text()
        .await
        .expect("text");
    assert!(status.starts_with("14 devices in view"), "{status}");
    screenshot(&client, "map-clusters").await;

    // A click on the cluster zooms two levels into it: four clusters of the same twelve.
    click_at(&client, block).await;
    let zoomed = until(
        &client,
        "the block in four clusters at zoom 13",
        &format!(
            "{DRAWN} const b = d.filter(e => e.count > 1 && e.offline === 0 || e.id);\
             const n = b.reduce((s, e) => s + e.count, 0);\
             return n === 12 && b.length === 4 ? b : null;"
        ),
    )
    .await;
    let next = zoomed
        .as_array()
        .and_then(|clusters| clusters.iter().find(|c| c["count"].as_u64() > Some(1)))
        .expect("a cluster left")
        .clone();
    click_at(&client, &next).await;
    let singles = until(&client, "the twelve devices", &markers(12)).await;
    let mut shown: Vec<String> = singles
        .as_array()
        .expect("pairs")
        .iter()
        .map(|pair| pair[0].as_str().expect("id").to_owned())
        .collect();
    shown.sort();
    ids.sort();
    assert_eq!(shown, ids, "every device its own marker from zoom 15");
    screenshot(&client, "map-zoomed-in").await;
    client.close().await.expect("session closed");
}

/// An outdoor device of alice's, public with its location, named `name`.
async fn public_outdoor(app: &TestApp, name: &str) -> Value {
    app.register(
        "alice",
        json!({ "name": name, "is_public": true, "is_location_public": true, "is_outdoor": true }),
    )
    .await
}

#[airq_test::test]
async fn the_device_page_draws_its_charts_without_javascript() {
    let browser = match prerequisites().await {
        Ok(browser) => browser,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let app = app_with_local_assets(browser.assets).await;
    let device = public_outdoor(&app, "Balcony").await;
    // Readings in 5 of the last 24 hours (two in one hour) and on 4 of the last 30 days; the
    // latest 10 minutes old, so the device is online and its marker has its category's colour.
    let now = Utc::now();
    let minutes = [10, 120, 120, 300, 540, 1200];
    let days = [3, 8, 15];
    let mut stamps: Vec<_> = minutes
        .iter()
        .map(|m| now - TimeDelta::minutes(*m))
        .collect();
    stamps.extend(days.iter().map(|d| now - TimeDelta::days(*d)));
    for (index, at) in stamps.iter().enumerate() {
        let aqi = [35, 48, 52, 61, 110, 45, 160, 220, 90][index];
        let reading = located(sample_with(aqi, 10.0, 19.0), 52.52, 13.405);
        app.upload_ok(&device, &measured(reading, *at)).await;
    }
    let mut day_count: Vec<_> = stamps.iter().map(|at| at.date_naive()).collect();
    day_count.sort();
    day_count.dedup();
    let id = device["id"].as_str().expect("id");
    let url = format!("{}/devices/{id}", app.base);

    let plain = browser
        .driver
        .session(&browser.chromium, false, MAP_WINDOW)
        .await;
    plain.goto(&url).await.expect("the device page loads");
    let count = |client: Client, selector: &'static str| async move {
        client
            .find_all(Locator::Css(selector))
            .await
            .expect("a query")
            .len()
    };
    assert_eq!(count(plain.clone(), "svg#chart-24h circle").await, 5);
    assert_eq!(
        count(plain.clone(), "svg#chart-30d circle").await,
        day_count.len()
    );
    let chip = plain
        .find(Locator::Css(".current .aqi-chip"))
        .await
        .expect("the current AQI");
    assert_eq!(
        chip.attr("data-aqi").await.expect("attr").as_deref(),
        Some("35")
    );
    plain.close().await.expect("session closed");

    let scripted = browser
        .driver
        .session(&browser.chromium, true, (1000, 1500))
        .await;
    scripted.goto(&url).await.expect("the device page loads");
    until(
        &scripted,
        "the location map's tiles and marker",
        "return document.querySelectorAll('#device-map .leaflet-tile-loaded').length > 0\
           && document.querySelector('#device-map path.leaflet-interactive');",
    )
    .await;
    let marker = scripted
        .find(Locator::Css("#device-map path.leaflet-interactive"))
        .await
        .expect("the location's marker");
    assert_eq!(
        marker.attr("fill").await.expect("attr").as_deref(),
        Some("#00e400"),
        "the marker has the current AQI's colour"
    );
    screenshot(&scripted, "device").await;
    scripted.close().await.expect("session closed");
}

#[airq_test::test]
async fn the_popup_and_the_device_page_show_the_same_hour_and_say_the_zone() {
    let browser = match prerequisites().await {
        Ok(browser) => browser,
        Err(reason) => return println!("skipped: {reason}"),
    };
    let app = app_with_local_assets(browser.assets).await;
    let device = public_outdoor(&app, "Courtyard").await;
    let id = device["id"].as_str().expect("id").to_owned();
    // Two readings in the last hour: AQI 20 forty minutes ago, 60 five minutes ago. The hour's
    // mean is 40 (Good); the latest reading, which the map feed carries, is 60 (Moderate).
    let now = app.clock.now();
    for (aqi, minutes) in [(20, 40), (60, 5)] {
        let reading = located(sample_with(aqi, 10.0, 19.0), 52.5, 13.4);
        app.upload_ok(
            &device,
            &measured(reading, now - TimeDelta::minutes(minutes)),
        )
        .await;
    }

    let client = browser
        .driver
        .session(&browser.chromium, true, MAP_WINDOW)
        .await;
    client
        .goto(&format!("{}/map?lat=52.5&lon=13.4&zoom=16", app.base))
        .await
        .expect("the map page loads");
    let marker = until(&client, "the device's marker", &marker_of(&id)).await;
    // The marker is coloured by the latest reading, as the map feed says.
    assert_eq!(marker["fill"], AqiCategory::of(60).colour());
    click_at(&client, &marker).await;
    let popup = until(&client, "the popup with its hour", OPEN_POPUP).await;
    assert_eq!(popup["aqi"], "40 · Good", "{popup}");
    assert_eq!(popup["sample_count"], "2 readings");
    assert_eq!(popup["latest_aqi"], "60 · Moderate");
    let last_seen = popup["last_seen"].as_str().expect("text").to_owned();
    let measured_at = popup["measured_at"].as_str().expect("text").to_owned();
    // One zone, said: UTC, as the device page writes it, whatever the browser's zone.
    let utc = (now - TimeDelta::minutes(5))
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    assert_eq!(
        (last_seen.as_str(), measured_at.as_str()),
        (utc.as_str(), utc.as_str())
    );
    let status = until(
        &client,
        "the status line",
        "const s = document.getElementById('map-status'); return s && / UTC$/.test(s.textContent) && s.textContent;",
    )
    .await;
    assert!(status
        .as_str()
        .unwrap_or_default()
        .contains("1 device in view"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    screenshot(&client, "map-popup-hour").await;

    // The device's page: the same AQI (the hour's mean) and the same time in the same zone.
    client
        .goto(&format!("{}/devices/{id}", app.base))
        .await
        .expect("the device page loads");
    let page = until(
        &client,
        "the device page's current values",
        "const c = document.querySelector('.current .aqi-chip');\
         const t = document.querySelector('[data-field=last_seen]');\
         return c && t && [c.dataset.aqi, c.querySelector('.aqi-name').textContent, t.textContent];",
    )
    .await;
    assert_eq!(page, json!(["40", "Good", last_seen]));
    client.close().await.expect("session closed");
}
