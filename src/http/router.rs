//! The route table: every route of the server, declared once as (method, path template, access,
//! handler), in [`ROUTES`].
//!
//! Everything else about routes is derived from that table, so adding one is one entry (plus its
//! handler, OpenAPI entry and test): the path matching (by `matchit`), the `Allow` header of a 405,
//! `HEAD` on every `GET` route, the CORS preflights ([`super::cors`] decides their headers from
//! each path's access and `Allow` value, [`allow_of`]). The test suite checks the OpenAPI document
//! and the README's endpoint table against the same table.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::LazyLock;

use hyper::Method;

use super::error::ApiError;
use super::guards::access::{any_origin, Access, PUBLIC_AREA};
use super::guards::client_address::client_address;
use super::routes::{air_quality, alerts, data, devices, meta, pages, public};
use super::state::AppState;
use super::{Request, Response};

/// The path parameters of a matched route (the table's templates have at most `{id}`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PathParams<'a> {
    id: &'a str,
}

impl<'a> PathParams<'a> {
    /// The `{id}` segment (empty when the template has none).
    pub fn id(&self) -> &'a str {
        self.id
    }
}

/// What a handler returns.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send + 'a>>;

/// A handler: the request, the shared state, the path parameters.
pub type Handler = for<'a> fn(Request, &'a AppState, PathParams<'a>) -> HandlerFuture<'a>;

/// One route.
pub struct Route {
    /// The method (`HEAD` and `OPTIONS` are derived, never declared).
    pub method: Method,
    /// The full path template, `{id}` for the path parameter.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// What answers it.
    pub handler: Handler,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({:?})", self.method, self.path, self.access)
    }
}

/// Every route of the server.
pub static ROUTES: &[Route] = &[
    // pages for people
    Route {
        method: Method::GET,
        path: "/",
        access: Access::Page,
        handler: |request, _, _| Box::pin(async move { pages::home(&request) }),
    },
    Route {
        method: Method::GET,
        path: "/map",
        access: Access::Page,
        handler: |request, state, _| Box::pin(async move { pages::map(&request, state) }),
    },
    Route {
        method: Method::GET,
        path: "/devices/{id}",
        access: Access::Page,
        handler: |request, state, path| Box::pin(pages::device(request, state, path.id())),
    },
    // the map library the pages load (`{id}`: a file name)
    Route {
        method: Method::GET,
        path: "/assets/leaflet-1.9.4/{id}",
        access: Access::Page,
        handler: |request, _, path| {
            Box::pin(async move { pages::library_file(&request, path.id()) })
        },
    },
    Route {
        method: Method::GET,
        path: "/assets/leaflet-1.9.4/images/{id}",
        access: Access::Page,
        handler: |request, _, path| {
            Box::pin(async move { pages::library_file(&request, &format!("images/{}", path.id())) })
        },
    },
    // service
    Route {
        method: Method::GET,
        path: "/healthz",
        access: Access::Service,
        handler: |_, _, _| Box::pin(async { meta::health() }),
    },
    Route {
        method: Method::GET,
        path: "/readyz",
        access: Access::Service,
        handler: |_, state, _| Box::pin(meta::ready(state)),
    },
    Route {
        method: Method::GET,
        path: "/metrics",
        access: Access::Service,
        handler: |request, state, _| Box::pin(async move { Ok(meta::metrics(&request, state)) }),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/openapi.json",
        access: Access::Service,
        handler: |_, _, _| Box::pin(async { Ok(meta::openapi()) }),
    },
    // devices
    Route {
        method: Method::GET,
        path: "/api/v1/devices",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(devices::list(request, state)),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/devices",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(devices::register(request, state)),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/devices/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(devices::show(request, state, path.id())),
    },
    Route {
        method: Method::PATCH,
        path: "/api/v1/devices/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(devices::update(request, state, path.id())),
    },
    Route {
        method: Method::DELETE,
        path: "/api/v1/devices/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(devices::delete(request, state, path.id())),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/devices/{id}/rotate-key",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(devices::rotate_key(request, state, path.id())),
    },
    // alerts
    Route {
        method: Method::GET,
        path: "/api/v1/alerts",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(alerts::list(request, state)),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/alerts",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(alerts::create(request, state)),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/alerts/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::show(request, state, path.id())),
    },
    Route {
        method: Method::PATCH,
        path: "/api/v1/alerts/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::update(request, state, path.id())),
    },
    Route {
        method: Method::DELETE,
        path: "/api/v1/alerts/{id}",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::delete(request, state, path.id())),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/alerts/{id}/rotate-secret",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::rotate_secret(request, state, path.id())),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/alerts/{id}/test",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::test(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/alerts/{id}/deliveries",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::deliveries(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/alerts/{id}/states",
        access: Access::Owner,
        handler: |request, state, path| Box::pin(alerts::states(request, state, path.id())),
    },
    // readings
    Route {
        method: Method::POST,
        path: "/api/v1/data",
        access: Access::Device,
        handler: |request, state, _| Box::pin(data::upload(request, state)),
    },
    Route {
        method: Method::POST,
        path: "/api/v1/data/batch",
        access: Access::Device,
        handler: |request, state, _| Box::pin(data::upload_batch(request, state)),
    },
    // air quality
    Route {
        method: Method::GET,
        path: "/api/v1/air-quality/current",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(air_quality::owner_current(request, state)),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/devices/{id}/current",
        access: Access::Owner,
        handler: |request, state, path| {
            Box::pin(air_quality::device_current(request, state, path.id()))
        },
    },
    Route {
        method: Method::GET,
        path: "/api/v1/air-quality/historical",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(air_quality::owner_historical(request, state)),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/devices/{id}/historical",
        access: Access::Owner,
        handler: |request, state, path| {
            Box::pin(air_quality::device_historical(request, state, path.id()))
        },
    },
    Route {
        method: Method::GET,
        path: "/api/v1/devices/{id}/readings",
        access: Access::Owner,
        handler: |request, state, path| {
            Box::pin(air_quality::device_readings(request, state, path.id()))
        },
    },
    Route {
        method: Method::GET,
        path: "/api/v1/air-quality/custom",
        access: Access::Owner,
        handler: |request, state, _| Box::pin(air_quality::custom(request, state)),
    },
    // public
    Route {
        method: Method::GET,
        path: "/api/v1/public/devices/{id}",
        access: Access::Public,
        handler: |request, state, path| Box::pin(public::device(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/devices/{id}/current",
        access: Access::Public,
        handler: |request, state, path| Box::pin(public::current(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/devices/{id}/historical",
        access: Access::Public,
        handler: |request, state, path| Box::pin(public::historical(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/devices/{id}/readings",
        access: Access::Public,
        handler: |request, state, path| Box::pin(public::readings(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/devices/{id}/badge.svg",
        access: Access::Public,
        handler: |request, state, path| Box::pin(public::badge(request, state, path.id())),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/map/devices",
        access: Access::Public,
        handler: |request, state, _| Box::pin(public::map(request, state)),
    },
    Route {
        method: Method::GET,
        path: "/api/v1/public/map/clusters",
        access: Access::Public,
        handler: |request, state, _| Box::pin(public::clusters(request, state)),
    },
];

/// The routes of one path template.
#[derive(Debug)]
struct PathRoutes {
    routes: Vec<&'static Route>,
    access: Access,
    allow: String,
}

/// The table compiled for matching: a `matchit` router over the templates, each with its routes
/// and its `Allow` value.
#[derive(Debug)]
struct Table {
    paths: Vec<PathRoutes>,
    matcher: matchit::Router<usize>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table::compile(ROUTES));

impl Table {
    fn compile(routes: &'static [Route]) -> Self {
        let mut by_path: BTreeMap<&'static str, Vec<&'static Route>> = BTreeMap::new();
        for route in routes {
            by_path.entry(route.path).or_default().push(route);
        }
        let mut matcher = matchit::Router::new();
        let mut paths = Vec::with_capacity(by_path.len());
        for (template, routes) in by_path {
            let access = routes[0].access;
            let methods = allowed_methods(&routes);
            // The table is a constant checked by the unit tests below; a template matchit refuses
            // would fail them, never a request.
            if matcher.insert(template, paths.len()).is_ok() {
                paths.push(PathRoutes {
                    routes,
                    access,
                    allow: methods.join(", "),
                });
            }
        }
        Self { paths, matcher }
    }

    fn find<'p>(&self, path: &'p str) -> Option<(&PathRoutes, PathParams<'p>)> {
        let matched = self.matcher.at(path).ok()?;
        let params = PathParams {
            id: matched.params.get("id").unwrap_or_default(),
        };
        Some((self.paths.get(*matched.value)?, params))
    }
}

/// The methods a path answers, in the table's order, `HEAD` after `GET`, `OPTIONS` last (on the
/// paths any origin may read; an owner route's preflight from a listed origin is granted too, but
/// its `Allow` and `Access-Control-Allow-Methods` name the declared methods only).
fn allowed_methods(routes: &[&'static Route]) -> Vec<&'static str> {
    let mut methods = Vec::new();
    for route in routes {
        methods.push(route.method.as_str());
        if route.method == Method::GET {
            methods.push("HEAD");
        }
    }
    if routes
        .first()
        .is_some_and(|route| any_origin(Some(route.access), route.path))
    {
        methods.push("OPTIONS");
    }
    methods
}

/// Who may call `path`: its route's access, public for anything under [`PUBLIC_AREA`], `None`
/// for an unknown path elsewhere.
pub fn access_of(path: &str) -> Option<Access> {
    match TABLE.find(path) {
        Some((routes, _)) => Some(routes.access),
        None => path.starts_with(PUBLIC_AREA).then_some(Access::Public),
    }
}

/// The template of the route `path` matches (`/api/v1/devices/{id}` for
/// `/api/v1/devices/42`), `None` when none does: what logs show instead of ids.
pub fn template_of(path: &str) -> Option<&'static str> {
    let (routes, _) = TABLE.find(path)?;
    routes.routes.first().map(|route| route.path)
}

/// The `Allow` value of the path `path` matches (its declared methods, `HEAD` and `OPTIONS` as
/// derived), `None` when no route does.
pub fn allow_of(path: &str) -> Option<&'static str> {
    let (routes, _) = TABLE.find(path)?;
    Some(&routes.allow)
}

/// Routes a request to its handler; `path` is the request's path (the caller keeps a copy for
/// its log line and problem `instance`, and the path parameters borrow from it), `peer` the
/// address it came from. A request that reaches a public route's or a page's handler (`GET`,
/// `HEAD`) first counts against the public rate limit of its client address; 405s do not, nor
/// do the preflights the server grants before it routes ([`super::cors::preflight`]).
pub async fn dispatch(
    request: Request,
    path: &str,
    peer: IpAddr,
    state: &AppState,
) -> Result<Response, ApiError> {
    let (routes, params) = TABLE.find(path).ok_or(ApiError::RouteNotFound)?;
    let method = request.method();
    // HEAD is GET without the body (hyper sends the headers only).
    let wanted = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    if let Some(route) = routes.routes.iter().find(|route| route.method == wanted) {
        if matches!(route.access, Access::Public | Access::Page) {
            state.limits.public(client_address(
                peer,
                request.headers(),
                &state.trusted_proxies,
            ))?;
        }
        return (route.handler)(request, state, params).await;
    }
    Err(ApiError::MethodNotAllowed {
        allow: &routes.allow,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_compiles_and_matches_itself() {
        let table = Table::compile(ROUTES);
        for route in ROUTES {
            let concrete = route.path.replace("{id}", "x");
            let found = table
                .find(&concrete)
                .map(|(routes, _)| routes.routes[0].path);
            assert_eq!(found, Some(route.path), "{route:?}");
        }
    }

    #[test]
    fn no_route_is_declared_twice() {
        let mut seen = std::collections::HashSet::new();
        for route in ROUTES {
            assert!(seen.insert((route.method.clone(), route.path)), "{route:?}");
        }
    }

    #[test]
    fn public_routes_and_only_they_live_in_the_public_area() {
        for route in ROUTES {
            assert_eq!(
                route.access == Access::Public,
                route.path.starts_with(PUBLIC_AREA),
                "{route:?}"
            );
        }
    }

    #[test]
    fn derived_methods_are_never_declared() {
        assert!(ROUTES
            .iter()
            .all(|route| route.method != Method::HEAD && route.method != Method::OPTIONS));
    }

    #[test]
    fn allow_lists_head_after_get_and_options_on_public_routes() {
        let table = Table::compile(ROUTES);
        let allow = |path: &str| table.find(path).map(|(routes, _)| routes.allow.clone());
        assert_eq!(allow("/api/v1/devices").as_deref(), Some("GET, HEAD, POST"));
        assert_eq!(allow("/api/v1/data").as_deref(), Some("POST"));
        assert_eq!(
            allow("/api/v1/public/map/devices").as_deref(),
            Some("GET, HEAD, OPTIONS")
        );
    }

    #[test]
    fn template_of_names_the_route_not_the_ids() {
        assert_eq!(
            template_of("/api/v1/devices/42/current"),
            Some("/api/v1/devices/{id}/current")
        );
        assert_eq!(template_of("/healthz"), Some("/healthz"));
        assert_eq!(template_of("/api/v1/nowhere"), None);
    }

    #[test]
    fn an_empty_or_extra_segment_matches_nothing() {
        let table = Table::compile(ROUTES);
        for path in [
            "/api/v1/devices/",
            "/api/v1/devices/x/",
            "/api/v1/public/devices//current",
            "/api/v1",
            "//",
            "/assets/leaflet-1.9.4/",
        ] {
            assert!(table.find(path).is_none(), "{path}");
        }
    }
}
