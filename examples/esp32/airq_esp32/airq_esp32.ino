// airq_esp32: an ESP32 air-quality station for airq.
//
// PMS5003 (particulate matter, UART) + BME280 (temperature and humidity, I2C). Every
// SAMPLE_INTERVAL_MS the sketch averages the PMS5003 frames it received, reads the BME280,
// computes the US EPA AQI from PM2.5 and the heat index, stamps the reading with the time from
// NTP (measured_at) and puts it in a ring buffer in RAM. From that buffer it uploads batches to
// POST /api/v1/data/batch. While Wi-Fi or the server is away, readings wait in the buffer; when
// it is full, the oldest reading is dropped.
//
// Resending is safe: airq keys a reading that carries measured_at by (device, measured_at) and
// replaces instead of adding. So after a timeout, a lost connection, a 5xx, 408 or 429 the
// sketch simply sends the same readings again. It drops readings only after a 4xx that is not
// 408/429 (and not 401/403/404, which are configuration problems: it keeps the readings and
// tries again every CONFIG_RETRY_MS).
//
// Settings are below. Wiring, libraries and the server's answers: README.md beside this folder.
// This sketch has not been compiled by the airq project's CI (no Arduino toolchain there).

#include <Arduino.h>
#include <HTTPClient.h>
#include <WiFi.h>
#include <WiFiClient.h>
#include <WiFiClientSecure.h>
#include <Wire.h>
#include <math.h>
#include <sys/time.h>
#include <time.h>

#include <Adafruit_BME280.h>  // Library Manager: "Adafruit BME280 Library"

#include "esp_timer.h"

// ===================================== Settings =====================================

// Wi-Fi (2.4 GHz).
const char* WIFI_SSID = "your-network";
const char* WIFI_PASSWORD = "your-password";

// The airq server: base URL without a trailing slash. http:// or https:// (https needs ROOT_CA).
const char* SERVER_URL = "http://192.168.1.10:8080";
// For https://: the PEM certificate of the root CA that signed the server's certificate.
// Left empty, the sketch refuses to send over https rather than skip verification.
const char* ROOT_CA = "";

// The device's credentials, from POST /api/v1/devices (the key is shown only once).
const char* DEVICE_ID = "dev_xxxxxxxxxxxxxxxxxxxxxxxx";
const char* DEVICE_KEY = "sk_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

// A fixed location sent with every reading (a station does not move). false: no location.
const bool SEND_LOCATION = false;
const double LATITUDE = 52.520008;
const double LONGITUDE = 13.404954;

// Timing.
const uint32_t SAMPLE_INTERVAL_MS = 60UL * 1000;   // one reading per minute
const uint32_t SEND_EVERY_MS = 5UL * 60 * 1000;     // upload at least this often...
const uint16_t BATCH_SIZE = 30;                     // ...or as soon as this many wait (1..1000)
const uint16_t BUFFER_CAPACITY = 1000;              // readings kept while offline (~16 h at 1/min)
const uint32_t FIRST_BACKOFF_MS = 5UL * 1000;       // first pause after a failed upload, doubled...
const uint32_t MAX_BACKOFF_MS = 5UL * 60 * 1000;    // ...up to this
const uint32_t CONFIG_RETRY_MS = 10UL * 60 * 1000;  // after 401/403/404
const uint32_t HTTP_CONNECT_TIMEOUT_MS = 10UL * 1000;
const uint16_t HTTP_TIMEOUT_MS = 15000;              // waiting for the answer
const uint32_t PMS_WARMUP_MS = 30UL * 1000;          // the PMS5003 needs 30 s after power-on

// NTP (measured_at is UTC; no time zone needed).
const char* NTP_SERVER_1 = "pool.ntp.org";
const char* NTP_SERVER_2 = "time.nist.gov";

// Pins (ESP32 DevKit). PMS5003 TX -> PMS_RX_PIN; PMS5003 RX <- PMS_TX_PIN (unused, optional).
const int PMS_RX_PIN = 16;
const int PMS_TX_PIN = 17;
const int I2C_SDA_PIN = 21;
const int I2C_SCL_PIN = 22;
const uint8_t BME280_ADDRESS = 0x76;  // 0x77 on many breakout boards: try it if begin() fails

// Provider names the server stores with each reading (1 to 50 characters).
const char* PMS_PROVIDER = "PMS5003";
const char* CLIMATE_PROVIDER = "BME280";
const char* LOCATION_PROVIDER = "fixed";

// =================================== End of settings ===================================

// ---------------------------------------------------------------------------------------
// Readings and the ring buffer

struct Reading {
  int64_t epochMs;  // measured_at in ms since 1970 (UTC); 0 until the clock is known
  int64_t bootUs;   // when it was taken, in µs since boot (to stamp it once NTP answers)
  float pm1_0;
  float pm2_5;
  float pm10_0;
  float temperature;
  float humidity;
  float heatIndex;
  int16_t aqi;
};

Reading ring[BUFFER_CAPACITY];
uint16_t ringHead = 0;   // index of the oldest reading
uint16_t ringCount = 0;  // readings in the buffer
uint32_t droppedFull = 0;     // oldest readings overwritten because the buffer was full
uint32_t droppedRefused = 0;  // readings the server refused (4xx other than 408/429/401/403/404)
uint32_t storedTotal = 0;     // readings acknowledged with 201

Reading& readingAt(uint16_t index) { return ring[(ringHead + index) % BUFFER_CAPACITY]; }

void pushReading(const Reading& reading) {
  if (ringCount == BUFFER_CAPACITY) {
    ringHead = (ringHead + 1) % BUFFER_CAPACITY;
    ringCount--;
    droppedFull++;
  }
  ring[(ringHead + ringCount) % BUFFER_CAPACITY] = reading;
  ringCount++;
}

void popReadings(uint16_t count) {
  if (count > ringCount) count = ringCount;
  ringHead = (ringHead + count) % BUFFER_CAPACITY;
  ringCount -= count;
}

// ---------------------------------------------------------------------------------------
// Time

// Any time after 2023-11-14 means NTP has answered (the RTC starts at 1970).
bool clockKnown() { return time(nullptr) > 1700000000; }

int64_t nowEpochMs() {
  struct timeval now;
  gettimeofday(&now, nullptr);
  return (int64_t)now.tv_sec * 1000 + now.tv_usec / 1000;
}

// Readings taken before NTP answered get their time now, from when they were taken. Each
// reading is stamped exactly once, so a resent reading always carries the same measured_at.
void stampUnstampedReadings() {
  if (!clockKnown()) return;
  int64_t nowMs = nowEpochMs();
  int64_t nowUs = esp_timer_get_time();
  for (uint16_t i = 0; i < ringCount; i++) {
    Reading& reading = readingAt(i);
    if (reading.epochMs == 0) reading.epochMs = nowMs - (nowUs - reading.bootUs) / 1000;
  }
}

// RFC 3339 in UTC with milliseconds: 2026-11-21T14:00:00.123Z
void formatTime(int64_t epochMs, char* out, size_t size) {
  time_t seconds = (time_t)(epochMs / 1000);
  struct tm utc;
  gmtime_r(&seconds, &utc);
  char whole[24];
  strftime(whole, sizeof whole, "%Y-%m-%dT%H:%M:%S", &utc);
  snprintf(out, size, "%s.%03dZ", whole, (int)(epochMs % 1000));
}

// ---------------------------------------------------------------------------------------
// AQI and heat index

// US EPA PM2.5 breakpoints (24-hour, as revised in 2024): concentration in µg/m³, truncated to
// 0.1, mapped linearly onto the index range of its category.
struct Breakpoint {
  float concentrationLow, concentrationHigh;
  int indexLow, indexHigh;
};
const Breakpoint PM25_BREAKPOINTS[] = {
    {0.0f, 9.0f, 0, 50},        {9.1f, 35.4f, 51, 100},     {35.5f, 55.4f, 101, 150},
    {55.5f, 125.4f, 151, 200},  {125.5f, 225.4f, 201, 300}, {225.5f, 325.4f, 301, 500},
};

int aqiFromPm25(float pm2_5) {
  float c = floorf(pm2_5 * 10.0f) / 10.0f;
  if (c < 0) c = 0;
  for (const Breakpoint& bp : PM25_BREAKPOINTS) {
    if (c <= bp.concentrationHigh) {
      float index = (bp.indexHigh - bp.indexLow) / (bp.concentrationHigh - bp.concentrationLow) *
                        (c - bp.concentrationLow) +
                    bp.indexLow;
      return (int)lroundf(index);
    }
  }
  return 500;  // beyond the scale
}

// US National Weather Service heat index (Steadman's simple formula, then the Rothfusz
// regression with its adjustments from 80 °F). Below 20 °C the heat index is not defined;
// the air temperature is returned.
float heatIndexC(float celsius, float humidity) {
  if (celsius < 20.0f) return celsius;
  float t = celsius * 9.0f / 5.0f + 32.0f;
  float rh = humidity;
  float hi = 0.5f * (t + 61.0f + (t - 68.0f) * 1.2f + rh * 0.094f);
  if ((hi + t) / 2.0f >= 80.0f) {
    hi = -42.379f + 2.04901523f * t + 10.14333127f * rh - 0.22475541f * t * rh -
         0.00683783f * t * t - 0.05481717f * rh * rh + 0.00122874f * t * t * rh +
         0.00085282f * t * rh * rh - 0.00000199f * t * t * rh * rh;
    if (rh < 13.0f && t >= 80.0f && t <= 112.0f) {
      hi -= ((13.0f - rh) / 4.0f) * sqrtf((17.0f - fabsf(t - 95.0f)) / 17.0f);
    } else if (rh > 85.0f && t >= 80.0f && t <= 87.0f) {
      hi += ((rh - 85.0f) / 10.0f) * ((87.0f - t) / 5.0f);
    }
  }
  return (hi - 32.0f) * 5.0f / 9.0f;
}

// ---------------------------------------------------------------------------------------
// PMS5003: 32-byte frames in active mode (one every 1-2.3 s), 9600 baud.
// 0x42 0x4D, length (28), 13 big-endian words, checksum = sum of the first 30 bytes.
// Words 4-6 (bytes 10-15) are PM1.0, PM2.5, PM10 "under atmospheric environment" in µg/m³.

HardwareSerial pmsSerial(2);
uint8_t pmsFrame[32];
uint8_t pmsPosition = 0;
uint32_t pmsFrames = 0, pmsBadFrames = 0;
uint32_t pmsSum1_0 = 0, pmsSum2_5 = 0, pmsSum10_0 = 0;

uint16_t frameWord(uint8_t offset) { return ((uint16_t)pmsFrame[offset] << 8) | pmsFrame[offset + 1]; }

void pollPms() {
  while (pmsSerial.available() > 0) {
    uint8_t value = (uint8_t)pmsSerial.read();
    if (pmsPosition == 0 && value != 0x42) continue;  // wait for the first start byte
    if (pmsPosition == 1 && value != 0x4D) {          // not a frame: resynchronise
      pmsPosition = (value == 0x42) ? 1 : 0;
      continue;
    }
    pmsFrame[pmsPosition++] = value;
    if (pmsPosition < sizeof pmsFrame) continue;
    pmsPosition = 0;
    uint16_t sum = 0;
    for (uint8_t i = 0; i < 30; i++) sum += pmsFrame[i];
    if (frameWord(2) != 28 || sum != frameWord(30)) {
      pmsBadFrames++;
      continue;
    }
    if (millis() < PMS_WARMUP_MS) continue;  // values are not stable yet
    pmsSum1_0 += frameWord(10);
    pmsSum2_5 += frameWord(12);
    pmsSum10_0 += frameWord(14);
    pmsFrames++;
  }
}

// ---------------------------------------------------------------------------------------
// BME280

Adafruit_BME280 bme;
bool bmeReady = false;

bool startBme() {
  if (!bme.begin(BME280_ADDRESS, &Wire)) return false;
  // Forced mode, one measurement when asked: the weather-station setting (no self-heating).
  bme.setSampling(Adafruit_BME280::MODE_FORCED, Adafruit_BME280::SAMPLING_X1,
                  Adafruit_BME280::SAMPLING_X1, Adafruit_BME280::SAMPLING_X1,
                  Adafruit_BME280::FILTER_OFF);
  return true;
}

// ---------------------------------------------------------------------------------------
// Sampling

void takeSample() {
  if (pmsFrames == 0) {
    Serial.printf("sample skipped: no valid PMS5003 frame (%u bad) - check its wiring and 5 V\n",
                  (unsigned)pmsBadFrames);
    return;
  }
  if (!bmeReady) bmeReady = startBme();
  if (!bmeReady || !bme.takeForcedMeasurement()) {
    bmeReady = false;
    Serial.println("sample skipped: no BME280 - check its wiring and BME280_ADDRESS");
    return;
  }
  float temperature = bme.readTemperature();
  float humidity = bme.readHumidity();
  if (isnan(temperature) || isnan(humidity)) {
    Serial.println("sample skipped: the BME280 gave no value");
    return;
  }

  Reading reading;
  reading.bootUs = esp_timer_get_time();
  reading.epochMs = clockKnown() ? nowEpochMs() : 0;
  reading.pm1_0 = (float)pmsSum1_0 / pmsFrames;
  reading.pm2_5 = (float)pmsSum2_5 / pmsFrames;
  reading.pm10_0 = (float)pmsSum10_0 / pmsFrames;
  reading.temperature = temperature;
  reading.humidity = humidity;
  reading.heatIndex = heatIndexC(temperature, humidity);
  reading.aqi = (int16_t)aqiFromPm25(reading.pm2_5);
  pushReading(reading);
  pmsFrames = pmsSum1_0 = pmsSum2_5 = pmsSum10_0 = 0;

  Serial.printf("sample: PM2.5 %.1f ug/m3, AQI %d, %.1f C, %.0f %%, heat index %.1f C; "
                "buffered %u, stored %u, dropped %u (full) %u (refused)\n",
                reading.pm2_5, reading.aqi, temperature, humidity, reading.heatIndex,
                (unsigned)ringCount, (unsigned)storedTotal, (unsigned)droppedFull,
                (unsigned)droppedRefused);
}

// ---------------------------------------------------------------------------------------
// Uploading

// About 330 bytes per reading with a location; the rest is slack.
const size_t BODY_CAPACITY = (size_t)BATCH_SIZE * 400 + 64;
char body[BODY_CAPACITY];

// The JSON body {"readings":[...]} of the `count` oldest readings; its length, or -1.
int buildBody(uint16_t count) {
  size_t used = 0;
  int written = snprintf(body, BODY_CAPACITY, "{\"readings\":[");
  if (written < 0) return -1;
  used = (size_t)written;
  for (uint16_t i = 0; i < count; i++) {
    const Reading& r = readingAt(i);
    char measuredAt[32];
    formatTime(r.epochMs, measuredAt, sizeof measuredAt);
    written = snprintf(body + used, BODY_CAPACITY - used,
                       "%s{\"measured_at\":\"%s\",\"aqi\":%d,"
                       "\"pms_data\":{\"pm1_0\":%.1f,\"pm2_5\":%.1f,\"pm10_0\":%.1f,\"provider\":\"%s\"},"
                       "\"temperature_data\":{\"temperature\":%.2f,\"humidity\":%.1f,"
                       "\"heat_index\":%.2f,\"provider\":\"%s\"}",
                       i == 0 ? "" : ",", measuredAt, r.aqi, r.pm1_0, r.pm2_5, r.pm10_0,
                       PMS_PROVIDER, r.temperature, r.humidity, r.heatIndex, CLIMATE_PROVIDER);
    if (written < 0 || (size_t)written >= BODY_CAPACITY - used) return -1;
    used += (size_t)written;
    if (SEND_LOCATION) {
      written = snprintf(body + used, BODY_CAPACITY - used,
                         ",\"location\":{\"lat\":%.6f,\"lon\":%.6f,\"provider\":\"%s\"}", LATITUDE,
                         LONGITUDE, LOCATION_PROVIDER);
      if (written < 0 || (size_t)written >= BODY_CAPACITY - used) return -1;
      used += (size_t)written;
    }
    if (used + 1 >= BODY_CAPACITY) return -1;
    body[used++] = '}';
  }
  if (used + 3 > BODY_CAPACITY) return -1;
  body[used++] = ']';
  body[used++] = '}';
  body[used] = '\0';
  return (int)used;
}

WiFiClient plainClient;
WiFiClientSecure secureClient;

uint32_t lastStoredMs = 0;     // last 201 (or boot)
uint32_t nextAttemptMs = 0;    // no upload before this
bool waiting = false;          // nextAttemptMs is in force
uint32_t backoffMs = FIRST_BACKOFF_MS;
uint16_t batchLimit = BATCH_SIZE;  // halved after a 413
uint16_t singlesLeft = 0;          // after a refused batch: send this many one by one

// Waits before the next attempt: Retry-After when the server gave one, else the backoff
// (doubled each time, with jitter so a fleet does not come back all at once).
void pauseUploads(long retryAfterSeconds) {
  uint32_t pause;
  if (retryAfterSeconds >= 0) {
    pause = (uint32_t)min(retryAfterSeconds, 3600L) * 1000;
  } else {
    pause = backoffMs / 2 + (uint32_t)random((long)(backoffMs / 2) + 1);
    backoffMs = min(backoffMs * 2, MAX_BACKOFF_MS);
  }
  nextAttemptMs = millis() + pause;
  waiting = true;
  Serial.printf("upload: next attempt in %u s\n", (unsigned)(pause / 1000));
}

// Retry-After as delta seconds; -1 when absent or an HTTP date (then the backoff applies).
long retryAfterSeconds(HTTPClient& http) {
  String value = http.header("Retry-After");
  value.trim();
  if (value.length() == 0) return -1;
  for (size_t i = 0; i < value.length(); i++) {
    if (!isDigit(value[i])) return -1;
  }
  return value.toInt();
}

void upload() {
  if (ringCount == 0 || WiFi.status() != WL_CONNECTED || !clockKnown()) return;
  if (waiting && (int32_t)(millis() - nextAttemptMs) < 0) return;
  bool due = ringCount >= BATCH_SIZE || singlesLeft > 0 ||
             millis() - lastStoredMs >= SEND_EVERY_MS;
  if (!due) return;

  bool https = strncmp(SERVER_URL, "https://", 8) == 0;
  if (https && ROOT_CA[0] == '\0') {
    Serial.println("upload: https needs ROOT_CA in the settings; not sending");
    pauseUploads(CONFIG_RETRY_MS / 1000);
    return;
  }
  stampUnstampedReadings();
  uint16_t count = singlesLeft > 0 ? 1 : min(ringCount, batchLimit);
  int length = buildBody(count);
  if (length < 0) {
    Serial.println("upload: the body does not fit BODY_CAPACITY; sending fewer readings");
    batchLimit = count > 1 ? count / 2 : 1;
    return;
  }

  HTTPClient http;
  String url = String(SERVER_URL) + "/api/v1/data/batch";
  WiFiClient& client = https ? static_cast<WiFiClient&>(secureClient) : plainClient;
  if (!http.begin(client, url)) {
    Serial.println("upload: bad SERVER_URL");
    pauseUploads(CONFIG_RETRY_MS / 1000);
    return;
  }
  http.setConnectTimeout(HTTP_CONNECT_TIMEOUT_MS);
  http.setTimeout(HTTP_TIMEOUT_MS);
  http.addHeader("Content-Type", "application/json");
  http.addHeader("X-Device-ID", DEVICE_ID);
  http.addHeader("X-Device-Key", DEVICE_KEY);
  const char* wanted[] = {"Retry-After"};
  http.collectHeaders(wanted, 1);

  int status = http.POST((uint8_t*)body, (size_t)length);
  if (status == 201) {
    popReadings(count);
    storedTotal += count;
    if (singlesLeft > 0) singlesLeft--;
    lastStoredMs = millis();
    backoffMs = FIRST_BACKOFF_MS;
    waiting = false;
    Serial.printf("upload: 201, %u readings stored, %u still buffered\n", (unsigned)count,
                  (unsigned)ringCount);
  } else if (status < 0 || status == 408 || status == 429 || status >= 500) {
    // Unknown or temporary: the same readings go again later (same measured_at: no duplicates).
    if (status < 0) {
      Serial.printf("upload: %s\n", HTTPClient::errorToString(status).c_str());
    } else {
      Serial.printf("upload: %d\n", status);
    }
    pauseUploads(status > 0 ? retryAfterSeconds(http) : -1);
  } else if (status == 401 || status == 403 || status == 404) {
    // Credentials or URL: the readings are fine, the settings are not. Keep them.
    Serial.printf("upload: %d - check DEVICE_ID, DEVICE_KEY (a rotated key stops working at "
                  "once) and SERVER_URL; keeping the readings\n", status);
    pauseUploads(CONFIG_RETRY_MS / 1000);
  } else if (status == 413 && count > 1) {
    batchLimit = count / 2;
    Serial.printf("upload: 413, sending at most %u readings per request\n", (unsigned)batchLimit);
  } else if (count > 1) {
    // 400, 415, 422, ...: some reading of the batch is refused. Send them one by one, so only
    // the faulty ones are dropped.
    Serial.printf("upload: %d for %u readings, sending them one at a time: %s\n", status,
                  (unsigned)count, http.getString().substring(0, 300).c_str());
    singlesLeft = count;
  } else {
    Serial.printf("upload: %d, dropping one reading the server refuses: %s\n", status,
                  http.getString().substring(0, 300).c_str());
    popReadings(1);
    droppedRefused++;
    if (singlesLeft > 0) singlesLeft--;
  }
  http.end();
}

// ---------------------------------------------------------------------------------------
// Wi-Fi

uint32_t lastWifiAttemptMs = 0;

void keepWifi() {
  if (WiFi.status() == WL_CONNECTED) return;
  if (millis() - lastWifiAttemptMs < 30UL * 1000) return;
  lastWifiAttemptMs = millis();
  Serial.println("wifi: not connected, reconnecting");
  WiFi.disconnect();
  WiFi.begin(WIFI_SSID, WIFI_PASSWORD);
}

// ---------------------------------------------------------------------------------------

uint32_t lastSampleMs = 0;

void setup() {
  Serial.begin(115200);
  delay(200);
  Serial.println("\nairq_esp32 starting");

  pmsSerial.setRxBufferSize(1024);  // frames keep coming while an upload blocks
  pmsSerial.begin(9600, SERIAL_8N1, PMS_RX_PIN, PMS_TX_PIN);

  Wire.begin(I2C_SDA_PIN, I2C_SCL_PIN);
  bmeReady = startBme();
  if (!bmeReady) Serial.println("BME280 not found yet - check its wiring and BME280_ADDRESS");

  WiFi.mode(WIFI_STA);
  WiFi.setAutoReconnect(true);
  WiFi.begin(WIFI_SSID, WIFI_PASSWORD);
  lastWifiAttemptMs = millis();
  // SNTP keeps trying in the background and corrects the clock every hour.
  configTime(0, 0, NTP_SERVER_1, NTP_SERVER_2);

  if (strncmp(SERVER_URL, "https://", 8) == 0 && ROOT_CA[0] != '\0') {
    secureClient.setCACert(ROOT_CA);
  }
  lastSampleMs = millis();
  lastStoredMs = millis();
}

void loop() {
  pollPms();
  keepWifi();
  if (millis() - lastSampleMs >= SAMPLE_INTERVAL_MS) {
    lastSampleMs = millis();
    takeSample();
  }
  upload();
  delay(20);
}
