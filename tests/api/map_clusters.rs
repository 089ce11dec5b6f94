//! GET /public/map/clusters: the map's devices clustered by zoom, as GeoJSON. The counts add up
//! to the map feed's devices in the same box at every zoom; from zoom 16 every device is its own
//! feature with the feed's fields; each (zoom, box) variant has its own entity tag; a device
//! that leaves the map leaves every zoom at once.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::TimeDelta;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::map::{
    clusters, clusters_path, get_with, header, map_features, placed_with_aqi, point, single_ids,
    total, CLUSTERS, GEO_JSON,
};
use crate::common::{fe, field_errors, gunzipped_json, problem, TestApp};

/// A server whose map would otherwise be served from its cache for an hour.
async fn app_with_a_long_map_cache() -> TestApp {
    TestApp::spawn_with(|c| c.map_cache_ttl = Duration::from_secs(3600)).await
}

/// Devices in three Berlin districts (two of them 100 m apart), Paris, Sydney, and on both
/// sides of the antimeridian.
async fn fleet(app: &TestApp) {
    for (name, aqi, lat, lon) in [
        ("Mitte", 40, 52.520, 13.405),
        ("Mitte next door", 60, 52.5205, 13.4055),
        ("Kreuzberg", 120, 52.497, 13.410),
        ("Spandau", 30, 52.535, 13.200),
        ("Paris", 80, 48.85, 2.35),
        ("Sydney", 20, -33.9, 151.2),
        ("Fiji", 10, -17.7, 178.1),
        ("Samoa", 15, -13.8, -171.8),
        ("Line", 25, -10.0, 180.0),
    ] {
        placed_with_aqi(app, name, aqi, lat, lon).await;
    }
}

const BOXES: [Option<&str>; 5] = [
    None,
    Some("13.3,52.4,13.5,52.6"),
    Some("-10,35,30,60"),
    Some("170,-20,-170,0"),
    Some("100,50,120,60"),
];

#[airq_test::test]
async fn the_counts_add_up_to_the_map_feeds_devices_in_the_box_at_every_zoom() {
    let app = TestApp::spawn().await;
    fleet(&app).await;
    for bbox in BOXES {
        let devices = map_features(&app, bbox).await.len() as u64;
        let mut previous = 0;
        for zoom in [0, 1, 3, 5, 8, 11, 12, 14, 15, 16, 22] {
            let features = clusters(&app, zoom, bbox).await;
            assert_eq!(total(&features), devices, "zoom {zoom}, bbox {bbox:?}");
            assert!(
                features.len() >= previous,
                "clusters only split as the zoom grows: zoom {zoom}, bbox {bbox:?}"
            );
            previous = features.len();
            for feature in &features {
                let properties = &feature["properties"];
                assert!(properties["count"].as_u64() >= Some(1));
                assert_eq!(feature["geometry"]["type"], "Point");
                if let Some(bbox) = bbox {
                    assert!(inside(bbox, point(feature)), "{feature} inside {bbox}");
                }
            }
        }
    }
    // Berlin's four are one cluster with Paris when the world is small, without it at zoom 5,
    // in the city box (without Spandau) two at zoom 12 (Mitte's two are 70 m apart), three at 16.
    let world = clusters(&app, 2, None).await;
    assert!(
        world.iter().any(|f| f["properties"]["count"] == 5),
        "{world:#?}"
    );
    let europe = clusters(&app, 5, None).await;
    assert!(
        europe.iter().any(|f| f["properties"]["count"] == 4),
        "{europe:#?}"
    );
    assert_eq!(
        clusters(&app, 12, Some("13.3,52.4,13.5,52.6")).await.len(),
        2
    );
    assert_eq!(
        clusters(&app, 16, Some("13.3,52.4,13.5,52.6")).await.len(),
        3
    );
}

/// Whether `(lon, lat)` lies inside the box `minLon,minLat,maxLon,maxLat` (across the
/// antimeridian when `minLon > maxLon`).
fn inside(bbox: &str, (lon, lat): (f64, f64)) -> bool {
    let v: Vec<f64> = bbox
        .split(',')
        .map(|n| n.parse().expect("number"))
        .collect();
    let lon_inside = if v[0] <= v[2] {
        v[0] <= lon && lon <= v[2]
    } else {
        lon >= v[0] || lon <= v[2]
    };
    lon_inside && v[1] <= lat && lat <= v[3]
}

#[airq_test::test]
async fn from_zoom_16_every_device_is_its_own_feature_with_the_feeds_fields() {
    let app = TestApp::spawn().await;
    fleet(&app).await;
    let feed = map_features(&app, None).await;
    for zoom in [16, 17, 22] {
        let features = clusters(&app, zoom, None).await;
        assert_eq!(features.len(), feed.len(), "zoom {zoom}");
        let mut expected: Vec<Value> = feed
            .iter()
            .map(|feature| {
                let mut feature = feature.clone();
                let aqi = feature["properties"]["aqi"].clone();
                let offline = u64::from(feature["properties"]["status"] == "offline");
                let properties = feature["properties"].as_object_mut().expect("properties");
                properties.insert("count".to_owned(), json!(1));
                properties.insert("aqi_max".to_owned(), aqi.clone());
                properties.insert("aqi_median".to_owned(), aqi);
                properties.insert("offline".to_owned(), json!(offline));
                feature
            })
            .collect();
        let mut features = features.clone();
        let by_id = |f: &Value| f["properties"]["id"].as_str().map(str::to_owned);
        expected.sort_by_key(by_id);
        features.sort_by_key(by_id);
        assert_eq!(
            features, expected,
            "each device at its own position, with the feed's fields"
        );
    }
    // Zoomed out, a feature of one device still carries its fields; a cluster carries none.
    for feature in clusters(&app, 3, None).await {
        let properties = feature["properties"].as_object().expect("properties");
        let single = properties["count"] == 1;
        for field in [
            "id",
            "name",
            "is_outdoor",
            "aqi",
            "pm2_5",
            "temperature",
            "measured_at",
            "status",
        ] {
            assert_eq!(
                properties.contains_key(field),
                single,
                "{field} in {feature}"
            );
        }
    }
}

#[airq_test::test]
async fn a_clusters_max_median_offline_and_point_are_its_devices() {
    let app = TestApp::spawn().await;
    // Two devices report, then nothing from them for 21 minutes: offline; three report now.
    for (name, aqi, lon) in [("a", 10, 13.400), ("b", 50, 13.401)] {
        placed_with_aqi(&app, name, aqi, 52.52, lon).await;
    }
    app.clock.advance(TimeDelta::minutes(21));
    for (name, aqi, lon) in [("c", 30, 13.402), ("d", 200, 13.403), ("e", 40, 13.404)] {
        placed_with_aqi(&app, name, aqi, 52.52, lon).await;
    }
    let features = clusters(&app, 10, None).await;
    assert_eq!(features.len(), 1, "{features:#?}");
    let cluster = &features[0];
    assert_eq!(
        cluster["properties"],
        json!({ "count": 5, "aqi_max": 200, "aqi_median": 40, "offline": 2 })
    );
    let (lon, lat) = point(cluster);
    assert!(
        (lon - 13.402).abs() < 1e-6 && (lat - 52.52).abs() < 1e-6,
        "the mean position"
    );

    // A box that cuts the cell: only the devices inside count; an even count's median is the
    // lower middle value.
    let features = clusters(&app, 10, Some("13.3999,52.5,13.4035,52.6")).await;
    assert_eq!(
        features[0]["properties"],
        json!({ "count": 4, "aqi_max": 200, "aqi_median": 30, "offline": 2 })
    );
    let (lon, _) = point(&features[0]);
    assert!(
        (lon - 13.4015).abs() < 1e-6,
        "the mean of the four inside: {lon}"
    );

    // From zoom 16 each is itself, its status as on the map.
    let singles = clusters(&app, 16, None).await;
    let offline: BTreeSet<&str> = singles
        .iter()
        .filter(|f| f["properties"]["offline"] == 1)
        .map(|f| f["properties"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(offline, BTreeSet::from(["a", "b"]));
    assert!(singles
        .iter()
        .all(|f| (f["properties"]["status"] == "offline") == (f["properties"]["offline"] == 1)));
}

/// A path and the field errors (name, code, location) its 422 lists.
type Refusal = (String, Vec<(&'static str, &'static str, &'static str)>);

#[airq_test::test]
async fn a_bad_zoom_or_bbox_is_422_in_query_naming_it() {
    let app = TestApp::spawn().await;
    placed_with_aqi(&app, "somewhere", 40, 1.0, 1.0).await;
    let cases: Vec<Refusal> = vec![
        (CLUSTERS.to_owned(), vec![("zoom", "required", "query")]),
        (
            format!("{CLUSTERS}?zoom="),
            vec![("zoom", "required", "query")],
        ),
        (
            format!("{CLUSTERS}?bbox=0,0,1,1"),
            vec![("zoom", "required", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=a"),
            vec![("zoom", "format", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=1.5"),
            vec![("zoom", "format", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=%2B3"),
            vec![("zoom", "format", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=03"),
            vec![("zoom", "format", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=-1"),
            vec![("zoom", "minimum", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=23"),
            vec![("zoom", "maximum", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=4&bbox=1,2,3"),
            vec![("bbox", "format", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=4&bbox=0,0,181,1"),
            vec![("bbox", "maximum", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=4&bbox=0,20,10,10"),
            vec![("bbox", "range", "query")],
        ),
        (
            format!("{CLUSTERS}?zoom=99&bbox=x"),
            vec![("zoom", "maximum", "query"), ("bbox", "format", "query")],
        ),
    ];
    for (path, expected) in cases {
        let response = get_with(&app, &path, &[]).await;
        assert_eq!(
            header(&response, "access-control-allow-origin"),
            Some("*"),
            "CORS on the 422 of {path}"
        );
        let body = problem(response, 422).await;
        assert_eq!(body["type"], "urn:airq:problem:validation");
        let mut expected: Vec<_> = expected
            .into_iter()
            .map(|(name, code, location)| fe(name, code, location))
            .collect();
        expected.sort();
        assert_eq!(field_errors(&body), expected, "GET {path}");
    }
}

#[airq_test::test]
async fn every_variant_has_its_own_etag_answers_304_to_it_and_keeps_cors() {
    let app = app_with_a_long_map_cache().await;
    fleet(&app).await;
    let mut tags = Vec::new();
    for zoom in [3, 16] {
        for bbox in [None, Some("-10,35,30,60")] {
            for encoding in ["identity", "gzip"] {
                let path = clusters_path(zoom, bbox);
                let what = format!("{path} ({encoding})");
                let headers = [("accept-encoding", encoding)];
                let response = get_with(&app, &path, &headers).await;
                assert_eq!(response.status(), 200, "{what}");
                assert_eq!(header(&response, "access-control-allow-origin"), Some("*"));
                assert_eq!(header(&response, "vary"), Some("Accept-Encoding"), "{what}");
                assert_eq!(
                    header(&response, "cache-control"),
                    Some("public, max-age=3600")
                );
                assert_eq!(
                    header(&response, "content-encoding"),
                    (encoding == "gzip").then_some("gzip"),
                    "{what}"
                );
                let etag = header(&response, "etag").expect("an ETag").to_owned();
                assert!(etag.starts_with('"'), "a strong tag: {etag}");

                let again = get_with(
                    &app,
                    &path,
                    &[("accept-encoding", encoding), ("if-none-match", &etag)],
                )
                .await;
                assert_eq!(again.status(), 304, "If-None-Match on {what}");
                assert_eq!(header(&again, "etag"), Some(etag.as_str()));
                assert_eq!(header(&again, "access-control-allow-origin"), Some("*"));
                assert!(again.bytes().await.expect("body").is_empty());
                tags.push(etag);
            }
        }
    }
    let distinct: BTreeSet<&String> = tags.iter().collect();
    assert_eq!(
        distinct.len(),
        tags.len(),
        "one ETag per variant: {tags:#?}"
    );

    // Another zoom's tag is not this zoom's; zooms past 16 are the same features as 16.
    let response = get_with(
        &app,
        &clusters_path(12, None),
        &[("if-none-match", &tags[0])],
    )
    .await;
    assert_eq!(response.status(), 200);
    let sixteen = get_with(&app, &clusters_path(16, None), &[]).await;
    let tag = header(&sixteen, "etag").expect("an ETag").to_owned();
    let twenty = get_with(&app, &clusters_path(20, None), &[("if-none-match", &tag)]).await;
    assert_eq!(twenty.status(), 304, "zoom 20 answers zoom 16's features");

    // A preflight from a widget's origin is granted.
    let preflight = app
        .client
        .request(Method::OPTIONS, app.url(CLUSTERS))
        .header("origin", "https://widget.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "if-none-match")
        .send()
        .await
        .expect("request sent");
    assert_eq!(preflight.status(), 204);
}

#[airq_test::test]
async fn the_gzip_copy_is_the_same_document() {
    let app = TestApp::spawn().await;
    fleet(&app).await;
    let path = clusters_path(4, None);
    let plain: Value = get_with(&app, &path, &[]).await.json().await.expect("json");
    let gzipped = get_with(&app, &path, &[("accept-encoding", "gzip")]).await;
    assert_eq!(header(&gzipped, "content-type"), Some(GEO_JSON));
    assert_eq!(gunzipped_json(gzipped).await, plain);
}

#[airq_test::test]
async fn a_device_made_private_hidden_or_deleted_leaves_every_zoom_at_once() {
    let app = app_with_a_long_map_cache().await;
    let mut ids = Vec::new();
    for (name, lon) in [
        ("one", 13.400),
        ("two", 13.401),
        ("three", 13.402),
        ("four", 13.403),
    ] {
        let device = placed_with_aqi(&app, name, 50, 52.52, lon).await;
        ids.push(device["id"].as_str().expect("id").to_owned());
    }
    const ZOOMS: [u8; 4] = [0, 8, 15, 16];
    for zoom in ZOOMS {
        assert_eq!(
            total(&clusters(&app, zoom, None).await),
            4,
            "cached at zoom {zoom}"
        );
    }
    let path = |id: &str| format!("/devices/{id}");
    let private = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &path(&ids[0]),
            &json!({ "is_public": false }),
        )
        .await;
    assert_eq!(private.status(), 200);
    let hidden = app
        .send_json_as(
            "alice",
            Method::PATCH,
            &path(&ids[1]),
            &json!({ "is_location_public": false }),
        )
        .await;
    assert_eq!(hidden.status(), 200);
    for zoom in ZOOMS {
        assert_eq!(total(&clusters(&app, zoom, None).await), 2, "zoom {zoom}");
    }
    let deleted = app
        .owner_request(Method::DELETE, &path(&ids[2]), "alice")
        .send()
        .await
        .expect("request sent");
    assert_eq!(deleted.status(), 204);
    for zoom in ZOOMS {
        let features = clusters(&app, zoom, Some("13,52,14,53")).await;
        assert_eq!(total(&features), 1, "zoom {zoom}");
        assert_eq!(single_ids(&features), BTreeSet::from([ids[3].clone()]));
    }
}

#[airq_test::test]
async fn a_bbox_across_the_antimeridian_clusters_both_sides() {
    let app = TestApp::spawn().await;
    for (name, lat, lon) in [
        ("east of the line", 1.0, 175.0),
        ("west of the line", -1.0, -175.0),
        ("on the line", 0.0, 180.0),
        ("on the line, seen from the west", 0.0, -180.0),
        ("greenwich", 0.0, 0.0),
        ("too far north", 20.0, 175.0),
    ] {
        placed_with_aqi(&app, name, 30, lat, lon).await;
    }
    let bbox = "170,-10,-170,10";
    let expected = single_ids(&map_features(&app, Some(bbox)).await);
    assert_eq!(expected.len(), 4);
    for zoom in 0..=16 {
        let features = clusters(&app, zoom, Some(bbox)).await;
        assert_eq!(total(&features), 4, "zoom {zoom}");
        assert!(
            features.len() >= 2,
            "a cluster never spans the line: zoom {zoom}"
        );
        for feature in &features {
            assert!(inside(bbox, point(feature)), "zoom {zoom}: {feature}");
        }
    }
    assert_eq!(single_ids(&clusters(&app, 16, Some(bbox)).await), expected);
}
