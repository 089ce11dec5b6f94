"""Rules of the OpenAPI document that JSON Schema cannot state, for .ci/schemathesis.

Each rule ties two values together (or a value to the clock), so the document states it in prose
and Schemathesis cannot know it: generated requests that satisfy every schema would still break it
and be refused, failing `positive_data_acceptance`. These hooks repair only those relations, and
only between values that are already schema-valid, so a request meant to violate a schema still
does. The rules, as the document states them:

- custom ranges: `start_date` <= `end_date`, spanning at most 31 days by hour, 366 by day and
  10 years by month;
- raw exports: `start` < `end`, at most 366 days apart;
- the map's and the clusters' `bbox`: `minLat` <= `maxLat`;
- uploads: `measured_at` within [now - 366 days, now + 5 minutes];
- `tz`: one of the zone names the document lists in `x-airq-zone-names` (a string in the schema,
  so generators do not choke on a 598-value enum);
- the devices list: `cursor` only as a previous page's `next` link gives it, and with `limit`;
- alert rules (`POST /alerts`, `PATCH /alerts/{id}`): a threshold needs `measure` and exactly one
  of `above`/`below`, with `clear` on its safe side; a silence needs `silence_minutes`;
  `device_id` names one of the caller's devices (repaired to `null`, every device);
  `webhook_url` is an https URL whose host is not internal (repaired to one such URL; the run's
  server has its deliveries paused, so nothing is sent there).

One more repair is the fuzzer's, not the document's: Schemathesis sends every body as is, so an
upload whose `Content-Encoding` names gzip is sent as `identity` (the document's example names
`identity` only, as the examples phase is not mapped; gzip bodies are tested in tests/api/batch.rs).
"""

import datetime as dt
import json
import pathlib
import re

import schemathesis

# The zone names the server accepts, as the document lists them.
ZONES = frozenset(
    json.loads((pathlib.Path(__file__).parent.parent / "src/http/openapi.json").read_text())[
        "components"
    ]["parameters"]["TimeZone"]["schema"]["x-airq-zone-names"]
)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
BBOX = re.compile(r"^([^,]+),([^,]+),([^,]+),([^,]+)$")
# One instant for the whole run, so a case repaired twice is repaired the same way (Hypothesis
# replays cases and refuses ones that change); a run takes minutes, the bound allows 366 days.
NOW = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _date(value):
    if isinstance(value, str) and DATE.match(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    return None


def _instant(value):
    if not isinstance(value, str) or len(value) < 20 or value[10] not in "Tt":
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _path(context):
    """The operation's path below /api/v1 (the document's paths are absolute)."""
    operation = getattr(context, "operation", None)
    path = operation.path if operation is not None else ""
    return path[len("/api/v1"):] if path.startswith("/api/v1/") else path


def _custom_range(query):
    start, end = _date(query.get("start_date")), _date(query.get("end_date"))
    if start is None or end is None:
        return
    if start > end:
        start, end = end, start
    interval = query.get("interval")
    longest = {"hour": 31, "month": 3650}.get(interval if isinstance(interval, str) else "", 366)
    if (end - start).days + 1 > longest:
        end = start
    query["start_date"], query["end_date"] = start.isoformat(), end.isoformat()


def _export_range(query):
    start, end = _instant(query.get("start")), _instant(query.get("end"))
    if start is None or end is None:
        return
    if start < end <= start + dt.timedelta(days=366):
        return
    try:
        query["end"] = (start + dt.timedelta(hours=1)).isoformat()
    except OverflowError:
        query["start"] = (start - dt.timedelta(hours=1)).isoformat()
        query["end"] = start.isoformat()


def _bbox(query):
    bbox = query.get("bbox")
    matched = BBOX.match(bbox) if isinstance(bbox, str) else None
    if not matched:
        return
    min_lon, min_lat, max_lon, max_lat = matched.groups()
    try:
        if float(min_lat) > float(max_lat):
            query["bbox"] = ",".join([min_lon, max_lat, max_lon, min_lat])
    except ValueError:
        return


def _query(path, query):
    if not isinstance(query, dict):
        return query
    if isinstance(query.get("tz"), str) and query["tz"] not in ZONES and query["tz"] != "":
        query["tz"] = "UTC"
    if path == "/devices" and "cursor" in query:
        # A cursor comes from the server, never from a generator: start from the first page.
        del query["cursor"]
    if path == "/devices" and (query.get("limit") == "" or isinstance(query.get("limit"), (dict, list))):
        # An empty value (as an empty object or list is sent) is the server's "absent" (the whole
        # list), which no integer schema says.
        del query["limit"]
    if path == "/air-quality/custom":
        _custom_range(query)
    elif path.endswith("/readings"):
        _export_range(query)
    elif path in ("/public/map/devices", "/public/map/clusters"):
        _bbox(query)
    return query


def _recent(reading):
    if isinstance(reading, dict) and _instant(reading.get("measured_at")) is not None:
        reading["measured_at"] = NOW


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _alert_rule(body, patch):
    # A `null` counts as absent (but `device_id: null` means every device). A patch is laid over
    # a rule the hooks cannot see: a `clear` without its threshold may lie on the wrong side of
    # the stored one, so it is dropped.
    if not isinstance(body, dict):
        return
    if isinstance(body.get("device_id"), str):
        body["device_id"] = None
    if isinstance(body.get("webhook_url"), str):
        body["webhook_url"] = "https://hooks.example.com/airq"
    if _number(body.get("above")) and _number(body.get("below")):
        del body["below"]
    kind = body.get("kind")
    if kind == "silence" and body.get("silence_minutes") is None:
        body["silence_minutes"] = 1
    if kind == "threshold":
        if body.get("measure") is None:
            body["measure"] = "pm2_5"
        if body.get("above") is None and body.get("below") is None:
            body["above"] = 35
    clear = body.get("clear")
    if not _number(clear):
        return
    if _number(body.get("above")):
        body["clear"] = min(clear, body["above"])
    elif _number(body.get("below")):
        body["clear"] = max(clear, body["below"])
    elif patch:
        del body["clear"]


def _body(path, body):
    if path in ("/alerts", "/alerts/{id}"):
        _alert_rule(body, path == "/alerts/{id}")
    elif path == "/data":
        _recent(body)
    elif path == "/data/batch" and isinstance(body, dict) and isinstance(body.get("readings"), list):
        for reading in body["readings"]:
            _recent(reading)
    return body


def _names_gzip(value):
    """Whether a Content-Encoding value is one the server reads as gzip (once, among identities)."""
    if not isinstance(value, str):
        return False
    codings = [part.strip(" \t").lower() for part in value.split(",")]
    gzips = [coding for coding in codings if coding in ("gzip", "x-gzip")]
    return len(gzips) == 1 and all(coding in ("", "identity", "gzip", "x-gzip") for coding in codings)


def _headers(headers):
    if hasattr(headers, "items"):
        for name, value in list(headers.items()):
            if name.lower() == "content-encoding" and _names_gzip(value):
                headers[name] = "identity"
    return headers


# The coverage phase builds whole cases (`map_case`); the fuzzing phase draws each part on its own.
@schemathesis.hook
def map_case(context, case):
    path = _path(context)
    case.query = _query(path, case.query)
    case.body = _body(path, case.body)
    case.headers = _headers(case.headers)
    return case


@schemathesis.hook
def map_query(context, query):
    return _query(_path(context), query)


@schemathesis.hook
def map_body(context, body):
    return _body(_path(context), body)


@schemathesis.hook
def map_headers(context, headers):
    return _headers(headers)
