//! Events: what the Python validator (`validate.py`) accepts unchanged ("plain"), their dedup
//! keys, and the rows they become — with their text in one buffer per batch (`Texts`).

use std::borrow::Cow;

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

use crate::json::{write_members, write_value, J};

const TIME_FLOOR_MS: i128 = 31_536_000_000; // 1971-01-01T00:00:00Z
const MS_THRESHOLD: i128 = 10_000_000_000; // time values >= 1e10 are milliseconds
const INSERT_ID_MAX_BYTES: usize = 36;
pub const LIFTED: [&str; 5] = ["time", "distinct_id", "$insert_id", "token", "ip"];

/// `ImportLimits`, the validator's reserved ids, and the request's own numbers.
pub struct Intake {
    pub reserved_ids: Vec<String>, // `validate.RESERVED_IDS`, all lower case
    pub project_id: u64,
    pub now_ms: i64,
    pub body_bytes: usize,
    pub geo: bool, // a place can be found for an address: events with `ip` are the Python path's
    pub max_items: usize,
    pub max_event_bytes: usize,
    pub max_properties: usize,
    pub max_nested_keys: usize,
    pub max_depth: usize,
    pub max_array_len: usize,
    pub max_string_len: usize,
    pub max_future_seconds: i64,
}

/// One event as a row of the events table; its text is in the batch's `Texts`.
pub struct Row {
    pub project_id: u64,
    pub time_ms: i64,
    pub event: Span,
    pub distinct_id: Span,
    pub insert_id: Span,
    pub properties: Span, // the property JSON, as orjson writes it
    pub ip: Option<Span>,
    pub key: [u8; 16],
    pub hot: usize, // where this row's hot values start in `Texts::hot` (one span per hot column)
}

/// The text the rows refer to, written once per batch: names, ids, the property JSON of every
/// row and the hot columns' values, one buffer (no allocation per row).
#[derive(Default)]
pub struct Texts {
    pub bytes: Vec<u8>,
    pub hot: Vec<Span>,
}

#[derive(Clone, Copy)]
pub struct Span(pub usize, pub usize);

impl Texts {
    pub fn get(&self, span: Span) -> &[u8] {
        &self.bytes[span.0..span.1]
    }

    pub fn push(&mut self, b: &[u8]) -> Span {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        Span(start, self.bytes.len())
    }
}

pub fn chars_within(s: &str, max: usize) -> bool {
    s.len() <= max || s.chars().count() <= max
}

/// Python's `str.isspace()` for ASCII: what `str.strip()` removes.
fn py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

/// `s.strip().lower() in RESERVED_IDS` for an ASCII `s`.
fn reserved(s: &str, reserved_ids: &[String]) -> bool {
    let b = s.as_bytes();
    let (mut start, mut end) = (0, b.len());
    while start < end && py_space(b[start]) {
        start += 1;
    }
    while end > start && py_space(b[end - 1]) {
        end -= 1;
    }
    let norm = s[start..end].to_ascii_lowercase();
    reserved_ids.contains(&norm)
}

// -- "plain": what the Python path stores unchanged ------------------------------------------

/// A property value found at `depth` (a top-level property's value is at 1, its members at 2)
/// that the Python walk accepts without truncating anything.
fn plain_value(v: &J, depth: usize, lim: &Intake) -> bool {
    match v {
        J::Str(s) => chars_within(s, lim.max_string_len),
        J::Obj(members) => {
            let n = members.len();
            if n >= lim.max_nested_keys || (n > 0 && depth >= lim.max_depth) {
                return false;
            }
            members
                .iter()
                .all(|(k, v)| chars_within(k, lim.max_string_len) && plain_value(v, depth + 1, lim))
        }
        J::Arr(items) => {
            let n = items.len();
            if n >= lim.max_array_len || (n > 0 && depth >= lim.max_depth) {
                return false;
            }
            items.iter().all(|v| plain_value(v, depth + 1, lim))
        }
        // null, booleans, numbers: JSON gives only 64-bit integers (others parse as floats, as
        // orjson's do) and finite floats (a literal beyond them fails the parse: Python's then)
        _ => true,
    }
}

fn time_ms(v: &J) -> Option<i128> {
    Some(match *v {
        J::I64(i) => {
            let i = i as i128;
            if i >= MS_THRESHOLD {
                i
            } else {
                i * 1000
            }
        }
        J::U64(u) => u as i128, // >= 2**63: milliseconds (and far in the future)
        // Python: int(t) if t >= 1e10 else int(t * 1000) if t >= 0.0 else -1 (casts truncate)
        J::F64(f) if f >= 1e10 => f as i128,
        J::F64(f) if f >= 0.0 => (f * 1000.0) as i128,
        J::F64(_) => -1,
        _ => return None,
    })
}

fn distinct_id<'a>(v: &'a J<'a>, lim: &Intake) -> Option<Cow<'a, str>> {
    let did: Cow<'a, str> = match v {
        J::Str(s) if s.is_ascii() => Cow::Borrowed(s.as_ref()),
        J::I64(i) => Cow::Owned(i.to_string()),
        J::U64(u) => Cow::Owned(u.to_string()),
        _ => return None,
    };
    if did.len() > lim.max_string_len || reserved(&did, &lim.reserved_ids) {
        return None; // (an integer's text is truncated too)
    }
    Some(did)
}

fn insert_id<'a>(v: &'a J<'a>, lim: &Intake) -> Option<&'a str> {
    let J::Str(s) = v else { return None };
    let ok = !s.is_empty()
        && s.len() <= INSERT_ID_MAX_BYTES
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !lim.reserved_ids.contains(&s.to_ascii_lowercase());
    ok.then_some(s.as_ref())
}

pub fn dedup_key(project_id: u64, event: &str, time_ms: i64, distinct_id: &str, insert_id: &str) -> [u8; 16] {
    // `model.dedup_key`: each part as 4-byte little-endian length + bytes, BLAKE2b of 16 bytes
    let (mut p, mut t) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (p, t) = (p.format(project_id), t.format(time_ms));
    let mut hasher = Blake2bVar::new(16).expect("16 is a valid BLAKE2b output size");
    for part in [p.as_bytes(), event.as_bytes(), t.as_bytes(), distinct_id.as_bytes(), insert_id.as_bytes()] {
        hasher.update(&(part.len() as u32).to_le_bytes());
        hasher.update(part);
    }
    let mut key = [0u8; 16];
    hasher.finalize_variable(&mut key).expect("16-byte buffer");
    key
}

/// The row of one item, or None when the item is not plain and valid.
pub fn plain_event(item: &J, lim: &Intake, scratch: &mut Vec<u8>, texts: &mut Texts) -> Option<Row> {
    let J::Obj(raw) = item else { return None };
    if raw.len() != 2 {
        return None;
    }
    let J::Str(name) = item.get("event")? else { return None };
    if name.is_empty() || !chars_within(name, lim.max_string_len) {
        return None;
    }
    let props_value = item.get("properties")?;
    let J::Obj(props) = props_value else { return None };
    if lim.body_bytes >= lim.max_event_bytes {
        scratch.clear();
        write_value(scratch, item);
        if scratch.len() >= lim.max_event_bytes {
            return None;
        }
    }
    if props.len() >= lim.max_properties {
        return None;
    }
    let time = time_ms(props_value.get("time")?)?;
    if time < TIME_FLOOR_MS || time > lim.now_ms as i128 + lim.max_future_seconds as i128 * 1000 {
        return None;
    }
    let time = time as i64;
    let did = distinct_id(props_value.get("distinct_id")?, lim)?;
    let iid = insert_id(props_value.get("$insert_id")?, lim)?;
    let ip = match props_value.get("ip") {
        // enrichment adds $city, $region, mp_country_code: the Python path's; a text to truncate too
        Some(J::Str(ip)) if lim.geo || !chars_within(ip, lim.max_string_len) => return None,
        Some(J::Str(ip)) => Some(texts.push(ip.as_bytes())),
        _ => None, // any other value: no address
    };
    for (k, v) in props {
        if !(LIFTED.contains(&k.as_ref()) || chars_within(k, lim.max_string_len) && plain_value(v, 1, lim)) {
            return None;
        }
    }
    let key = dedup_key(lim.project_id, name, time, &did, iid);
    let start = texts.bytes.len();
    write_members(&mut texts.bytes, props, &LIFTED);
    let properties = Span(start, texts.bytes.len());
    Some(Row {
        project_id: lim.project_id,
        time_ms: time,
        event: texts.push(name.as_bytes()),
        distinct_id: texts.push(did.as_bytes()),
        insert_id: texts.push(iid.as_bytes()),
        properties,
        ip,
        key,
        hot: 0,
    })
}

// -- hot property columns --------------------------------------------------------------------

/// A value whose text the engine's `JSONExtractRaw` writes exactly as `write_value` does
/// (checked against the engine: it writes floats its own way — `10000000000000000` for 1e16 —
/// and escapes U+2028): printable ASCII strings, integers, booleans, null, and arrays and
/// objects of those.
pub fn raw_text_agrees(v: &J) -> bool {
    match v {
        J::Str(s) => printable_ascii(s),
        J::F64(_) => false,
        J::Arr(items) => items.iter().all(raw_text_agrees),
        J::Obj(members) => members.iter().all(|(k, v)| printable_ascii(k) && raw_text_agrees(v)),
        _ => true,
    }
}

pub fn printable_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `JSONExtractRaw(properties, name)` for each hot name ('' when absent), or None when some
/// value's text is not certain to be the engine's: the engine computes the columns then.
/// Appended to `texts`; returns where they start in `texts.hot`.
pub fn hot_values(props: &[(Cow<str>, J)], names: &[String], skip: &[&str], texts: &mut Texts) -> Option<usize> {
    let at = texts.hot.len();
    for name in names {
        let start = texts.bytes.len();
        if !skip.contains(&name.as_str()) {
            if let Some((_, v)) = props.iter().find(|(k, _)| k == name) {
                if !raw_text_agrees(v) {
                    return None;
                }
                write_value(&mut texts.bytes, v);
            }
        }
        texts.hot.push(Span(start, texts.bytes.len()));
    }
    Some(at)
}

