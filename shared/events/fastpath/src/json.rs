//! JSON: a parsed value that keeps a Python dict's member order (`J`), and the writer that
//! writes values exactly as `orjson.dumps` does.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A parsed JSON value. Strings borrow from the body unless they hold escapes, and an object's
/// members stay in order with a repeated name keeping its first place and its last value (as a
/// Python dict from `orjson.loads`): cheaper than `serde_json::Value`'s hashed maps, which
/// cost more than the rest of the work together.
pub enum J<'a> {
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
    pub fn get(&self, name: &str) -> Option<&J<'a>> {
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

// -- JSON as orjson.dumps writes it ----------------------------------------------------------

pub fn write_str(out: &mut Vec<u8>, s: &str) {
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

pub fn write_value(out: &mut Vec<u8>, v: &J) {
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
        J::Obj(members) => write_members(out, members, &[]),
    }
}

/// An object's members, without those named in `skip`.
pub fn write_members(out: &mut Vec<u8>, members: &[(Cow<str>, J)], skip: &[&str]) {
    out.push(b'{');
    let mut first = true;
    for (k, v) in members {
        if skip.contains(&k.as_ref()) {
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
