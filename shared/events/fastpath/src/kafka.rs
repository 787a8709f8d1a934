//! The events stream's Kafka records (`streams/events.py`): the envelope a gateway writes for an
//! event, its partition key and partition hash, and the row a worker stores for an envelope.
//!
//! Envelope: `{"v":1,"p":project_id,"e":event,"t":time_ms,"d":distinct_id,"i":insert_id,
//! "pr":properties,"ip":ip|null}`, byte for byte as `orjson.dumps` writes the Python path's
//! dict, so that a retried event is the same record value whichever path wrote it.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;

use crate::event::{dedup_key, hot_values, Row, Span, Texts};
use crate::json::{write_members, write_str, J};

const VERSION: i64 = 1;

/// The Java client's murmur2 of a key, made positive (`& 0x7fffffff`): every producer puts a
/// key on the same partition (`kafka_sink._key_hash`).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= (b as u32) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h & 0x7fff_ffff
}

/// The record value of `row` (its text in `texts`), appended to `out`.
pub fn write_envelope(out: &mut Vec<u8>, row: &Row, texts: &Texts) {
    let text = |span: Span| std::str::from_utf8(texts.get(span)).expect("texts hold UTF-8");
    out.extend_from_slice(b"{\"v\":1,\"p\":");
    out.extend_from_slice(itoa::Buffer::new().format(row.project_id).as_bytes());
    out.extend_from_slice(b",\"e\":");
    write_str(out, text(row.event));
    out.extend_from_slice(b",\"t\":");
    out.extend_from_slice(itoa::Buffer::new().format(row.time_ms).as_bytes());
    out.extend_from_slice(b",\"d\":");
    write_str(out, text(row.distinct_id));
    out.extend_from_slice(b",\"i\":");
    write_str(out, text(row.insert_id));
    out.extend_from_slice(b",\"pr\":");
    out.extend_from_slice(texts.get(row.properties));
    out.extend_from_slice(b",\"ip\":");
    match row.ip {
        Some(ip) => write_str(out, text(ip)),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// `b"<project_id>:<distinct_id>"`: the partition key.
pub fn write_partition_key(out: &mut Vec<u8>, row: &Row, texts: &Texts) {
    out.extend_from_slice(itoa::Buffer::new().format(row.project_id).as_bytes());
    out.push(b':');
    out.extend_from_slice(texts.get(row.distinct_id));
}

/// BLAKE2b of 8 bytes of a record value (`footfall.shared.kafka.content_digest`).
pub fn content_digest(value: &[u8]) -> [u8; 8] {
    let mut hasher = Blake2bVar::new(8).expect("8 is a valid BLAKE2b output size");
    hasher.update(value);
    let mut digest = [0u8; 8];
    hasher.finalize_variable(&mut digest).expect("8-byte buffer");
    digest
}

/// The row a worker stores for one record value, or None when the value is not an envelope
/// whose fields `decode_event` takes exactly as they are (the Python path decides the rest, dead
/// letters included), or carries an address to locate (`geo`). `hot`: the hot columns'
/// property names; `hot_ok` turns false when a value's text is not certain to be the engine's.
pub fn envelope_row(value: &[u8], geo: bool, hot: &[String], hot_ok: &mut bool, texts: &mut Texts) -> Option<Row> {
    let Ok(data) = serde_json::from_slice::<J>(value) else { return None };
    let (Some(J::I64(VERSION)), Some(&J::I64(project_id)), Some(J::Str(event)), Some(&J::I64(time_ms))) =
        (data.get("v"), data.get("p"), data.get("e"), data.get("t"))
    else {
        return None;
    };
    let (Some(J::Str(did)), Some(J::Str(iid)), Some(J::Obj(props))) = (data.get("d"), data.get("i"), data.get("pr"))
    else {
        return None;
    };
    match data.get("ip") {
        None | Some(J::Null) => {}
        Some(J::Str(_)) if !geo => {}
        _ => return None, // a place to find (the Python path enriches), or not a string
    }
    if project_id <= 0 {
        return None;
    }
    let key = dedup_key(project_id as u64, event, time_ms, did, iid);
    let start = texts.bytes.len();
    write_members(&mut texts.bytes, props, &[]);
    let properties = Span(start, texts.bytes.len());
    let mut row = Row {
        project_id: project_id as u64,
        time_ms,
        event: texts.push(event.as_bytes()),
        distinct_id: texts.push(did.as_bytes()),
        insert_id: texts.push(iid.as_bytes()),
        properties,
        ip: None,
        key,
        hot: 0,
    };
    if *hot_ok {
        match hot_values(props, hot, &[], texts) {
            Some(at) => row.hot = at,
            None => *hot_ok = false,
        }
    }
    Some(row)
}
