#!/usr/bin/env python3
"""airq gateway: forwards sensor readings to airq in batches.

Reads readings, one per line, from a CSV file, a serial port or standard input, and uploads them
to ``POST /api/v1/data/batch`` with the device's ``X-Device-ID`` / ``X-Device-Key``, up to
``--batch-size`` readings per request, gzip-compressed (``Content-Encoding: gzip``).

Line layout (RFC 4180 CSV, one reading per line):

    measured_at,aqi,pm1_0,pm2_5,pm10_0,temperature,humidity,heat_index[,lat,lon]

A first line starting with ``measured_at`` is a header: columns are then found by name, in any
order (the CSV export of ``GET /api/v1/devices/{id}/readings`` can be fed back as it is). Blank
lines and lines starting with ``#`` are ignored. ``measured_at`` is RFC 3339 with an offset
(``2026-11-21T14:00:00Z``); when it is empty, the gateway stamps the time it read the line, so
every reading it sends carries ``measured_at``. ``lat``/``lon`` are optional (both or neither).

Why resending is safe: the server keys a reading that carries ``measured_at`` by (device,
``measured_at``) and replaces instead of adding. So after a network error, a timeout, a 5xx,
408 or 429 the gateway sends the very same batch again, and a batch the server had committed
before its answer was lost is stored once. 401 and 422 stop the gateway with the problem's
details; 413 splits the batch in two.

Exit status: 0 everything sent; 1 the input cannot be read; 2 bad arguments; 3 the server
refused a batch (401, 422, other 4xx); 4 gave up after --max-retries; 5 everything else was sent
but some lines were skipped as malformed.

Standard library only; Python 3.8 or later.
"""

from __future__ import annotations

import argparse
import csv
import email.utils
import gzip
import http.client
import json
import math
import os
import queue
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

COLUMNS = (
    "measured_at",
    "aqi",
    "pm1_0",
    "pm2_5",
    "pm10_0",
    "temperature",
    "humidity",
    "heat_index",
)
LOCATION_COLUMNS = ("lat", "lon")
BATCH_PATH = "/api/v1/data/batch"
MAX_READINGS = 1000  # per request, the server's limit
MAX_BODY = 1_048_576  # bytes of JSON per request, the server's limit
RETRY_AFTER_CAP = 3600.0  # seconds: never sleep longer on one Retry-After

# 2 is argparse's status for bad arguments.
EXIT_OK, EXIT_INPUT, EXIT_REFUSED, EXIT_GAVE_UP, EXIT_SKIPPED = 0, 1, 3, 4, 5

_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


class LineError(ValueError):
    """A line that cannot be turned into a reading."""


class Refused(Exception):
    """The server refused a batch: sending it again would not help."""


class GaveUp(Exception):
    """Retries are exhausted: the batch may or may not be stored; sending it again is safe."""


def parse_time(text: str) -> str:
    """An RFC 3339 instant, normalised to UTC with a ``Z`` (fractions kept to microseconds)."""
    match = _TIME.match(text.strip())
    if not match:
        raise LineError(
            f"measured_at {text!r} is not RFC 3339 with an offset (e.g. 2026-11-21T14:00:00Z)"
        )
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    if offset in ("Z", "z"):
        zone = timezone.utc
    else:
        sign = -1 if offset[0] == "-" else 1
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        zone = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        instant = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, zone
        )
    except ValueError as error:
        raise LineError(f"measured_at {text!r}: {error}") from None
    return format_time(instant)


def format_time(instant: datetime) -> str:
    """RFC 3339 in UTC, ``Z`` suffix, microseconds only when there are any."""
    return instant.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise LineError(f"{name} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise LineError(f"{name} {text!r} is not a finite number")
    return value


def _integer(name: str, text: str) -> int:
    value = _number(name, text)
    if not value.is_integer():
        raise LineError(f"{name} {text!r} is not an integer")
    return int(value)


class Layout:
    """Where each column is: positional by default, by name after a header line."""

    def __init__(self, positions: dict[str, int] | None = None):
        if positions is None:
            positions = {name: index for index, name in enumerate(COLUMNS + LOCATION_COLUMNS)}
        self.positions = positions

    @classmethod
    def from_header(cls, fields: list[str]) -> Layout:
        names = [field.strip().lower() for field in fields]
        missing = [name for name in COLUMNS if name not in names]
        if missing:
            raise LineError(f"the header lacks {', '.join(missing)}")
        if ("lat" in names) != ("lon" in names):
            raise LineError("the header has one of lat/lon without the other")
        wanted = COLUMNS + LOCATION_COLUMNS
        return cls({name: names.index(name) for name in wanted if name in names})


class Providers:
    """The provider names the readings carry (the CSV has no columns for them)."""

    def __init__(self, pms: str = "PMS5003", climate: str = "BME280", location: str = "gateway"):
        self.pms, self.climate, self.location = pms, climate, location


def parse_fields(
    fields: list[str], layout: Layout, providers: Providers, read_at: datetime
) -> dict:
    """The upload body of one CSV record; raises LineError naming the faulty column."""

    def field(name: str) -> str:
        index = layout.positions.get(name)
        if index is None or index >= len(fields):
            return ""
        return fields[index].strip()

    needed = max(layout.positions[name] for name in COLUMNS) + 1
    if len(fields) < needed:
        raise LineError(
            f"{len(fields)} columns where {needed} are needed "
            f"(layout: {','.join(COLUMNS)}[,lat,lon])"
        )
    for name in COLUMNS[1:]:
        if field(name) == "":
            raise LineError(f"{name} is empty")
    measured_at = field("measured_at")
    reading = {
        "measured_at": parse_time(measured_at) if measured_at else format_time(read_at),
        "aqi": _integer("aqi", field("aqi")),
        "pms_data": {
            "pm1_0": _number("pm1_0", field("pm1_0")),
            "pm2_5": _number("pm2_5", field("pm2_5")),
            "pm10_0": _number("pm10_0", field("pm10_0")),
            "provider": providers.pms,
        },
        "temperature_data": {
            "temperature": _number("temperature", field("temperature")),
            "humidity": _number("humidity", field("humidity")),
            "heat_index": _number("heat_index", field("heat_index")),
            "provider": providers.climate,
        },
    }
    lat, lon = field("lat"), field("lon")
    if lat or lon:
        if not (lat and lon):
            raise LineError("lat and lon come together (or both empty)")
        reading["location"] = {
            "lat": _number("lat", lat),
            "lon": _number("lon", lon),
            "provider": providers.location,
        }
    return reading


class LineParser:
    """Turns lines into readings; remembers the layout a header line set."""

    def __init__(self, providers: Providers):
        self.providers = providers
        self.layout = Layout()

    def parse(self, text: str, read_at: datetime | None = None) -> dict | None:
        """The reading of one line; ``None`` for blank, comment and header lines."""
        text = text.strip().lstrip("\ufeff")
        if not text or text.startswith("#"):
            return None
        try:
            fields = next(csv.reader([text]))
        except csv.Error as error:
            raise LineError(f"not CSV: {error}") from None
        if fields and fields[0].strip().lower() == "measured_at":
            self.layout = Layout.from_header(fields)
            return None
        return parse_fields(
            fields, self.layout, self.providers, read_at or datetime.now(timezone.utc)
        )


# --- Sending -------------------------------------------------------------------------------------


class Answer:
    """An HTTP answer: status, headers (lower-case names) and body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> dict:
        try:
            value = json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}


def urllib_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POSTs with urllib; any HTTP status is an Answer, network trouble raises OSError."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, _lower(response.headers), response.read())
    except urllib.error.HTTPError as error:
        try:
            body = error.read()
        except (OSError, http.client.HTTPException):
            body = b""
        finally:
            error.close()
        return Answer(error.code, _lower(error.headers), body)
    except urllib.error.URLError as error:
        raise ConnectionError(str(error.reason)) from None
    except http.client.HTTPException as error:
        raise ConnectionError(f"{type(error).__name__}: {error}") from None


def _lower(headers) -> dict[str, str]:
    return {name.lower(): value for name, value in (headers or {}).items()}


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


class Sender:
    """Sends batches; retries what can be retried, splits what is too large, stops on refusals."""

    def __init__(
        self,
        url: str,
        device_id: str,
        device_key: str,
        compress: bool = True,
        timeout: float = 30.0,
        max_retries: int = 10,
        first_backoff: float = 1.0,
        max_backoff: float = 60.0,
        post=urllib_post,
        sleep=time.sleep,
        log=None,
    ):
        self.url = url.rstrip("/") + BATCH_PATH
        self.device_id, self.device_key = device_id, device_key
        self.compress, self.timeout = compress, timeout
        self.max_retries = max_retries
        self.first_backoff, self.max_backoff = first_backoff, max_backoff
        self.post, self.sleep = post, sleep
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.retries = 0

    def headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "airq-gateway/1",
            "X-Device-ID": self.device_id,
            "X-Device-Key": self.device_key,
        }
        if self.compress:
            headers["Content-Encoding"] = "gzip"
        return headers

    def send(self, batch: list[tuple[int, dict]]) -> int:
        """Sends ``batch`` ((line number, reading) pairs); returns how many readings were stored."""
        raw = encode(batch)
        if len(raw) > MAX_BODY and len(batch) > 1:
            middle = len(batch) // 2
            return self.send(batch[:middle]) + self.send(batch[middle:])
        body = gzip.compress(raw, compresslevel=6) if self.compress else raw
        backoff = self.first_backoff
        attempt = 0
        while True:
            try:
                answer = self.post(self.url, body, self.headers(), self.timeout)
            except OSError as error:  # ConnectionError, TimeoutError, socket errors
                problem, wait = f"network error ({str(error) or type(error).__name__})", None
            else:
                if answer.status == 201:
                    return self._stored(batch, answer)
                if answer.status == 413 and len(batch) > 1:
                    self.log(f"413: {len(batch)} readings are too large for one request, splitting")
                    middle = len(batch) // 2
                    return self.send(batch[:middle]) + self.send(batch[middle:])
                if not (answer.status in (408, 429) or answer.status >= 500):
                    raise Refused(describe(answer, batch, self.compress))
                problem = f"{answer.status} {answer.json().get('title') or ''}".strip()
                wait = retry_after(answer.headers.get("retry-after"))
            attempt += 1
            if self.max_retries and attempt > self.max_retries:
                raise GaveUp(
                    f"gave up on a batch of {len(batch)} readings (lines {lines(batch)}) after "
                    f"{attempt} attempts, the last one: {problem}. It may or may not be stored; "
                    "sending the same input again is safe (measured_at deduplicates)."
                )
            if wait is None:
                # Exponential backoff with jitter, so a fleet does not come back all at once.
                wait = backoff * random.uniform(0.5, 1.0)
                backoff = min(backoff * 2, self.max_backoff)
            self.retries += 1
            self.log(f"{problem}: sending the same {len(batch)} readings again in {wait:.1f} s")
            self.sleep(wait)

    def _stored(self, batch: list[tuple[int, dict]], answer: Answer) -> int:
        data = answer.json().get("data")
        count = data.get("count") if isinstance(data, dict) else None
        if count != len(batch):
            # The contract says count = readings sent; say so loudly rather than guess.
            self.log(f"warning: sent {len(batch)} readings, the server acknowledged {count}")
        return count if isinstance(count, int) else len(batch)


def encode(batch: list[tuple[int, dict]]) -> bytes:
    """The request body of a batch."""
    return json.dumps(
        {"readings": [reading for _, reading in batch]}, separators=(",", ":")
    ).encode()


def lines(batch: list[tuple[int, dict]]) -> str:
    first, last = batch[0][0], batch[-1][0]
    return str(first) if first == last else f"{first}-{last}"


_INDEX = re.compile(r"^readings\[(\d+)\]\.?(.*)$")


def describe(answer: Answer, batch: list[tuple[int, dict]], compressed: bool) -> str:
    """Why the server refused a batch, with a 422's field errors mapped to input lines."""
    problem = answer.json()
    title = problem.get("title") or http.client.responses.get(answer.status, "")
    text = [
        f"the server refused a batch of {len(batch)} readings (lines {lines(batch)}): "
        f"{answer.status} {title}"
    ]
    if problem.get("detail"):
        text.append(f"  {problem['detail']}")
    for error in problem.get("errors") or []:
        name = str(error.get("name", ""))
        match = _INDEX.match(name)
        where = name
        if match and int(match.group(1)) < len(batch):
            where = f"line {batch[int(match.group(1))][0]}: {match.group(2) or '(the reading)'}"
        text.append(f"  {where}: {error.get('code', '')}: {error.get('detail', '')}")
    if answer.status == 401:
        text.append(
            "  check --device-id / --device-key (AIRQ_DEVICE_ID / AIRQ_DEVICE_KEY); "
            "a rotated key stops working at once"
        )
    elif answer.status == 404:
        text.append(f"  does the server at this URL have {BATCH_PATH}? (airq with batch uploads)")
    elif answer.status in (400, 415) and compressed:
        text.append("  if the server does not take gzip request bodies, run with --no-gzip")
    return "\n".join(text)


# --- Input ---------------------------------------------------------------------------------------

_EOF = object()


def open_input(path: str, baud: int | None):
    """The line source: stdin for ``-``, else the file or device at ``path``."""
    if path == "-":
        return sys.stdin
    source = open(path, encoding="utf-8", errors="replace", newline="")
    if baud is not None:
        configure_serial(source.fileno(), baud)
    return source


def configure_serial(fd: int, baud: int) -> None:
    """Raw mode at ``baud`` for a serial port (POSIX termios; no pyserial needed)."""
    import termios
    import tty

    if not os.isatty(fd):
        raise OSError("--baud given but the input is not a terminal device")
    speed = getattr(termios, f"B{baud}", None)
    if speed is None:
        raise OSError(f"unsupported baud rate {baud}")
    tty.setraw(fd)
    attributes = termios.tcgetattr(fd)
    attributes[4] = attributes[5] = speed  # ispeed, ospeed
    attributes[2] |= termios.CLOCAL | termios.CREAD
    termios.tcsetattr(fd, termios.TCSANOW, attributes)


def read_lines(source, lines_queue: queue.Queue) -> None:
    """Reader thread: (line number, text, time read) into the queue, then _EOF."""
    try:
        for number, text in enumerate(source, start=1):
            lines_queue.put((number, text, datetime.now(timezone.utc)))
    except OSError as error:
        lines_queue.put(error)
    lines_queue.put(_EOF)


# --- Main ----------------------------------------------------------------------------------------


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="airq_gateway.py",
        description="Forward readings (CSV lines) to airq's batch upload, retrying safely.",
        epilog=f"Line layout: {','.join(COLUMNS)}[,lat,lon]. See examples/gateway/README.md.",
    )
    add = parser.add_argument
    add("input", nargs="?", default="-", help="CSV file or serial device; - (default): stdin")
    add(
        "--url",
        default=env.get("AIRQ_GATEWAY_URL", "http://127.0.0.1:8080"),
        help="server base URL (env AIRQ_GATEWAY_URL; default %(default)s)",
    )
    add(
        "--device-id",
        default=env.get("AIRQ_DEVICE_ID"),
        help="X-Device-ID, dev_... (env AIRQ_DEVICE_ID)",
    )
    add(
        "--device-key",
        default=env.get("AIRQ_DEVICE_KEY"),
        help="X-Device-Key, sk_... (env AIRQ_DEVICE_KEY; prefer the variable: "
        "command lines are visible to other users)",
    )
    add(
        "--batch-size",
        type=int,
        default=env.get("AIRQ_GATEWAY_BATCH_SIZE", "100"),
        help=f"readings per request, 1-{MAX_READINGS} "
        "(env AIRQ_GATEWAY_BATCH_SIZE; default %(default)s)",
    )
    add(
        "--max-wait",
        type=float,
        default=30.0,
        help="seconds a reading may wait for its batch to fill (default %(default)s)",
    )
    add(
        "--no-gzip",
        dest="gzip",
        action="store_false",
        help="send plain JSON instead of gzip-compressed bodies",
    )
    add("--timeout", type=float, default=30.0, help="seconds per request (default %(default)s)")
    add(
        "--max-retries",
        type=int,
        default=10,
        help="retries of one batch before giving up; 0: forever (default %(default)s)",
    )
    add(
        "--max-backoff",
        type=float,
        default=60.0,
        help="longest pause between two retries, seconds (default %(default)s)",
    )
    add("--baud", type=int, help="set the input serial port to raw mode at this speed")
    add("--pms-provider", default="PMS5003", help="pms_data.provider (default %(default)s)")
    add(
        "--climate-provider",
        default="BME280",
        help="temperature_data.provider (default %(default)s)",
    )
    add("--location-provider", default="gateway", help="location.provider (default %(default)s)")
    add(
        "--dry-run",
        action="store_true",
        help="print each batch's JSON body on stdout, one per line, instead of sending",
    )
    add("--quiet", action="store_true", help="no progress lines, only problems and the summary")
    args = parser.parse_args(argv)
    if not 1 <= args.batch_size <= MAX_READINGS:
        parser.error(f"--batch-size must be 1 to {MAX_READINGS}")
    if args.max_wait < 0 or args.timeout <= 0 or args.max_retries < 0 or args.max_backoff <= 0:
        parser.error("--max-wait, --timeout, --max-retries and --max-backoff must be positive")
    for name in ("pms_provider", "climate_provider", "location_provider"):
        if not 1 <= len(getattr(args, name)) <= 50:
            parser.error(f"--{name.replace('_', '-')} must have 1 to 50 characters")
    if not args.dry_run and not (args.device_id and args.device_key):
        parser.error(
            "the device's credentials are needed: --device-id and --device-key "
            "(or AIRQ_DEVICE_ID and AIRQ_DEVICE_KEY)"
        )
    if not args.url.startswith(("http://", "https://")):
        parser.error("--url must start with http:// or https://")
    return args


def run(args: argparse.Namespace, source, out=sys.stdout, sender: Sender | None = None) -> int:
    """Reads ``source`` to the end, sending batches; returns the exit status."""

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    parser = LineParser(Providers(args.pms_provider, args.climate_provider, args.location_provider))
    if sender is None and not args.dry_run:
        sender = Sender(
            args.url,
            args.device_id,
            args.device_key,
            compress=args.gzip,
            timeout=args.timeout,
            max_retries=args.max_retries,
            max_backoff=args.max_backoff,
            log=say,
        )
    lines_queue: queue.Queue = queue.Queue(maxsize=100_000)
    threading.Thread(target=read_lines, args=(source, lines_queue), daemon=True).start()

    pending: list[tuple[int, dict]] = []
    oldest = 0.0
    sent = batches = skipped = 0

    def flush() -> None:
        nonlocal sent, batches
        if not pending:
            return
        batch = pending[:]
        pending.clear()
        if args.dry_run:
            out.write(encode(batch).decode() + "\n")
            out.flush()
            stored = len(batch)
        else:
            stored = sender.send(batch)
        sent += stored
        batches += 1
        if not args.quiet and not args.dry_run:
            say(f"stored {stored} readings (lines {lines(batch)}); {sent} so far")

    try:
        while True:
            timeout = None if not pending else max(0.0, oldest + args.max_wait - time.monotonic())
            try:
                item = lines_queue.get(timeout=timeout)
            except queue.Empty:
                flush()
                continue
            if item is _EOF:
                flush()
                break
            if isinstance(item, OSError):
                flush()
                say(f"error reading {args.input}: {item}")
                return EXIT_INPUT
            number, text, read_at = item
            try:
                reading = parser.parse(text, read_at)
            except LineError as error:
                skipped += 1
                say(f"line {number}: skipped: {error}")
                continue
            if reading is None:
                continue
            if not pending:
                oldest = time.monotonic()
            pending.append((number, reading))
            if len(pending) >= args.batch_size:
                flush()
    except Refused as error:
        say(str(error))
        say(f"stopped: {sent} readings were stored before this batch; later lines were not sent")
        return EXIT_REFUSED
    except GaveUp as error:
        say(str(error))
        say(f"stopped: {sent} readings were stored before this batch")
        return EXIT_GAVE_UP
    except KeyboardInterrupt:
        say(f"interrupted: {sent} readings stored, {len(pending)} read but not sent")
        return 130
    verb = "printed" if args.dry_run else "stored"
    extra = f", {sender.retries} retries" if sender is not None else ""
    plural = "" if batches == 1 else "es"
    say(f"done: {sent} readings {verb} in {batches} batch{plural}{extra}; lines skipped: {skipped}")
    return EXIT_SKIPPED if skipped else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        source = open_input(args.input, args.baud)
    except OSError as error:
        print(f"cannot read {args.input}: {error}", file=sys.stderr)
        return EXIT_INPUT
    try:
        return run(args, source)
    finally:
        if source is not sys.stdin:
            source.close()


if __name__ == "__main__":
    sys.exit(main())
