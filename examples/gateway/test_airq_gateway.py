"""Unit tests of the gateway: line parsing, batching, retries, splitting and refusals.

Run from this directory (or let `cargo test` run them, tests/api/examples.rs):

    python3 -m unittest -v test_airq_gateway

No server is needed: the sender is tested with a scripted ``post`` function, and once over real
HTTP with a scripted local server, so urllib's handling of error statuses is covered too.
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import io
import json
import threading
import unittest
from datetime import datetime, timezone

import airq_gateway as gw

READ_AT = datetime(2026, 11, 21, 14, 0, 0, 250000, tzinfo=timezone.utc)


def parser() -> gw.LineParser:
    return gw.LineParser(gw.Providers())


class ParseLines(unittest.TestCase):
    def test_a_full_positional_line(self):
        reading = parser().parse(
            "2026-11-21T14:00:00Z,42,5.1,9.8,14.2,21.5,48,21.9,52.52,13.405", READ_AT
        )
        self.assertEqual(
            reading,
            {
                "measured_at": "2026-11-21T14:00:00Z",
                "aqi": 42,
                "pms_data": {"pm1_0": 5.1, "pm2_5": 9.8, "pm10_0": 14.2, "provider": "PMS5003"},
                "temperature_data": {
                    "temperature": 21.5,
                    "humidity": 48.0,
                    "heat_index": 21.9,
                    "provider": "BME280",
                },
                "location": {"lat": 52.52, "lon": 13.405, "provider": "gateway"},
            },
        )

    def test_location_is_optional(self):
        for line in (
            "2026-11-21T14:00:00Z,42,5,9,14,21,48,21",
            "2026-11-21T14:00:00Z,42,5,9,14,21,48,21,,",
        ):
            self.assertNotIn("location", parser().parse(line, READ_AT), line)

    def test_half_a_location_is_refused(self):
        with self.assertRaisesRegex(gw.LineError, "lat and lon"):
            parser().parse("2026-11-21T14:00:00Z,42,5,9,14,21,48,21,52.5,", READ_AT)

    def test_offsets_and_fractions_become_utc(self):
        cases = {
            "2026-11-21T15:30:00+01:30": "2026-11-21T14:00:00Z",
            "2026-11-21T14:00:00.5Z": "2026-11-21T14:00:00.500000Z",
            "2026-11-21 14:00:00.1234567z": "2026-11-21T14:00:00.123456Z",
            "2026-11-21T09:00:00-05:00": "2026-11-21T14:00:00Z",
        }
        for given, expected in cases.items():
            self.assertEqual(gw.parse_time(given), expected, given)

    def test_times_without_offset_or_impossible_are_refused(self):
        for text in ("2026-11-21T14:00:00", "2026-13-01T00:00:00Z", "yesterday", "1700000000"):
            with self.assertRaises(gw.LineError, msg=text):
                gw.parse_time(text)

    def test_an_empty_measured_at_is_the_time_the_line_was_read(self):
        reading = parser().parse(",42,5,9,14,21,48,21", READ_AT)
        self.assertEqual(reading["measured_at"], "2026-11-21T14:00:00.250000Z")

    def test_aqi_is_an_integer_and_numbers_are_finite(self):
        self.assertEqual(parser().parse(",42.0,5,9,14,21,48,21", READ_AT)["aqi"], 42)
        for line, column in (
            (",42.5,5,9,14,21,48,21", "aqi"),
            (",42,five,9,14,21,48,21", "pm1_0"),
            (",42,5,nan,14,21,48,21", "pm2_5"),
            (",42,5,9,inf,21,48,21", "pm10_0"),
            (",42,5,9,14,21,48", "7 columns where 8 are needed"),
            (",42,5,9,14,,48,21", "temperature"),
        ):
            with self.assertRaisesRegex(gw.LineError, column, msg=line):
                parser().parse(line, READ_AT)

    def test_blank_comment_and_header_lines_are_no_readings(self):
        lines = parser()
        for text in (
            "",
            "   \r\n",
            "# a comment",
            "\ufeffmeasured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index,lat,lon",
        ):
            self.assertIsNone(lines.parse(text, READ_AT), text)

    def test_a_header_maps_columns_by_name(self):
        lines = parser()
        lines.parse("measured_at,humidity,aqi,pm2_5,pm1_0,pm10_0,heat_index,temperature,x", READ_AT)
        reading = lines.parse("2026-11-21T14:00:00Z,48,42,9,5,14,21.9,21.5,ignored", READ_AT)
        self.assertEqual(reading["aqi"], 42)
        self.assertEqual(reading["pms_data"]["pm2_5"], 9.0)
        self.assertEqual(reading["temperature_data"]["temperature"], 21.5)
        self.assertEqual(reading["temperature_data"]["humidity"], 48.0)
        self.assertNotIn("location", reading)

    def test_the_servers_csv_export_reads_back(self):
        lines = parser()
        lines.parse("measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index,lat,lon")
        reading = lines.parse('2026-11-21T14:00:00.000Z,42,5.1,9.8,14.2,21.5,48,21.9,"",""')
        self.assertEqual(reading["measured_at"], "2026-11-21T14:00:00Z")
        self.assertNotIn("location", reading)

    def test_a_header_without_a_needed_column_is_refused(self):
        with self.assertRaisesRegex(gw.LineError, "pm10_0"):
            parser().parse("measured_at,aqi,pm1_0,pm2_5,temperature,humidity,heat_index")


BATCH = [(10 + index, {"aqi": index}) for index in range(4)]


class Script:
    """A scripted ``post``: hands out the given answers (or raises), records every request."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.requests = []

    def __call__(self, url, body, headers, timeout):
        self.requests.append((url, json.loads(gzip.decompress(body)), dict(headers)))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def created(count: int) -> gw.Answer:
    receipts = [{"id": index + 1, "created_at": "2026-11-21T14:00:00Z"} for index in range(count)]
    body = json.dumps({"data": {"count": count, "receipts": receipts}}).encode()
    return gw.Answer(201, {"content-type": "application/json"}, body)


def problem(status: int, headers=None, **members) -> gw.Answer:
    body = {"type": "about:blank", "title": "Problem", "status": status, "detail": "details"}
    body.update(members)
    return gw.Answer(status, headers or {}, json.dumps(body).encode())


def sender(script: Script, sleeps: list, **options) -> gw.Sender:
    return gw.Sender(
        "http://127.0.0.1:8080/",
        "dev_abc",
        "sk_secret",
        post=script,
        sleep=sleeps.append,
        log=lambda message: None,
        **options,
    )


class Send(unittest.TestCase):
    def test_a_batch_goes_to_the_batch_route_gzipped_with_the_device_headers(self):
        script, sleeps = Script(created(4)), []
        self.assertEqual(sender(script, sleeps).send(BATCH), 4)
        url, body, headers = script.requests[0]
        self.assertEqual(url, "http://127.0.0.1:8080/api/v1/data/batch")
        self.assertEqual(body, {"readings": [reading for _, reading in BATCH]})
        self.assertEqual(headers["Content-Encoding"], "gzip")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(headers["X-Device-ID"], "dev_abc")
        self.assertEqual(headers["X-Device-Key"], "sk_secret")
        self.assertEqual(sleeps, [])

    def test_without_gzip_the_body_is_plain_json(self):
        seen = []

        def post(url, body, headers, timeout):
            seen.append((body, headers))
            return created(4)

        gw.Sender("http://x", "d", "k", compress=False, post=post, log=lambda m: None).send(BATCH)
        body, headers = seen[0]
        self.assertEqual(json.loads(body)["readings"][0], {"aqi": 0})
        self.assertNotIn("Content-Encoding", headers)

    def test_network_errors_and_5xx_resend_the_same_batch_with_growing_pauses(self):
        script = Script(
            ConnectionError("refused"),
            TimeoutError(),
            problem(503),
            problem(500),
            created(4),
        )
        sleeps = []
        self.assertEqual(sender(script, sleeps, first_backoff=1.0).send(BATCH), 4)
        bodies = [body for _, body, _ in script.requests]
        self.assertEqual(len(bodies), 5)
        self.assertTrue(all(body == bodies[0] for body in bodies), "the very same batch")
        self.assertEqual(len(sleeps), 4)
        for sleep, ceiling in zip(sleeps, (1, 2, 4, 8)):
            self.assertTrue(ceiling / 2 <= sleep <= ceiling, sleeps)

    def test_429_waits_as_long_as_retry_after_says(self):
        script = Script(problem(429, {"retry-after": "7"}), problem(408), created(4))
        sleeps = []
        self.assertEqual(sender(script, sleeps).send(BATCH), 4)
        self.assertEqual(sleeps[0], 7.0)
        self.assertEqual(len(script.requests), 3)

    def test_a_401_stops_with_the_credentials_named(self):
        script = Script(problem(401, title="Unauthorized", detail="unknown device or key"))
        with self.assertRaises(gw.Refused) as refused:
            sender(script, []).send(BATCH)
        message = str(refused.exception)
        self.assertIn("401", message)
        self.assertIn("unknown device or key", message)
        self.assertIn("--device-key", message)
        self.assertEqual(len(script.requests), 1, "never retried")

    def test_a_422_names_the_input_lines(self):
        errors = [
            {
                "name": "readings[2].pms_data.pm2_5",
                "code": "maximum",
                "detail": "at most 100000",
                "in": "body",
            },
            {"name": "readings[0]", "code": "type", "detail": "an object", "in": "body"},
        ]
        script = Script(problem(422, errors=errors))
        with self.assertRaises(gw.Refused) as refused:
            sender(script, []).send(BATCH)
        message = str(refused.exception)
        self.assertIn("line 12: pms_data.pm2_5: maximum: at most 100000", message)
        self.assertIn("line 10: (the reading): type", message)
        self.assertIn("lines 10-13", message)

    def test_other_4xx_stop_too(self):
        for status in (400, 403, 404, 409, 415):
            with self.assertRaises(gw.Refused, msg=status):
                sender(Script(problem(status)), []).send(BATCH)

    def test_a_413_splits_the_batch(self):
        script = Script(problem(413), created(2), created(2))
        self.assertEqual(sender(script, []).send(BATCH), 4)
        sizes = [len(body["readings"]) for _, body, _ in script.requests]
        self.assertEqual(sizes, [4, 2, 2])

    def test_a_413_for_one_reading_stops(self):
        with self.assertRaises(gw.Refused):
            sender(Script(problem(413)), []).send(BATCH[:1])

    def test_retries_run_out(self):
        script = Script(*[problem(503)] * 3)
        with self.assertRaisesRegex(gw.GaveUp, "sending the same input again is safe"):
            sender(script, [], max_retries=2).send(BATCH)
        self.assertEqual(len(script.requests), 3)

    def test_retry_after_as_seconds_or_date(self):
        self.assertEqual(gw.retry_after("12"), 12.0)
        self.assertEqual(gw.retry_after("Sat, 21 Nov 2026 14:00:30 GMT", now=1795269600.0), 30.0)
        self.assertEqual(gw.retry_after("99999999"), gw.RETRY_AFTER_CAP)
        self.assertIsNone(gw.retry_after("soon"))
        self.assertIsNone(gw.retry_after(None))


class Scripted(http.server.BaseHTTPRequestHandler):
    """A local server answering from a script: (status, headers, body) per request."""

    script: list = []
    received: list = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        type(self).received.append((self.path, dict(self.headers), body))
        status, headers, payload = type(self).script.pop(0)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


class OverHttp(unittest.TestCase):
    def test_urllib_sees_statuses_headers_and_bodies(self):
        Scripted.received = []
        Scripted.script = [
            (503, {"Content-Type": "application/problem+json"}, b'{"title":"Unavailable"}'),
            (429, {"Retry-After": "3"}, b'{"title":"Too Many Requests"}'),
            (201, {"Content-Type": "application/json"}, created(4).body),
        ]
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            sleeps = []
            stored = gw.Sender(
                f"http://127.0.0.1:{server.server_address[1]}",
                "dev_abc",
                "sk_secret",
                sleep=sleeps.append,
                log=lambda message: None,
            ).send(BATCH)
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(stored, 4)
        self.assertEqual(len(sleeps), 2)
        self.assertEqual(sleeps[1], 3.0)
        bodies = {body for _, _, body in Scripted.received}
        self.assertEqual(len(bodies), 1, "the same bytes each time")
        path, headers, body = Scripted.received[0]
        self.assertEqual(path, "/api/v1/data/batch")
        self.assertEqual(headers["Content-Encoding"], "gzip")
        self.assertEqual(json.loads(gzip.decompress(body))["readings"][3], {"aqi": 3})

    def test_a_refused_connection_is_a_network_error(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        port = server.server_address[1]
        server.server_close()
        with self.assertRaises(ConnectionError):
            gw.urllib_post(f"http://127.0.0.1:{port}/", b"{}", {}, 5.0)


def options(**overrides) -> argparse.Namespace:
    values = {
        "input": "test.csv",
        "batch_size": 2,
        "max_wait": 30.0,
        "dry_run": True,
        "quiet": True,
        "pms_provider": "PMS5003",
        "climate_provider": "BME280",
        "location_provider": "gateway",
    }
    values.update(overrides)
    return argparse.Namespace(**values)


class Run(unittest.TestCase):
    LINES = (
        "measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index\n"
        "2026-11-21T14:00:00Z,1,5,9,14,21,48,21\n"
        "2026-11-21T14:01:00Z,2,5,9,14,21,48,21\n"
        "not a reading\n"
        "2026-11-21T14:02:00Z,3,5,9,14,21,48,21\n"
    )

    def test_dry_run_prints_batches_and_counts_skipped_lines(self):
        out = io.StringIO()
        status = gw.run(options(), io.StringIO(self.LINES), out=out)
        self.assertEqual(status, gw.EXIT_SKIPPED)
        batches = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([[r["aqi"] for r in b["readings"]] for b in batches], [[1, 2], [3]])

    def test_refusals_stop_the_run(self):
        class Refusing:
            retries = 0

            def send(self, batch):
                raise gw.Refused("no")

        status = gw.run(options(dry_run=False), io.StringIO(self.LINES), sender=Refusing())
        self.assertEqual(status, gw.EXIT_REFUSED)

    def test_a_partial_batch_leaves_after_max_wait(self):
        sent = []

        class Recording:
            retries = 0

            def send(self, batch):
                sent.append([number for number, _ in batch])
                return len(batch)

        class SlowSource:
            """One line, then a pause longer than max_wait, then another line."""

            def __iter__(self):
                yield "2026-11-21T14:00:00Z,1,5,9,14,21,48,21\n"
                # Wait (bounded) until the first reading has left on its own.
                for _ in range(200):
                    if sent:
                        break
                    threading.Event().wait(0.01)
                yield "2026-11-21T14:01:00Z,2,5,9,14,21,48,21\n"

        status = gw.run(
            options(dry_run=False, batch_size=10, max_wait=0.05),
            SlowSource(),
            sender=Recording(),
        )
        self.assertEqual(status, gw.EXIT_OK)
        self.assertEqual(sent, [[1], [2]])


if __name__ == "__main__":
    unittest.main()
