"""Calls the real server through the Python client openapi-python-client generated, with its
default settings, from src/http/openapi.json (see .ci/clients): health, a registration, an upload,
a read and a device page. Any answer other than the documented success fails.

    python clients_smoke.py BASE_URL OWNER_TOKEN
"""

import sys

from airq_client import AuthenticatedClient, Client
from airq_client.api.air_quality import get_device_current_air_quality
from airq_client.api.devices import register_device
from airq_client.api.pages import get_device_page
from airq_client.api.readings import upload_reading
from airq_client.api.service import get_health
from airq_client.models import DeviceRegistration, PmsData, SensorReading, TemperatureData

base, token = sys.argv[1], sys.argv[2]
anyone = Client(base_url=base)

health = get_health.sync_detailed(client=anyone)
assert health.status_code == 200, health

owner = AuthenticatedClient(base_url=base, token=token)
registered = register_device.sync_detailed(
    client=owner,
    body=DeviceRegistration(name="generated client", is_public=True, is_location_public=True),
)
assert registered.status_code == 201, registered
device = registered.parsed.data

# The device's credentials are two headers: the key as the "token" of its own header.
sensor = AuthenticatedClient(
    base_url=base,
    token=device.device_key,
    prefix="",
    auth_header_name="X-Device-Key",
    headers={"X-Device-ID": device.device_id},
)
reading = SensorReading(
    aqi=42,
    pms_data=PmsData(pm1_0=5.1, pm2_5=9.8, pm10_0=14.2, provider="PMS5003"),
    temperature_data=TemperatureData(temperature=21.5, heat_index=21.9, humidity=48, provider="BME280"),
)
uploaded = upload_reading.sync_detailed(client=sensor, body=reading)
assert uploaded.status_code == 201, uploaded

current = get_device_current_air_quality.sync_detailed(str(device.id), client=owner)
assert current.status_code == 200, current
assert current.parsed.data.aqi == 42, current.parsed

page = get_device_page.sync_detailed(str(device.id), client=anyone)
assert page.status_code == 200, page
assert b"generated client" in page.content, page.content[:200]

print("the generated Python client called health, a registration, an upload, a read and a device page")
