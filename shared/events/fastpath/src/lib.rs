//! The `/import` fast path (issue 17): plain, valid events straight to what stores them, off the
//! GIL — the decompressed body of a request (a JSON array of events) to the Native rows of the
//! `events` table (`serve`) or to the events stream's Kafka records (`footfall gateway`), and
//! a worker's consumed records back to Native rows.
//!
//! It takes only what it can store exactly as the Python path would (`validate.py`, then
//! `streams/events.py`'s envelope, `event_rows` and in-batch dedup): an array of plain, valid
//! events, or envelopes as the Python codec reads them. Anything the Python path would reject,
//! truncate, derive an id for, enrich or dead-letter makes it answer `None` for the whole batch,
//! and the caller runs the Python path. So every rule here is a rule for saying "not mine",
//! never a second copy of an error message. Equality with the Python path (columns, property
//! JSON byte for byte as `orjson.dumps` writes it, dedup keys, record values) is what the tests
//! check.

mod event;
mod json;
mod kafka;
mod native;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use event::{hot_values, plain_event, Intake, Row, Texts, LIFTED};
use json::{write_value, J};
use native::{latest_copies, native_block};

type Limits = (usize, usize, usize, usize, usize, usize, usize, i64);

fn intake(project_id: u64, now_ms: i64, body_bytes: usize, geo: bool, limits: Limits, reserved_ids: Vec<String>) -> Intake {
    Intake {
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
    }
}

/// The rows of a request body whose every event is plain and valid (in order, duplicates kept),
/// their text, and whether `hot` values are given for every row; None otherwise.
fn request_rows(body: &[u8], lim: &Intake, hot: &[String]) -> Option<(Vec<Row>, Texts, bool)> {
    // UTF-8 checked once for the whole body (fast), not string by string by the parser
    let text = std::str::from_utf8(body).ok()?;
    let Ok(J::Arr(items)) = serde_json::from_str::<J>(text) else { return None };
    if items.is_empty() || items.len() > lim.max_items {
        return None;
    }
    let mut rows: Vec<Row> = Vec::with_capacity(items.len());
    let mut scratch = Vec::new();
    let mut texts = Texts { bytes: Vec::with_capacity(body.len() + body.len() / 4), hot: Vec::new() };
    let mut hot_given = !hot.is_empty();
    for item in &items {
        let mut row = plain_event(item, lim, &mut scratch, &mut texts)?;
        if hot_given {
            let Some(J::Obj(props)) = item.get("properties") else { unreachable!("a plain event has properties") };
            match hot_values(props, hot, &LIFTED, &mut texts) {
                Some(at) => row.hot = at,
                None => hot_given = false,
            }
        }
        rows.push(row);
    }
    Some((rows, texts, hot_given))
}

fn names(hot: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    hot.iter().cloned().unzip()
}

/// `import_rows(body, columns, project_id, now_ms, ingested_at_ms, body_bytes, geo, limits, reserved_ids, hot)`:
/// `(native_block, keys, items, rows, hot_given)` for a body whose every event is plain and
/// valid (duplicates dropped, the last copy winning in the first one's place; `keys`: the stored
/// rows' 16-byte dedup keys, concatenated), or None. `hot`: (property, column) of the hot
/// columns; the block holds them after `columns` when `hot_given`. `limits`: (max_items,
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
    limits: Limits,
    reserved_ids: Vec<String>,
    hot: Vec<(String, String)>,
) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize, usize, bool)>> {
    let lim = intake(project_id, now_ms, body_bytes, geo, limits, reserved_ids);
    let (hot_names, hot_columns) = names(&hot);
    let built = py.allow_threads(|| -> Result<Option<(Vec<u8>, Vec<u8>, usize, usize, bool)>, String> {
        let Some((rows, texts, hot_given)) = request_rows(body, &lim, &hot_names) else { return Ok(None) };
        let order = latest_copies(&rows, 0..rows.len());
        let hot_columns: &[String] = if hot_given { &hot_columns } else { &[] };
        let block = native_block(&rows, &order, &texts, &columns, hot_columns, ingested_at_ms)?;
        let keys = order.iter().flat_map(|&i| rows[i].key).collect();
        Ok(Some((block, keys, rows.len(), order.len(), hot_given)))
    });
    let built = built.map_err(PyValueError::new_err)?;
    Ok(built.map(|(block, keys, items, rows, hot)| (PyBytes::new(py, &block), PyBytes::new(py, &keys), items, rows, hot)))
}

/// `import_envelopes(body, project_id, now_ms, body_bytes, limits, reserved_ids)`: `(keys,
/// values, hashes)` — for every event of a body whose every event is plain and valid, in order
/// (duplicates kept: the workers drop them), its partition key, its record value and the
/// positive murmur2 hash of the key — or None. Runs without the GIL (but for the bytes objects).
#[pyfunction]
fn import_envelopes<'py>(
    py: Python<'py>,
    body: &[u8],
    project_id: u64,
    now_ms: i64,
    body_bytes: usize,
    limits: Limits,
    reserved_ids: Vec<String>,
) -> Option<(Bound<'py, PyList>, Bound<'py, PyList>, Vec<u32>)> {
    // the gateway locates no address: the envelope carries it to the workers
    let lim = intake(project_id, now_ms, body_bytes, false, limits, reserved_ids);
    let (buffer, spans, hashes) = py.allow_threads(|| {
        let (rows, texts, _) = request_rows(body, &lim, &[])?;
        let mut buffer = Vec::with_capacity(texts.bytes.len() + rows.len() * 96);
        let mut spans = Vec::with_capacity(rows.len());
        let mut hashes = Vec::with_capacity(rows.len());
        for row in &rows {
            let start = buffer.len();
            kafka::write_partition_key(&mut buffer, row, &texts);
            let middle = buffer.len();
            kafka::write_envelope(&mut buffer, row, &texts);
            hashes.push(kafka::murmur2(&buffer[start..middle]));
            spans.push((start, middle, buffer.len()));
        }
        Some((buffer, spans, hashes))
    })?;
    let keys = PyList::new(py, spans.iter().map(|&(a, b, _)| PyBytes::new(py, &buffer[a..b]))).ok()?;
    let values = PyList::new(py, spans.iter().map(|&(_, b, c)| PyBytes::new(py, &buffer[b..c]))).ok()?;
    Some((keys, values, hashes))
}

/// `(native_block, keys, digests, rows, hot_given)`
type StoredBlock<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize, bool);

/// A worker's batch of event records, decoded (`decode_envelopes`): each record's dedup key
/// and content digest, for the Redis layer, then `block` for the records to store.
#[pyclass(frozen, module = "footfall.shared.events._fastpath")]
struct Envelopes {
    rows: Vec<Row>,
    texts: Texts,
    digests: Vec<[u8; 8]>,
    hot_columns: Vec<String>, // empty unless every row's hot values are given
}

#[pymethods]
impl Envelopes {
    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// Every record's 16-byte dedup key, concatenated.
    fn keys<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let keys: Vec<u8> = self.rows.iter().flat_map(|r| r.key).collect();
        PyBytes::new(py, &keys)
    }

    /// Every record's 8-byte content digest, concatenated.
    fn digests<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.digests.as_flattened())
    }

    /// `(native_block, keys, digests, rows, hot_given)` of the records at `fresh` (ascending
    /// indices): duplicates among them dropped, the last copy winning in the first one's place.
    /// The hot columns' values are given when every record's are known and `hot` is true.
    fn block<'py>(
        &self,
        py: Python<'py>,
        fresh: Vec<usize>,
        columns: Vec<(String, String)>,
        ingested_at_ms: i64,
        hot: bool,
    ) -> PyResult<StoredBlock<'py>> {
        let hot_columns: &[String] = if hot { &self.hot_columns } else { &[] };
        if fresh.iter().any(|&i| i >= self.rows.len()) {
            return Err(PyValueError::new_err("a fresh index past the records"));
        }
        let (block, keys, digests, rows) = py
            .allow_threads(|| -> Result<_, String> {
                let order = latest_copies(&self.rows, fresh.into_iter());
                let block = native_block(&self.rows, &order, &self.texts, &columns, hot_columns, ingested_at_ms)?;
                let keys: Vec<u8> = order.iter().flat_map(|&i| self.rows[i].key).collect();
                let digests: Vec<u8> = order.iter().flat_map(|&i| self.digests[i]).collect();
                Ok((block, keys, digests, order.len()))
            })
            .map_err(PyValueError::new_err)?;
        let hot = !hot_columns.is_empty();
        Ok((PyBytes::new(py, &block), PyBytes::new(py, &keys), PyBytes::new(py, &digests), rows, hot))
    }
}

/// `decode_envelopes(values, geo, hot)`: the records of a worker's batch (their values, in
/// consumed order) as `Envelopes`, or None when any value is not an envelope the Python codec
/// takes as it is, or carries an address to locate (`geo`). `hot`: (property, column) of the
/// hot columns. Runs without the GIL.
#[pyfunction]
fn decode_envelopes(py: Python<'_>, values: Vec<Bound<'_, PyBytes>>, geo: bool, hot: Vec<(String, String)>) -> Option<Envelopes> {
    let slices: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    let (hot_names, hot_columns) = names(&hot);
    py.allow_threads(|| {
        let mut texts = Texts { bytes: Vec::with_capacity(slices.iter().map(|v| v.len()).sum()), hot: Vec::new() };
        let mut hot_ok = !hot_names.is_empty();
        let mut rows = Vec::with_capacity(slices.len());
        let mut digests = Vec::with_capacity(slices.len());
        for value in &slices {
            rows.push(kafka::envelope_row(value, geo, &hot_names, &mut hot_ok, &mut texts)?);
            digests.push(kafka::content_digest(value));
        }
        let hot_columns = if hot_ok { hot_columns } else { Vec::new() };
        Some(Envelopes { rows, texts, digests, hot_columns })
    })
}

/// Property JSON as the fast path writes it (`orjson.dumps` of the same value): for the tests.
#[pyfunction]
fn dumps<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let value: J = serde_json::from_slice(body).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut out = Vec::new();
    write_value(&mut out, &value);
    Ok(PyBytes::new(py, &out))
}

/// The partition hash of a key (positive murmur2): for the tests.
#[pyfunction]
fn partition_hash(key: &[u8]) -> u32 {
    kafka::murmur2(key)
}

#[pymodule]
fn _fastpath(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(import_rows, m)?)?;
    m.add_function(wrap_pyfunction!(import_envelopes, m)?)?;
    m.add_function(wrap_pyfunction!(decode_envelopes, m)?)?;
    m.add_function(wrap_pyfunction!(dumps, m)?)?;
    m.add_function(wrap_pyfunction!(partition_hash, m)?)?;
    m.add_class::<Envelopes>()?;
    Ok(())
}
