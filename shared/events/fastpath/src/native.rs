//! Native blocks of the events table: what the engine inserts as it is.

use crate::event::{Row, Texts};

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

/// One Native block of `rows` (those of `order`, in that order), with the columns (name, type)
/// the caller gives, in its order, then the hot columns (String) when `hot_columns` names them.
pub fn native_block(
    rows: &[Row],
    order: &[usize],
    texts: &Texts,
    columns: &[(String, String)],
    hot_columns: &[String],
    ingested_at_ms: i64,
) -> Result<Vec<u8>, String> {
    let text: usize = order.iter().map(|&i| rows[i].properties.1 - rows[i].properties.0 + 96).sum();
    let mut out = Vec::with_capacity(text + 512);
    leb128(&mut out, (columns.len() + hot_columns.len()) as u64);
    leb128(&mut out, order.len() as u64);
    let each = order.iter().map(|&i| &rows[i]);
    for (name, type_name) in columns {
        write_bytes(&mut out, name.as_bytes());
        write_bytes(&mut out, type_name.as_bytes());
        match name.as_str() {
            "project_id" => each.clone().for_each(|r| out.extend_from_slice(&r.project_id.to_le_bytes())),
            "time" => each.clone().for_each(|r| out.extend_from_slice(&r.time_ms.to_le_bytes())),
            "ingested_at" => each.clone().for_each(|_| out.extend_from_slice(&ingested_at_ms.to_le_bytes())),
            "event" => each.clone().for_each(|r| write_bytes(&mut out, texts.get(r.event))),
            "distinct_id" => each.clone().for_each(|r| write_bytes(&mut out, texts.get(r.distinct_id))),
            "insert_id" => each.clone().for_each(|r| write_bytes(&mut out, texts.get(r.insert_id))),
            "properties" => each.clone().for_each(|r| write_bytes(&mut out, texts.get(r.properties))),
            "city" | "region" | "country_code" => out.resize(out.len() + order.len(), 0), // "" each
            "dedup_hash" => each.clone().for_each(|r| out.extend_from_slice(&r.key)),
            other => return Err(format!("the fast path does not know the column {other:?}")),
        }
    }
    for (i, column) in hot_columns.iter().enumerate() {
        write_bytes(&mut out, column.as_bytes());
        write_bytes(&mut out, b"String");
        each.clone().for_each(|r| write_bytes(&mut out, texts.get(texts.hot[r.hot + i])));
    }
    Ok(out)
}

/// Of several rows with the same dedup key only the last is kept, in the first one's place (as
/// `dedup_rows` in Python): the indices of the rows to store, in order.
pub fn latest_copies(rows: &[Row], candidates: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(rows.len());
    let mut at: std::collections::HashMap<[u8; 16], usize> = std::collections::HashMap::with_capacity(rows.len());
    for i in candidates {
        match at.get(&rows[i].key) {
            Some(&slot) => order[slot] = i,
            None => {
                at.insert(rows[i].key, order.len());
                order.push(i);
            }
        }
    }
    order
}
