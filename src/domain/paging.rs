//! Paging of the owner's device list: `limit` and the opaque `cursor`, parsed at the edge.
//!
//! The order is the unpaged list's: `created_at`, then `id`, which both device stores serve from
//! their index `devices_by_owner (owner, created_at, id)`. A cursor is the sort key of the last
//! device of a page, and the next page is the owner's devices after that key: a seek, not an
//! offset, so a device added or deleted between two pages moves no other device. None is seen
//! twice, none that stays is skipped, and one added meanwhile appears when its key is still ahead.
//!
//! A cursor is only ever a position in the caller's own list: the stores seek within the owner's
//! devices, so a cursor taken from another owner's list (or made up) reveals nothing of theirs.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Datelike as _, Utc};
use uuid::Uuid;

use super::device::{Device, DeviceUuid};
use super::field_errors::{Code, FieldErrors, In};
use super::query::QueryParams;

/// The name of the page size parameter.
pub const LIMIT: &str = "limit";
/// The name of the cursor parameter.
pub const CURSOR: &str = "cursor";
/// The largest page.
pub const MAX_LIMIT: u16 = 1000;

/// Bytes of a cursor's key: `created_at` (microseconds since the epoch, big-endian i64), then the
/// id's 16 bytes.
const KEY_BYTES: usize = 24;
/// Bytes of the check that follows the key in an encoded cursor.
const CHECK_BYTES: usize = 3;
/// Bytes of an encoded cursor: 36 characters of base64, without padding.
const CURSOR_BYTES: usize = KEY_BYTES + CHECK_BYTES;
/// The blake3 key-derivation context of the check.
const CHECK_CONTEXT: &str = "airq 2026 device list cursor v1";

/// One page of the owner's devices, as asked for: at most `limit` devices after `after` (from
/// the first when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePage {
    limit: u16,
    after: Option<DeviceCursor>,
}

/// The sort key of a device in the list, `(created_at, id)`: where a page ends and the next
/// begins. Its text is opaque to clients: URL-safe base64 (36 characters) of the key and a check
/// of 3 bytes, so that a cursor damaged or edited on its way back is refused rather than read as
/// another position. The check has no secret and is not meant to stop forgery: a made-up cursor
/// is a position in the caller's own list, like any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCursor {
    created_at: DateTime<Utc>,
    id: DeviceUuid,
}

/// The devices of one page, and where the next begins while more remain.
#[derive(Debug, Clone)]
pub struct PagedDevices {
    /// At most `limit` devices, in list order.
    pub devices: Vec<Device>,
    /// The key of the last device, when more devices follow it.
    pub next: Option<DeviceCursor>,
}

impl DevicePage {
    /// `limit` (an integer from 1 to [`MAX_LIMIT`]) and `cursor` (from the last page).
    /// `Ok(None)` without a `limit`: the whole list, as the spec has it. A `cursor` without a
    /// `limit` is refused (`required` on `limit`) rather than ignored, since it means the client
    /// dropped the limit its `next` link carried. An empty value counts as absent.
    pub fn parse(params: &QueryParams<'_>) -> Result<Option<Self>, FieldErrors> {
        let mut errors = FieldErrors::new();
        let limit = params
            .get(LIMIT)
            .filter(|text| !text.is_empty())
            .map(|text| parse_limit(text, &mut errors));
        let cursor = params
            .get(CURSOR)
            .filter(|text| !text.is_empty())
            .map(|text| {
                let cursor = DeviceCursor::decode(text);
                if cursor.is_none() {
                    errors.push(
                        In::Query,
                        CURSOR,
                        Code::Format,
                        "`cursor` is damaged or not one this server handed out: pass the `cursor` \
                         of the last page's `next` link unchanged",
                    );
                }
                cursor
            });
        if cursor.is_some() && limit.is_none() {
            errors.push(
                In::Query,
                LIMIT,
                Code::Required,
                format!(
                    "`limit` (1 to {MAX_LIMIT}) is required with `cursor`, as in the last \
                     page's `next` link"
                ),
            );
        }
        // Without faults, every value given parsed.
        errors.into_result(|| {
            limit.flatten().map(|limit| Self {
                limit,
                after: cursor.flatten(),
            })
        })
    }

    /// At most this many devices.
    pub fn limit(&self) -> u16 {
        self.limit
    }

    /// The devices after this key (`None`: from the first).
    pub fn after(&self) -> Option<DeviceCursor> {
        self.after
    }

    /// How many devices a store reads for the page: one more than the page holds, so that
    /// [`Self::finish`] knows whether more remain.
    pub fn fetch(&self) -> u32 {
        u32::from(self.limit) + 1
    }

    /// The page of the devices a store read (at most [`Self::fetch`], in list order, after
    /// [`Self::after`]): the first `limit`, and the next page's cursor when there were more.
    pub fn finish(&self, mut devices: Vec<Device>) -> PagedDevices {
        let limit = usize::from(self.limit);
        let more = devices.len() > limit;
        devices.truncate(limit);
        let next = if more {
            devices.last().map(DeviceCursor::of)
        } else {
            None
        };
        PagedDevices { devices, next }
    }
}

/// An integer from 1 to [`MAX_LIMIT`]; `type` unless it is digits with an optional `-`, else
/// `minimum` / `maximum` (digits beyond any integer type count as too large).
fn parse_limit(text: &str, errors: &mut FieldErrors) -> Option<u16> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        errors.push(
            In::Query,
            LIMIT,
            Code::Type,
            format!("`limit` must be an integer from 1 to {MAX_LIMIT}, not {text:?}"),
        );
        return None;
    }
    let value = digits.parse::<u64>().unwrap_or(u64::MAX);
    if negative || value < 1 {
        errors.push(
            In::Query,
            LIMIT,
            Code::Minimum,
            format!("`limit` must be at least 1, not {text}"),
        );
        return None;
    }
    match u16::try_from(value) {
        Ok(limit) if limit <= MAX_LIMIT => Some(limit),
        _ => {
            errors.push(
                In::Query,
                LIMIT,
                Code::Maximum,
                format!("`limit` must be at most {MAX_LIMIT}, not {text}"),
            );
            None
        }
    }
}

impl DeviceCursor {
    /// The key of a stored device (whose `created_at` the stores keep to the microsecond).
    pub fn of(device: &Device) -> Self {
        Self {
            created_at: device.created_at,
            id: device.id,
        }
    }

    /// The `created_at` of the key.
    pub fn created_at(&self) -> DateTime<Utc> {
        self.created_at
    }

    /// The `id` of the key.
    pub fn id(&self) -> DeviceUuid {
        self.id
    }

    /// The cursor's text: URL-safe base64, so it goes into a query and a `Link` as it is.
    pub fn encode(&self) -> String {
        let mut bytes = [0_u8; CURSOR_BYTES];
        bytes[..8].copy_from_slice(&self.created_at.timestamp_micros().to_be_bytes());
        bytes[8..KEY_BYTES].copy_from_slice(self.id.as_uuid().as_bytes());
        let check = check(&bytes[..KEY_BYTES]);
        bytes[KEY_BYTES..].copy_from_slice(&check);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The key behind a cursor's text, or `None` when it is not one [`Self::encode`] wrote (not
    /// base64, another length, a check that does not match, an instant outside the years 1 to
    /// 9999).
    pub fn decode(text: &str) -> Option<Self> {
        let bytes: [u8; CURSOR_BYTES] = URL_SAFE_NO_PAD.decode(text).ok()?.try_into().ok()?;
        let (key, sent_check) = bytes.split_at(KEY_BYTES);
        if check(key) != sent_check {
            return None;
        }
        let (micros, id) = key.split_at(8);
        let created_at =
            DateTime::from_timestamp_micros(i64::from_be_bytes(micros.try_into().ok()?))?;
        let id = Uuid::from_bytes(id.try_into().ok()?);
        (1..=9999).contains(&created_at.year()).then_some(Self {
            created_at,
            id: DeviceUuid::from_uuid(id),
        })
    }
}

/// The check of a cursor's key: the first bytes of its blake3 hash in the cursor's own context.
fn check(key: &[u8]) -> [u8; CHECK_BYTES] {
    let hash = blake3::Hasher::new_derive_key(CHECK_CONTEXT)
        .update(key)
        .finalize();
    let mut check = [0_u8; CHECK_BYTES];
    check.copy_from_slice(&hash.as_bytes()[..CHECK_BYTES]);
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DeviceFlags, DeviceId, DeviceName, OwnerId};

    fn parse(query: &str) -> Result<Option<DevicePage>, Vec<(String, Code)>> {
        DevicePage::parse(&QueryParams::parse(Some(query))).map_err(|errors| {
            errors
                .as_slice()
                .iter()
                .map(|error| (error.name.clone(), error.code))
                .collect()
        })
    }

    fn fault(name: &str, code: Code) -> (String, Code) {
        (name.to_owned(), code)
    }

    fn cursor() -> DeviceCursor {
        DeviceCursor {
            created_at: DateTime::from_timestamp_micros(1_795_000_000_123_456).unwrap_or_default(),
            id: DeviceUuid::generate(),
        }
    }

    #[test]
    fn without_a_limit_the_whole_list_is_asked_for() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("limit=&cursor="), Ok(None));
        assert_eq!(parse("other=1"), Ok(None));
    }

    #[test]
    fn a_limit_from_1_to_1000_is_a_first_page() {
        for (query, limit) in [
            ("limit=1", 1),
            ("limit=1000", 1000),
            ("limit=010&cursor=", 10),
        ] {
            assert_eq!(
                parse(query),
                Ok(Some(DevicePage { limit, after: None })),
                "{query}"
            );
        }
    }

    #[test]
    fn a_bad_limit_is_refused_with_its_code() {
        for (text, code) in [
            ("0", Code::Minimum),
            ("-0", Code::Minimum),
            ("-5", Code::Minimum),
            ("1001", Code::Maximum),
            ("65536", Code::Maximum),
            ("99999999999999999999999", Code::Maximum),
            ("x", Code::Type),
            ("1.5", Code::Type),
            ("+5", Code::Type),
            (" 5", Code::Type),
            ("-", Code::Type),
            ("1e3", Code::Type),
        ] {
            let query = form_urlencoded::Serializer::new(String::new())
                .append_pair("limit", text)
                .finish();
            assert_eq!(parse(&query), Err(vec![fault(LIMIT, code)]), "{text:?}");
        }
    }

    #[test]
    fn a_cursor_survives_its_text() {
        let cursor = cursor();
        let text = cursor.encode();
        assert_eq!(text.len(), 36);
        assert!(text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'));
        assert_eq!(DeviceCursor::decode(&text), Some(cursor));
        assert_eq!(
            parse(&format!("limit=5&cursor={text}")),
            Ok(Some(DevicePage {
                limit: 5,
                after: Some(cursor)
            }))
        );
    }

    #[test]
    fn a_tampered_cursor_is_refused_as_a_format_fault() {
        let text = cursor().encode();
        let mut far_future = [0x7f_u8; CURSOR_BYTES];
        let far_check = check(&far_future[..KEY_BYTES]);
        far_future[KEY_BYTES..].copy_from_slice(&far_check);
        let mut edited = text.clone().into_bytes();
        edited[20] = if edited[20] == b'A' { b'B' } else { b'A' };
        for bad in [
            "x".to_owned(),
            format!("{text}A"),
            format!("{text}=="),
            text[..35].to_owned(),
            text.replace(|c: char| c.is_ascii_alphanumeric(), "+"),
            "A".repeat(36),
            String::from_utf8(edited).unwrap_or_default(),
            URL_SAFE_NO_PAD.encode(far_future),
        ] {
            assert_eq!(DeviceCursor::decode(&bad), None, "{bad}");
            let query = form_urlencoded::Serializer::new(String::new())
                .append_pair("limit", "5")
                .append_pair("cursor", &bad)
                .finish();
            assert_eq!(parse(&query), Err(vec![fault(CURSOR, Code::Format)]));
        }
    }

    #[test]
    fn the_documented_bounds_and_examples_are_the_parsers() {
        let document: serde_json::Value =
            serde_json::from_str(include_str!("../http/openapi.json")).unwrap_or_default();
        let components = &document["components"];
        let limit = &components["parameters"]["DeviceListLimit"]["schema"];
        assert_eq!(limit["minimum"], 1);
        assert_eq!(limit["maximum"], MAX_LIMIT);
        let example = components["parameters"]["DeviceListCursor"]["schema"]["examples"][0]
            .as_str()
            .unwrap_or_default();
        assert!(DeviceCursor::decode(example).is_some(), "{example:?}");
        let link = components["headers"]["Link-Next"]["schema"]["examples"][0]
            .as_str()
            .unwrap_or_default();
        assert!(link.contains(&format!("cursor={example}>")), "{link}");
        let readme = include_str!("../../README.md");
        assert!(readme.contains(&format!("cursor={example}>")), "README");
    }

    fn devices(count: usize) -> Option<Vec<Device>> {
        let owner = OwnerId::parse("alice")?;
        Some(
            (0..count)
                .map(|_| Device {
                    id: DeviceUuid::generate(),
                    device_id: DeviceId::generate(),
                    owner: owner.clone(),
                    name: DeviceName::from_stored("sensor".to_owned()),
                    flags: DeviceFlags::default(),
                    created_at: cursor().created_at,
                    updated_at: cursor().created_at,
                })
                .collect(),
        )
    }

    #[test]
    fn a_page_holds_its_limit_and_points_past_its_last_device_while_more_remain() {
        let page = DevicePage {
            limit: 3,
            after: None,
        };
        assert_eq!(page.fetch(), 4);
        let read = devices(4).unwrap_or_default();
        let paged = page.finish(read.clone());
        assert_eq!(paged.devices.len(), 3);
        assert_eq!(paged.next, Some(DeviceCursor::of(&read[2])));
        for count in [0, 1, 3] {
            let paged = page.finish(read[..count].to_vec());
            assert_eq!(paged.devices.len(), count);
            assert_eq!(paged.next, None, "{count} read: the last page");
        }
    }

    #[test]
    fn a_cursor_needs_its_limit() {
        let text = cursor().encode();
        assert_eq!(
            parse(&format!("cursor={text}")),
            Err(vec![fault(LIMIT, Code::Required)])
        );
        assert_eq!(
            parse("cursor=x"),
            Err(vec![
                fault(CURSOR, Code::Format),
                fault(LIMIT, Code::Required)
            ])
        );
        assert_eq!(
            parse("limit=0&cursor=x"),
            Err(vec![
                fault(LIMIT, Code::Minimum),
                fault(CURSOR, Code::Format)
            ])
        );
    }
}
