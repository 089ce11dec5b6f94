//! Paging of the device list: `GET /devices?limit=N[&cursor=C]` and its `Link: <…>; rel="next"`.

use std::collections::HashSet;

use chrono::TimeDelta;
use reqwest::{Method, Response};
use serde_json::Value;

use crate::common::{fe, field_errors, problem, TestApp};

/// One page as the client sees it: the device ids, and the API path of the next page.
struct Page {
    ids: Vec<String>,
    next: Option<String>,
}

/// The path behind a `Link: </api/v1/…>; rel="next"` header, without the `/api/v1` prefix that
/// [`TestApp::url`] adds.
fn next_of(response: &Response) -> Option<String> {
    let link = response
        .headers()
        .get("link")?
        .to_str()
        .expect("ASCII link");
    let target = link
        .strip_prefix('<')
        .and_then(|rest| rest.strip_suffix(">; rel=\"next\""))
        .unwrap_or_else(|| panic!("a next link: {link}"));
    Some(
        target
            .strip_prefix("/api/v1")
            .unwrap_or_else(|| panic!("the link's full path: {link}"))
            .to_owned(),
    )
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|device| device["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn page(app: &TestApp, owner: &str, path: &str) -> Page {
    let response = app.get_as(owner, path).await;
    assert_eq!(response.status(), 200, "GET {path}");
    let next = next_of(&response);
    let body = response.json::<Value>().await.expect("json");
    Page {
        ids: ids(&body["data"]),
        next,
    }
}

/// More pages than any test's walk needs: a link that leads back would loop for ever otherwise.
const MAX_PAGES: usize = 50;

/// Follows `next` from the first page of `limit`; every page's size is checked against it.
async fn walk(app: &TestApp, owner: &str, limit: usize) -> Vec<String> {
    follow(app, owner, Some(format!("/devices?limit={limit}")), limit).await
}

/// The devices of the page at `path` and of every page its `next` links lead to.
async fn follow(app: &TestApp, owner: &str, mut path: Option<String>, limit: usize) -> Vec<String> {
    let mut visited = Vec::new();
    let mut pages = 0;
    while let Some(current) = path {
        pages += 1;
        assert!(pages <= MAX_PAGES, "the links keep going: {visited:?}");
        let page = page(app, owner, &current).await;
        assert!(
            page.ids.len() <= limit,
            "{current}: {} devices",
            page.ids.len()
        );
        if page.next.is_some() {
            assert_eq!(
                page.ids.len(),
                limit,
                "{current}: a page before the last is full"
            );
        }
        visited.extend(page.ids);
        path = page.next;
    }
    visited
}

/// Registers `count` devices for `owner`, two at each instant of the clock, so that both parts
/// of the order (`created_at`, then `id`) matter.
async fn register_many(app: &TestApp, owner: &str, count: usize) -> Vec<String> {
    let mut registered = Vec::new();
    for n in 0..count {
        if n % 2 == 0 {
            app.clock.advance(TimeDelta::seconds(1));
        }
        let device = app.register_named(owner, &format!("{owner} {n}")).await;
        registered.push(device["id"].as_str().expect("id").to_owned());
    }
    registered
}

async fn unpaged(app: &TestApp, owner: &str) -> Vec<String> {
    ids(&app.data_as(owner, "/devices").await)
}

#[airq_test::test]
async fn following_next_visits_every_device_once_in_the_order_of_the_whole_list() {
    let app = TestApp::spawn().await;
    register_many(&app, "alice", 7).await;
    register_many(&app, "bob", 2).await;
    let all = unpaged(&app, "alice").await;
    assert_eq!(all.len(), 7);
    for limit in [1, 2, 3, 7] {
        assert_eq!(walk(&app, "alice", limit).await, all, "limit={limit}");
    }
}

#[airq_test::test]
async fn the_last_page_has_no_link() {
    let app = TestApp::spawn().await;
    let registered = register_many(&app, "alice", 4).await;
    let first = page(&app, "alice", "/devices?limit=2").await;
    let next = first.next.expect("a second page");
    let last = page(&app, "alice", &next).await;
    assert_eq!(last.ids.len(), 2, "exactly full");
    assert_eq!(last.next, None);

    let only = page(&app, "alice", "/devices?limit=1000").await;
    assert_eq!(only.ids.len(), registered.len());
    assert_eq!(only.next, None);

    let nothing = page(&app, "carol", "/devices?limit=5").await;
    assert!(nothing.ids.is_empty());
    assert_eq!(nothing.next, None);
}

#[airq_test::test]
async fn without_limit_every_device_comes_at_once_without_a_link() {
    let app = TestApp::spawn().await;
    let registered = register_many(&app, "alice", 5).await;
    for path in ["/devices", "/devices?limit=", "/devices?limit=&cursor="] {
        let whole = page(&app, "alice", path).await;
        assert_eq!(whole.ids.len(), registered.len(), "{path}");
        assert_eq!(whole.next, None, "{path}");
    }
}

#[airq_test::test]
async fn a_bad_limit_is_refused_naming_limit_in_the_query() {
    let app = TestApp::spawn().await;
    register_many(&app, "alice", 2).await;
    for (limit, code) in [
        ("0", "minimum"),
        ("-3", "minimum"),
        ("1001", "maximum"),
        ("x", "type"),
        ("2.5", "type"),
    ] {
        let body = problem(
            app.get_as("alice", &format!("/devices?limit={limit}"))
                .await,
            422,
        )
        .await;
        assert_eq!(body["type"], "urn:airq:problem:validation");
        assert_eq!(body["instance"], "/api/v1/devices");
        assert_eq!(field_errors(&body), [fe("limit", code, "query")], "{limit}");
    }
}

#[airq_test::test]
async fn a_damaged_or_edited_cursor_is_refused_naming_cursor_in_the_query() {
    let app = TestApp::spawn().await;
    register_many(&app, "alice", 3).await;
    let cursor = page(&app, "alice", "/devices?limit=1")
        .await
        .next
        .expect("a next page")
        .split_once("cursor=")
        .expect("a cursor")
        .1
        .to_owned();
    let edited: String = cursor
        .chars()
        .enumerate()
        .map(|(at, c)| match (at, c) {
            (10, 'A') => 'B',
            (10, _) => 'A',
            _ => c,
        })
        .collect();
    for bad in [
        "not-a-cursor".to_owned(),
        cursor[..cursor.len() - 1].to_owned(),
        format!("{cursor}AAAA"),
        format!("{cursor}%3D"),
        "%FF%FE".to_owned(),
        "A".repeat(cursor.len()),
        "_".repeat(cursor.len()),
        edited,
    ] {
        let response = app
            .get_as("alice", &format!("/devices?limit=1&cursor={bad}"))
            .await;
        let body = problem(response, 422).await;
        assert_eq!(
            field_errors(&body),
            [fe("cursor", "format", "query")],
            "{bad}"
        );
    }
}

#[airq_test::test]
async fn a_cursor_without_limit_is_refused_naming_limit() {
    let app = TestApp::spawn().await;
    register_many(&app, "alice", 3).await;
    let next = page(&app, "alice", "/devices?limit=1")
        .await
        .next
        .expect("a next page");
    let without_limit = next.replace("limit=1&", "");
    let body = problem(app.get_as("alice", &without_limit).await, 422).await;
    assert_eq!(field_errors(&body), [fe("limit", "required", "query")]);
}

#[airq_test::test]
async fn devices_added_or_deleted_between_pages_never_appear_twice_and_every_other_is_visited() {
    let app = TestApp::spawn().await;
    let registered = register_many(&app, "alice", 8).await;
    let all = unpaged(&app, "alice").await;
    let first = page(&app, "alice", "/devices?limit=3").await;
    assert_eq!(first.ids, all[..3]);

    // Delete the device the cursor stands on and one not visited yet; add one before the
    // cursor's key and one after it.
    let seen_deleted = &first.ids[2];
    let unseen_deleted = &all[5];
    for id in [seen_deleted, unseen_deleted] {
        let response = app
            .owner_request(Method::DELETE, &format!("/devices/{id}"), "alice")
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 204);
    }
    app.clock.advance(TimeDelta::seconds(10));
    let added = app.register_named("alice", "added").await["id"]
        .as_str()
        .expect("id")
        .to_owned();

    let mut visited = first.ids.clone();
    visited.extend(follow(&app, "alice", first.next, 3).await);
    let distinct: HashSet<&String> = visited.iter().collect();
    assert_eq!(distinct.len(), visited.len(), "none twice: {visited:?}");
    for id in registered.iter().filter(|id| *id != unseen_deleted) {
        assert!(visited.contains(id), "{id} visited");
    }
    assert!(!visited.contains(unseen_deleted));
    assert!(visited.contains(&added), "added after the cursor: reached");
}

#[airq_test::test]
async fn another_owners_cursor_never_reveals_their_devices() {
    let app = TestApp::spawn().await;
    // Interleaved in time, so that alice's cursor falls between bob's devices.
    let mut alice = Vec::new();
    let mut bob = Vec::new();
    for n in 0..3 {
        app.clock.advance(TimeDelta::seconds(1));
        alice.push(app.register_named("alice", &format!("a{n}")).await["id"].clone());
        app.clock.advance(TimeDelta::seconds(1));
        bob.push(app.register_named("bob", &format!("b{n}")).await["id"].clone());
    }
    let alices_next = page(&app, "alice", "/devices?limit=1")
        .await
        .next
        .expect("a next page");

    let seen_by_bob = page(&app, "bob", &alices_next.replace("limit=1", "limit=10")).await;
    assert_eq!(seen_by_bob.next, None);
    assert!(!seen_by_bob.ids.is_empty(), "bob's devices after the key");
    for id in &seen_by_bob.ids {
        assert!(bob.contains(&Value::from(id.as_str())), "{id} is bob's");
        assert!(
            !alice.contains(&Value::from(id.as_str())),
            "{id} is alice's"
        );
    }
}
