//! The `/import` fast path (issue 17): the decompressed body of a request — a JSON array of
//! events — straight to the Native rows of the `events` table, off the GIL.
//!
//! It takes only what it can store exactly as the Python path would (`validate.py`, then
//! `streams/events.py`'s `event_rows` and in-batch dedup): an array of plain, valid events. Any
//! event that the Python path would reject, truncate, derive an id for or enrich makes it
//! answer `None` for the whole request, and the caller runs the Python path, which gives the
//! errors, the truncations and the derived ids. So every rule here is a rule for saying "not
//! mine", never a second copy of an error message. Equality with the Python path (columns,
//! property JSON byte for byte as `orjson.dumps` writes it, dedup keys) is what the tests check.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io::Write;

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

const TIME_FLOOR_MS: i128 = 31_536_000_000; // 1971-01-01T00:00:00Z
const MS_THRESHOLD: i128 = 10_000_000_000; // time values >= 1e10 are milliseconds
const INSERT_ID_MAX_BYTES: usize = 36;
const LIFTED: [&str; 5] = ["time", "distinct_id", "$insert_id", "token", "ip"];

/// A parsed JSON value. Strings borrow from the body unless they hold escapes, and an object's
/// members stay in order with a repeated name keeping its first place and its last value (as a
/// Python dict from `orjson.loads`): cheaper than `serde_json::Value`'s hashed maps, which
/// cost more than the rest of the work together.
enum J<'a> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(Cow<'a, str>),
    Arr(Vec<J<'a>>),
    Obj(Vec<(Cow<'a, str>, J<'a>)>),
}

impl<'a> J<'a> {
    fn get(&self, name: &str) -> Option<&J<'a>> {
        match self {
            J::Obj(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct JVisitor;

impl<'de> Visitor<'de> for JVisitor {
    type Value = J<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<J<'de>, E> {
        Ok(J::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<J<'de>, E> {
        Ok(J::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<J<'de>, E> {
        Ok(J::I64(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<J<'de>, E> {
        // serde_json hands every non-negative integer over as u64: U64 holds only those past i64
        Ok(i64::try_from(v).map_or(J::U64(v), J::I64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<J<'de>, E> {
        Ok(J::F64(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<J<'de>, E> {
        Ok(J::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<J<'de>, E> {
        Ok(J::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<J<'de>, E> {
        Ok(J::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<J<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(J::Arr(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<J<'de>, A::Error> {
        let mut members: Vec<(Cow<'de, str>, J<'de>)> = Vec::new();
        while let Some(Key(k)) = map.next_key()? {
            let v: J<'de> = map.next_value()?;
            match members.iter_mut().find(|(seen, _)| *seen == k) {
                Some(slot) => slot.1 = v,
                None => members.push((k, v)),
            }
        }
        Ok(J::Obj(members))
    }
}

impl<'de> Deserialize<'de> for J<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JVisitor)
    }
}

struct Key<'a>(Cow<'a, str>);
struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

/// `ImportLimits`, the validator's reserved ids, and the request's own numbers.
struct Intake {
    reserved_ids: Vec<String>, // `validate.RESERVED_IDS`, all lower case
    project_id: u64,
    now_ms: i64,
    body_bytes: usize,
    geo: bool, // a place can be found for an address: events with `ip` are the Python path's
    max_items: usize,
    max_event_bytes: usize,
    max_properties: usize,
    max_nested_keys: usize,
    max_depth: usize,
    max_array_len: usize,
    max_string_len: usize,
    max_future_seconds: i64,
}

struct Row<'a> {
    time_ms: i64,
    event: &'a str,
    distinct_id: Cow<'a, str>,
    insert_id: &'a str,
    properties: Span, // in `Texts::bytes`
    key: [u8; 16],
    hot: usize, // where this row's hot values start in `Texts::hot` (one span per hot column)
}

/// The text the rows refer to, written once per request: the property JSON of every row and
/// the hot columns' values, one buffer (no allocation per row).
#[derive(Default)]
struct Texts {
    bytes: Vec<u8>,
    hot: Vec<Span>,
}

#[derive(Clone, Copy)]
struct Span(usize, usize);

impl Texts {
    fn get(&self, span: Span) -> &[u8] {
        &self.bytes[span.0..span.1]
    }
}

fn chars_within(s: &str, max: usize) -> bool {
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
    reserved_ids.iter().any(|id| *id == norm)
}

// -- JSON as orjson.dumps writes it ----------------------------------------------------------

fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The shortest digits that read back as `f` (positive, finite, not zero) and the decimal
/// exponent of the first: Ryu's, which breaks a tie between two shortest candidates to the even
/// one as Python's `repr` and orjson do (Rust's own `{:e}` does not: 562949953421312.25 is
/// `…312.2` there and `…312.3` here).
fn shortest_digits(f: f64) -> (Vec<u8>, i32) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(f); // "1.2345e-7", "123.45", "0.00012", "1e16"
    let (number, exp) = match text.split_once('e') {
        Some((number, exp)) => (number, exp.parse::<i32>().expect("ryu's exponent")),
        None => (text, 0),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let leading = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..leading);
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    // the first digit's place: `whole` has whole.len() places, less the zeros dropped in front
    (digits, exp + whole.len() as i32 - 1 - leading as i32)
}

/// A float as orjson writes it: the shortest digits that read back as the same float, in fixed
/// notation for decimal exponents -5..=15 (`1.0`, `0.00001`), else `1e+16`, `1.5e-7`.
fn write_float(out: &mut Vec<u8>, f: f64) {
    if f == 0.0 {
        out.extend_from_slice(if f.is_sign_negative() { b"-0.0" } else { b"0.0" });
        return;
    }
    if f.is_sign_negative() {
        out.push(b'-');
    }
    let (digits, exp) = shortest_digits(f.abs());
    if !(-5..16).contains(&exp) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if exp >= 0 { "+" } else { "-" }, exp.abs());
    } else if exp >= 0 {
        let whole = exp as usize + 1;
        if digits.len() <= whole {
            out.extend_from_slice(&digits);
            out.resize(out.len() + whole - digits.len(), b'0');
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits[..whole]);
            out.push(b'.');
            out.extend_from_slice(&digits[whole..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-exp - 1) as usize, b'0');
        out.extend_from_slice(&digits);
    }
}

fn write_value(out: &mut Vec<u8>, v: &J) {
    match v {
        J::Null => out.extend_from_slice(b"null"),
        J::Bool(true) => out.extend_from_slice(b"true"),
        J::Bool(false) => out.extend_from_slice(b"false"),
        J::I64(i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        J::U64(u) => out.extend_from_slice(itoa::Buffer::new().format(*u).as_bytes()),
        J::F64(f) => write_float(out, *f),
        J::Str(s) => write_str(out, s),
        J::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        J::Obj(members) => write_members(out, members, false),
    }
}

fn write_members(out: &mut Vec<u8>, members: &[(Cow<str>, J)], skip_lifted: bool) {
    out.push(b'{');
    let mut first = true;
    for (k, v) in members {
        if skip_lifted && LIFTED.contains(&k.as_ref()) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_str(out, k);
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
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

fn dedup_key(project_id: u64, event: &str, time_ms: i64, distinct_id: &str, insert_id: &str) -> [u8; 16] {
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
fn plain_event<'a>(item: &'a J<'a>, lim: &Intake, scratch: &mut Vec<u8>, texts: &mut Texts) -> Option<Row<'a>> {
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
    if lim.geo && matches!(props_value.get("ip"), Some(J::Str(_))) {
        return None; // enrichment adds $city, $region, mp_country_code: the Python path's
    }
    for (k, v) in props {
        if !LIFTED.contains(&k.as_ref()) && !(chars_within(k, lim.max_string_len) && plain_value(v, 1, lim)) {
            return None;
        }
    }
    let start = texts.bytes.len();
    write_members(&mut texts.bytes, props, true);
    let properties = Span(start, texts.bytes.len());
    let key = dedup_key(lim.project_id, name, time, &did, iid);
    Some(Row { time_ms: time, event: name, distinct_id: did, insert_id: iid, properties, key, hot: 0 })
}

// -- hot property columns --------------------------------------------------------------------

/// A value whose text the engine's `JSONExtractRaw` writes exactly as `write_value` does
/// (checked against the engine: it writes floats its own way — `10000000000000000` for 1e16 —
/// and escapes U+2028): printable ASCII strings, integers, booleans, null, and arrays and
/// objects of those.
fn raw_text_agrees(v: &J) -> bool {
    match v {
        J::Str(s) => printable_ascii(s),
        J::F64(_) => false,
        J::Arr(items) => items.iter().all(raw_text_agrees),
        J::Obj(members) => members.iter().all(|(k, v)| printable_ascii(k) && raw_text_agrees(v)),
        _ => true,
    }
}

fn printable_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `JSONExtractRaw(properties, name)` for each hot name ('' when absent), or None when some
/// value's text is not certain to be the engine's: the engine computes the columns then.
/// Appended to `texts`; returns where they start in `texts.hot`.
fn hot_values(props: &[(Cow<str>, J)], names: &[String], texts: &mut Texts) -> Option<usize> {
    let at = texts.hot.len();
    for name in names {
        let start = texts.bytes.len();
        if !LIFTED.contains(&name.as_str()) {
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

// -- Native rows ------------------------------------------------------------------------------

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    leb128(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// One Native block of `rows`, with the columns (name, type) the caller gives, in its order.
fn native_block(
    rows: &[Row<'_>],
    texts: &Texts,
    columns: &[(String, String)],
    hot_columns: &[String],
    project_id: u64,
    ingested_at_ms: i64,
) -> Result<Vec<u8>, String> {
    let size: usize = texts.bytes.len() + rows.iter().map(|r| r.event.len() + r.distinct_id.len() + 80).sum::<usize>();
    let mut out = Vec::with_capacity(size + 512);
    leb128(&mut out, (columns.len() + hot_columns.len()) as u64);
    leb128(&mut out, rows.len() as u64);
    for (name, type_name) in columns {
        write_bytes(&mut out, name.as_bytes());
        write_bytes(&mut out, type_name.as_bytes());
        match name.as_str() {
            "project_id" => rows.iter().for_each(|_| out.extend_from_slice(&project_id.to_le_bytes())),
            "time" => rows.iter().for_each(|r| out.extend_from_slice(&r.time_ms.to_le_bytes())),
            "ingested_at" => rows.iter().for_each(|_| out.extend_from_slice(&ingested_at_ms.to_le_bytes())),
            "event" => rows.iter().for_each(|r| write_bytes(&mut out, r.event.as_bytes())),
            "distinct_id" => rows.iter().for_each(|r| write_bytes(&mut out, r.distinct_id.as_bytes())),
            "insert_id" => rows.iter().for_each(|r| write_bytes(&mut out, r.insert_id.as_bytes())),
            "properties" => rows.iter().for_each(|r| write_bytes(&mut out, texts.get(r.properties))),
            "city" | "region" | "country_code" => out.resize(out.len() + rows.len(), 0), // "" each
            "dedup_hash" => rows.iter().for_each(|r| out.extend_from_slice(&r.key)),
            other => return Err(format!("the fast path does not know the column {other:?}")),
        }
    }
    for (i, column) in hot_columns.iter().enumerate() {
        write_bytes(&mut out, column.as_bytes());
        write_bytes(&mut out, b"String");
        rows.iter().for_each(|r| write_bytes(&mut out, texts.get(texts.hot[r.hot + i])));
    }
    Ok(out)
}

struct Built {
    block: Vec<u8>,
    keys: Vec<u8>,
    items: usize,
    rows: usize,
    hot: bool, // the block holds the hot columns
}

fn build(
    body: &[u8],
    lim: &Intake,
    columns: &[(String, String)],
    hot: &[(String, String)],
    ingested_at_ms: i64,
) -> Result<Option<Built>, String> {
    // UTF-8 checked once for the whole body (fast), not string by string by the parser
    let Ok(text) = std::str::from_utf8(body) else { return Ok(None) };
    let Ok(J::Arr(items)) = serde_json::from_str::<J>(text) else { return Ok(None) };
    if items.is_empty() || items.len() > lim.max_items {
        return Ok(None);
    }
    let mut rows: Vec<Row<'_>> = Vec::with_capacity(items.len());
    let mut seen: HashMap<[u8; 16], usize> = HashMap::with_capacity(items.len());
    let mut scratch = Vec::new();
    let mut texts = Texts { bytes: Vec::with_capacity(body.len()), hot: Vec::new() };
    let hot_names: Vec<String> = hot.iter().map(|(name, _)| name.clone()).collect();
    let mut hot_given = !hot.is_empty();
    for item in &items {
        let Some(mut row) = plain_event(item, lim, &mut scratch, &mut texts) else { return Ok(None) };
        if hot_given {
            let J::Obj(props) = item.get("properties").expect("a plain event has properties") else { unreachable!() };
            match hot_values(props, &hot_names, &mut texts) {
                Some(at) => row.hot = at,
                None => hot_given = false,
            }
        }
        // the last copy of a duplicate wins, in the first copy's place (as `dedup_rows`)
        match seen.get(&row.key) {
            Some(&at) => rows[at] = row,
            None => {
                seen.insert(row.key, rows.len());
                rows.push(row);
            }
        }
    }
    let count = items.len();
    let hot_columns: Vec<String> = if hot_given { hot.iter().map(|(_, column)| column.clone()).collect() } else { Vec::new() };
    let block = native_block(&rows, &texts, columns, &hot_columns, lim.project_id, ingested_at_ms)?;
    let keys = rows.iter().flat_map(|r| r.key).collect();
    Ok(Some(Built { block, keys, items: count, rows: rows.len(), hot: hot_given }))
}

/// `import_rows(body, columns, project_id, now_ms, ingested_at_ms, body_bytes, geo, limits, reserved_ids, hot)`:
/// `(native_block, keys, items, rows, hot_given)` for a body whose every event is plain and
/// valid (`keys`: the stored rows' 16-byte dedup keys, concatenated), or None. `hot`: (property,
/// column) of the hot columns; the block holds them after `columns` when `hot_given`. `limits`: (max_items,
/// max_event_bytes, max_properties, max_nested_keys, max_depth, max_array_len,
/// max_string_len, max_future_seconds); `reserved_ids`: the validator's (lower case). Runs
/// without the GIL.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn import_rows<'py>(
    py: Python<'py>,
    body: &[u8],
    columns: Vec<(String, String)>,
    project_id: u64,
    now_ms: i64,
    ingested_at_ms: i64,
    body_bytes: usize,
    geo: bool,
    limits: (usize, usize, usize, usize, usize, usize, usize, i64),
    reserved_ids: Vec<String>,
    hot: Vec<(String, String)>,
) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize, usize, bool)>> {
    let lim = Intake {
        reserved_ids,
        project_id,
        now_ms,
        body_bytes,
        geo,
        max_items: limits.0,
        max_event_bytes: limits.1,
        max_properties: limits.2,
        max_nested_keys: limits.3,
        max_depth: limits.4,
        max_array_len: limits.5,
        max_string_len: limits.6,
        max_future_seconds: limits.7,
    };
    let built = py.allow_threads(|| build(body, &lim, &columns, &hot, ingested_at_ms)).map_err(PyValueError::new_err)?;
    Ok(built.map(|b| (PyBytes::new(py, &b.block), PyBytes::new(py, &b.keys), b.items, b.rows, b.hot)))
}

/// Property JSON as the fast path writes it (`orjson.dumps` of the same value): for the tests.
#[pyfunction]
fn dumps<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let value: J = serde_json::from_slice(body).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut out = Vec::new();
    write_value(&mut out, &value);
    Ok(PyBytes::new(py, &out))
}

#[pymodule]
fn _fastpath(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(import_rows, m)?)?;
    m.add_function(wrap_pyfunction!(dumps, m)?)?;
    Ok(())
}
