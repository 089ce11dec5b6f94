//! The route table is the one list of routes: the README's endpoint table lists exactly its
//! routes, and the server answers `HEAD` and `Allow` as the table says.

use std::collections::BTreeSet;

use airq::http::router::ROUTES;

use crate::common::{problem, TestApp};

/// `(method, path, auth)` of every row of the README's endpoint table.
fn readme_rows() -> BTreeSet<(String, String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("## Endpoints")
        .nth(1)
        .expect("an Endpoints section");
    let mut rows = BTreeSet::new();
    for line in section
        .lines()
        .skip_while(|line| !line.starts_with("| Method"))
    {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (methods, path, auth) = (cells[1], cells[2].trim_matches('`'), cells[3]);
        if methods == "Method" || methods.starts_with("---") {
            continue;
        }
        for method in methods.split(',').map(str::trim) {
            rows.insert((method.to_owned(), path.to_owned(), auth.to_owned()));
        }
    }
    rows
}

#[airq_test::test]
fn the_readme_lists_every_route_of_the_table_and_no_other() {
    let table: BTreeSet<(String, String, String)> = ROUTES
        .iter()
        .map(|route| {
            (
                route.method.as_str().to_owned(),
                route.path.to_owned(),
                route.access.as_str().to_owned(),
            )
        })
        .collect();
    let readme = readme_rows();
    let missing: Vec<_> = table.difference(&readme).collect();
    let extra: Vec<_> = readme.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the README: {missing:#?}"
    );
    assert!(
        extra.is_empty(),
        "README rows that are no route: {extra:#?}"
    );
}

#[airq_test::test]
async fn every_get_route_answers_head_with_the_headers_of_get_and_no_body() {
    let app = TestApp::spawn().await;
    for route in ROUTES.iter().filter(|route| route.method == "GET") {
        let url = format!("{}{}", app.base, route.path.replace("{id}", "not-a-uuid"));
        let get = app.client.get(&url).send().await.expect("GET sent");
        let head = app.client.head(&url).send().await.expect("HEAD sent");
        assert_eq!(head.status(), get.status(), "HEAD {}", route.path);
        assert_eq!(
            head.headers().get("content-type"),
            get.headers().get("content-type"),
            "HEAD {}",
            route.path
        );
        assert!(
            head.bytes().await.expect("HEAD body").is_empty(),
            "HEAD {} has no body",
            route.path
        );
    }
}

#[airq_test::test]
async fn a_method_a_path_does_not_take_is_405_with_the_tables_methods() {
    let app = TestApp::spawn().await;
    let paths: BTreeSet<&str> = ROUTES.iter().map(|route| route.path).collect();
    for path in paths {
        let declared: Vec<&str> = ROUTES
            .iter()
            .filter(|route| route.path == path)
            .map(|route| route.method.as_str())
            .collect();
        let url = format!("{}{}", app.base, path.replace("{id}", "x"));
        let response = app.client.put(&url).send().await.expect("PUT sent");
        let allow: Vec<String> = response.headers()["allow"]
            .to_str()
            .expect("ascii")
            .split(", ")
            .map(str::to_owned)
            .collect();
        for method in &declared {
            assert!(allow.iter().any(|m| m == method), "{path}: {allow:?}");
        }
        // Public routes and the OpenAPI document answer preflights from any origin.
        let any_origin = airq::http::cors::answers_any_origin(path);
        assert_eq!(allow.iter().any(|m| m == "OPTIONS"), any_origin, "{path}");
        assert_eq!(
            allow.iter().any(|m| m == "HEAD"),
            declared.contains(&"GET"),
            "{path}"
        );
        problem(response, 405).await;
    }
}
