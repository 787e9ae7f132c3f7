//! Value transforms of table columns: `fill_as_null`, and the CF conventions xarray writes
//! (`_FillValue` / `missing_value` → NULL, `scale_factor` / `add_offset`, time
//! `units: "<unit> since <date>"` → Timestamp, `units: "<unit>"` with xarray's
//! `dtype: "timedelta64[…]"` → Duration; int64 min, xarray's NaT, → NULL).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, BooleanArray, DurationMicrosecondArray, DurationMillisecondArray,
    DurationNanosecondArray, DurationSecondArray, Float64Array, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray,
};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use base64::Engine;
use serde_json::Value;

use crate::metadata::{ArrayMetadata, DataType};
use crate::{Error, Result};

/// Positions where `values` equals the one-element array `scalar` (NaN equals NaN; NULLs are
/// never equal). `None` for types without a notion of equality here.
pub(crate) fn equals_scalar(values: &dyn Array, scalar: &dyn Array) -> Option<BooleanArray> {
    if scalar.is_empty() || scalar.is_null(0) || values.data_type() != scalar.data_type() {
        return None;
    }
    macro_rules! prim {
        ($t:ty) => {{
            let f = scalar.as_primitive::<$t>().value(0);
            values
                .as_primitive::<$t>()
                .iter()
                .map(|x| Some(x == Some(f)))
                .collect()
        }};
    }
    macro_rules! float {
        ($t:ty) => {{
            let f = scalar.as_primitive::<$t>().value(0);
            values
                .as_primitive::<$t>()
                .iter()
                .map(|x| Some(x.is_some_and(|x| x == f || (x.is_nan() && f.is_nan()))))
                .collect()
        }};
    }
    macro_rules! bytes {
        ($a:expr, $s:expr) => {{
            let f = $s.value(0);
            $a.iter().map(|x| Some(x == Some(f))).collect()
        }};
    }
    use ArrowType as T;
    Some(match values.data_type() {
        T::Boolean => bytes!(values.as_boolean(), scalar.as_boolean()),
        T::Int8 => prim!(Int8Type),
        T::Int16 => prim!(Int16Type),
        T::Int32 => prim!(Int32Type),
        T::Int64 => prim!(Int64Type),
        T::UInt8 => prim!(UInt8Type),
        T::UInt16 => prim!(UInt16Type),
        T::UInt32 => prim!(UInt32Type),
        T::UInt64 => prim!(UInt64Type),
        T::Float16 => float!(Float16Type),
        T::Float32 => float!(Float32Type),
        T::Float64 => float!(Float64Type),
        T::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType),
        T::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType),
        T::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType),
        T::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType),
        T::Duration(TimeUnit::Second) => prim!(DurationSecondType),
        T::Duration(TimeUnit::Millisecond) => prim!(DurationMillisecondType),
        T::Duration(TimeUnit::Microsecond) => prim!(DurationMicrosecondType),
        T::Duration(TimeUnit::Nanosecond) => prim!(DurationNanosecondType),
        T::Utf8 => bytes!(values.as_string::<i32>(), scalar.as_string::<i32>()),
        T::LargeUtf8 => bytes!(values.as_string::<i64>(), scalar.as_string::<i64>()),
        T::Utf8View => bytes!(values.as_string_view(), scalar.as_string_view()),
        T::Binary => bytes!(values.as_binary::<i32>(), scalar.as_binary::<i32>()),
        T::LargeBinary => bytes!(values.as_binary::<i64>(), scalar.as_binary::<i64>()),
        T::BinaryView => bytes!(values.as_binary_view(), scalar.as_binary_view()),
        T::FixedSizeBinary(_) => {
            bytes!(values.as_fixed_size_binary(), scalar.as_fixed_size_binary())
        }
        T::Struct(_) => {
            // complex: both parts equal
            let (v, s) = (values.as_struct(), scalar.as_struct());
            let mut acc: Option<BooleanArray> = None;
            for (vc, sc) in v.columns().iter().zip(s.columns()) {
                let eq = equals_scalar(vc.as_ref(), sc.as_ref())?;
                acc = Some(match acc {
                    None => eq,
                    Some(a) => a
                        .iter()
                        .zip(eq.iter())
                        .map(|(a, b)| Some(a == Some(true) && b == Some(true)))
                        .collect(),
                });
            }
            acc?
        }
        _ => return None,
    })
}

/// NULL where `mask` is true (no-op for an all-false mask).
pub(crate) fn null_where(values: ArrayRef, mask: &BooleanArray) -> Result<ArrayRef> {
    if mask.true_count() == 0 {
        return Ok(values);
    }
    // `nullif` gives an array whose null buffer starts at bit 0 while its data keeps the
    // input's offset, which Arrow's own validation refuses (a slice of booleans has a bit
    // offset): such an input is realigned first.
    let values = if values.to_data().offset() != 0 {
        let all = arrow_array::UInt32Array::from_iter_values(0..values.len() as u32);
        arrow_select::take::take(values.as_ref(), &all, None)?
    } else {
        values
    };
    Ok(arrow_select::nullif::nullif(values.as_ref(), mask)?)
}

/// The CF decoding of one array, read from its attributes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CfDecode {
    /// `_FillValue` and `missing_value` entries.
    missing: Vec<f64>,
    scale: Option<f64>,
    offset: Option<f64>,
    time: Option<CfTime>,
}

/// `units: "<unit> since <date>"`: value × `factor` + `epoch`, in `unit`; a Duration (epoch
/// 0) for xarray's timedeltas.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CfTime {
    unit: TimeUnit,
    factor: i64,
    epoch: i64,
    duration: bool,
}

fn json_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Some(f64::NAN),
            "Infinity" | "inf" => Some(f64::INFINITY),
            "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
            other => other.parse().ok(),
        },
        Value::Array(items) if items.len() == 1 => json_f64(&items[0]),
        _ => None,
    }
}

/// A `_FillValue` attribute: a number, a NaN/Infinity string, or (xarray on zarr v3) the
/// base64 of the little-endian value.
fn fill_attr(v: &Value, data_type: &DataType) -> Option<f64> {
    if let Some(f) = json_f64(v) {
        return Some(f);
    }
    let Value::String(s) = v else { return None };
    let raw = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    let f = match (raw.len(), data_type) {
        (8, DataType::Int64) => i64::from_le_bytes(raw.try_into().ok()?) as f64,
        (8, DataType::UInt64) => u64::from_le_bytes(raw.try_into().ok()?) as f64,
        (8, _) => f64::from_le_bytes(raw.try_into().ok()?),
        (4, DataType::Int32) => i32::from_le_bytes(raw.try_into().ok()?) as f64,
        (4, DataType::UInt32) => u32::from_le_bytes(raw.try_into().ok()?) as f64,
        (4, _) => f32::from_le_bytes(raw.try_into().ok()?) as f64,
        (2, DataType::Int16) => i16::from_le_bytes(raw.try_into().ok()?) as f64,
        (2, DataType::UInt16) => u16::from_le_bytes(raw.try_into().ok()?) as f64,
        (2, _) => half::f16::from_le_bytes(raw.try_into().ok()?).to_f64(),
        (1, DataType::Int8) => raw[0] as i8 as f64,
        (1, _) => raw[0] as f64,
        _ => return None,
    };
    Some(f)
}

fn is_numeric(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
    )
}

fn is_float(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    )
}

impl CfDecode {
    /// The decoding `meta`'s attributes call for; `None` when there is nothing to do (or the
    /// data type is not numeric). `path` names the array in errors.
    pub(crate) fn from_metadata(path: &str, meta: &ArrayMetadata) -> Result<Option<CfDecode>> {
        if !is_numeric(&meta.data_type) {
            return Ok(None);
        }
        let attrs = &meta.attributes;
        let mut cf = CfDecode::default();
        match attrs.get("_FillValue") {
            Some(v) => cf.missing.extend(fill_attr(v, &meta.data_type)),
            // xarray on zarr v2 keeps _FillValue as the array's fill_value.
            None if meta.zarr_format == 2
                && attrs.contains_key("_ARRAY_DIMENSIONS")
                && !meta.fill_value.json.is_null() =>
            {
                cf.missing.extend(json_f64(&meta.fill_value.json))
            }
            None => {}
        }
        match attrs.get("missing_value") {
            Some(Value::Array(items)) => cf.missing.extend(items.iter().filter_map(json_f64)),
            Some(v) => cf.missing.extend(json_f64(v)),
            None => {}
        }
        cf.scale = attrs.get("scale_factor").and_then(json_f64);
        cf.offset = attrs.get("add_offset").and_then(json_f64);
        let float = is_float(&meta.data_type) || cf.scale.is_some() || cf.offset.is_some();
        if let Some(Value::String(units)) = attrs.get("units") {
            // xarray marks the timedeltas it encodes (and decodes only those).
            let timedelta = attrs
                .get("dtype")
                .and_then(Value::as_str)
                .is_some_and(|d| d.starts_with("timedelta64"));
            if timedelta && !units.contains(" since ") {
                let mut t = parse_time(units.trim(), "1970-01-01", float).ok_or_else(|| {
                    Error::metadata(
                        path,
                        "units",
                        format!("cannot decode timedelta units '{units}'"),
                    )
                })?;
                t.duration = true;
                cf.time = Some(t);
            }
            let calendar = attrs
                .get("calendar")
                .and_then(Value::as_str)
                .unwrap_or("standard");
            if let Some((unit, since)) = units.split_once(" since ") {
                if matches!(
                    calendar.to_ascii_lowercase().as_str(),
                    "standard" | "gregorian" | "proleptic_gregorian"
                ) {
                    cf.time =
                        Some(parse_time(unit.trim(), since.trim(), float).ok_or_else(|| {
                            Error::metadata(
                                path,
                                "units",
                                format!("cannot decode CF time units '{units}'"),
                            )
                        })?);
                } else {
                    log::warn!(
                        "array '{path}': calendar '{calendar}' is not decoded; values stay numbers"
                    );
                }
            }
        }
        Ok((cf != CfDecode::default()).then_some(cf))
    }

    /// The Arrow type of the decoded values, given the stored type.
    pub(crate) fn output_type(&self, stored: &ArrowType) -> ArrowType {
        if let Some(t) = self.time {
            if t.duration {
                ArrowType::Duration(t.unit)
            } else {
                ArrowType::Timestamp(t.unit, None)
            }
        } else if self.scale.is_some() || self.offset.is_some() {
            ArrowType::Float64
        } else {
            stored.clone()
        }
    }

    /// Decode stored values.
    pub(crate) fn apply(&self, path: &str, values: ArrayRef) -> Result<ArrayRef> {
        let values = if self.missing.is_empty() {
            values
        } else {
            let mask = missing_mask(values.as_ref(), &self.missing);
            null_where(values, &mask)?
        };
        let scaled = self.scale.is_some() || self.offset.is_some();
        if !scaled && self.time.is_none() {
            return Ok(values);
        }
        let is_int = values.data_type().is_integer();
        if let (Some(t), true, false) = (self.time, is_int, scaled) {
            // xarray writes NaT as int64 min (no `_FillValue` needed) and reads it back as NaT.
            let nat = (values.data_type() == &ArrowType::Int64).then_some(i64::MIN);
            let ints = to_i64(values.as_ref()).ok_or_else(|| not_numeric(path, &values))?;
            let out: Result<Vec<Option<i64>>> = ints
                .iter()
                .map(|v| match *v {
                    None => Ok(None),
                    Some(v) if Some(v) == nat => Ok(None),
                    Some(v) => v
                        .checked_mul(t.factor)
                        .and_then(|x| x.checked_add(t.epoch))
                        .map(Some)
                        .ok_or_else(|| {
                            Error::table(
                                path,
                                format!("array '{path}': time value {v} out of range"),
                            )
                        }),
                })
                .collect();
            return Ok(timestamps(t, out?));
        }
        let floats = to_f64(values.as_ref()).ok_or_else(|| not_numeric(path, &values))?;
        let floats: Float64Array = floats
            .iter()
            .map(|v| v.map(|v| v * self.scale.unwrap_or(1.0) + self.offset.unwrap_or(0.0)))
            .collect();
        match self.time {
            None => Ok(Arc::new(floats)),
            Some(t) => {
                let out: Result<Vec<Option<i64>>> = floats
                    .iter()
                    .map(|v| match v {
                        None => Ok(None),
                        Some(v) if v.is_nan() => Ok(None),
                        Some(v) => {
                            let x = (v * t.factor as f64).round() + t.epoch as f64;
                            if x.is_finite() && x.abs() < 9.2e18 {
                                Ok(Some(x as i64))
                            } else {
                                Err(Error::table(
                                    path,
                                    format!("array '{path}': time value {v} out of range"),
                                ))
                            }
                        }
                    })
                    .collect();
                Ok(timestamps(t, out?))
            }
        }
    }
}

/// Timestamps, or Durations for a timedelta, in `t`'s unit.
fn timestamps(t: CfTime, values: Vec<Option<i64>>) -> ArrayRef {
    match (t.duration, t.unit) {
        (false, TimeUnit::Second) => Arc::new(TimestampSecondArray::from(values)),
        (false, TimeUnit::Millisecond) => Arc::new(TimestampMillisecondArray::from(values)),
        (false, TimeUnit::Microsecond) => Arc::new(TimestampMicrosecondArray::from(values)),
        (false, TimeUnit::Nanosecond) => Arc::new(TimestampNanosecondArray::from(values)),
        (true, TimeUnit::Second) => Arc::new(DurationSecondArray::from(values)),
        (true, TimeUnit::Millisecond) => Arc::new(DurationMillisecondArray::from(values)),
        (true, TimeUnit::Microsecond) => Arc::new(DurationMicrosecondArray::from(values)),
        (true, TimeUnit::Nanosecond) => Arc::new(DurationNanosecondArray::from(values)),
    }
}

macro_rules! numeric_map {
    ($values:expr, $f:expr) => {{
        use ArrowType as T;
        let v = $values;
        match v.data_type() {
            T::Int8 => v
                .as_primitive::<Int8Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::Int16 => v
                .as_primitive::<Int16Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::Int32 => v
                .as_primitive::<Int32Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::Int64 => v
                .as_primitive::<Int64Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::UInt8 => v
                .as_primitive::<UInt8Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::UInt16 => v
                .as_primitive::<UInt16Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::UInt32 => v
                .as_primitive::<UInt32Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::UInt64 => v
                .as_primitive::<UInt64Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::Float16 => v
                .as_primitive::<Float16Type>()
                .iter()
                .map(|x| x.map(|x| x.to_f64()).map($f))
                .collect(),
            T::Float32 => v
                .as_primitive::<Float32Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            T::Float64 => v
                .as_primitive::<Float64Type>()
                .iter()
                .map(|x| x.map($f))
                .collect(),
            _ => return None,
        }
    }};
}

// The macro casts every numeric type; for f64 (i64) the cast is the identity.
#[allow(clippy::unnecessary_cast)]
fn to_f64(values: &dyn Array) -> Option<Vec<Option<f64>>> {
    Some(numeric_map!(values, |x| x as f64))
}

#[allow(clippy::unnecessary_cast)]
fn to_i64(values: &dyn Array) -> Option<Vec<Option<i64>>> {
    // u64 values above i64::MAX saturate, then overflow the time arithmetic with an error.
    Some(numeric_map!(values, |x| x as i64))
}

/// CF decoding's error for values that are not numbers.
fn not_numeric(path: &str, values: &dyn Array) -> Error {
    let t = values.data_type();
    Error::table(
        path,
        format!("array '{path}': CF decoding of {t} values is not supported"),
    )
}

/// True where a value equals one of `missing` (compared as f64; NaN equals NaN).
fn missing_mask(values: &dyn Array, missing: &[f64]) -> BooleanArray {
    let is_missing = |x: f64| {
        missing
            .iter()
            .any(|m| x == *m || (x.is_nan() && m.is_nan()))
    };
    match to_f64(values) {
        Some(v) => v
            .into_iter()
            .map(|x| Some(x.is_some_and(is_missing)))
            .collect(),
        None => BooleanArray::from(vec![false; values.len()]),
    }
}

/// `<unit>` and `<date>` of CF time units. Integer data keep exact units (days, hours,
/// minutes and seconds → seconds); float data get one unit finer.
fn parse_time(unit: &str, since: &str, float: bool) -> Option<CfTime> {
    let (base, seconds_per): (TimeUnit, i64) = match unit.to_ascii_lowercase().as_str() {
        "days" | "day" | "d" => (TimeUnit::Second, 86_400),
        "hours" | "hour" | "hr" | "hrs" | "h" => (TimeUnit::Second, 3_600),
        "minutes" | "minute" | "min" | "mins" => (TimeUnit::Second, 60),
        "seconds" | "second" | "sec" | "secs" | "s" => (TimeUnit::Second, 1),
        "milliseconds" | "millisecond" | "msec" | "msecs" | "ms" => (TimeUnit::Millisecond, 1),
        "microseconds" | "microsecond" | "usec" | "usecs" | "us" => (TimeUnit::Microsecond, 1),
        "nanoseconds" | "nanosecond" | "nsec" | "nsecs" | "ns" => (TimeUnit::Nanosecond, 1),
        _ => return None,
    };
    let unit = if float {
        match base {
            TimeUnit::Second => TimeUnit::Millisecond,
            TimeUnit::Millisecond => TimeUnit::Microsecond,
            _ => TimeUnit::Nanosecond,
        }
    } else {
        base
    };
    let per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let base_per_second: i64 = match base {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    // factor: target units per stored unit
    let factor = if base == TimeUnit::Second {
        seconds_per * per_second
    } else {
        per_second / base_per_second
    };
    let (secs, nanos) = parse_date(since)?;
    let epoch = secs
        .checked_mul(per_second)?
        .checked_add(nanos * per_second / 1_000_000_000)?;
    Some(CfTime {
        unit,
        factor,
        epoch,
        duration: false,
    })
}

/// The largest year (either side of 0) a CF reference date may name: more than any Arrow
/// timestamp can hold, small enough that date arithmetic cannot overflow.
const MAX_YEAR: i64 = 1_000_000_000;

/// `YYYY-M-D[( |T)H:M[:S[.f]]][ ][Z|UTC|±HH[:MM]]` → (seconds since 1970-01-01 UTC, nanoseconds).
fn parse_date(s: &str) -> Option<(i64, i64)> {
    let s = s.trim();
    let (date, rest) = match s.find(['T', ' ']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let (neg_year, date) = match date.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, date),
    };
    let mut parts = date.split('-');
    let mut year: i64 = parts.next()?.parse().ok()?;
    if neg_year {
        year = -year;
    }
    let month: i64 = parts.next().map_or(Some(1), |m| m.parse().ok())?;
    let day: i64 = parts.next().map_or(Some(1), |d| d.parse().ok())?;
    // Bounded fields keep the arithmetic below far from overflow (no wrapped dates).
    if parts.next().is_some()
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || !(-MAX_YEAR..=MAX_YEAR).contains(&year)
    {
        return None;
    }
    // time and zone
    let (time, zone) = match rest.find(['Z', 'U', '+', '-', ' ']) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let mut hms = time.split(':').filter(|p| !p.is_empty());
    let h: i64 = hms.next().map_or(Some(0), |x| x.parse().ok())?;
    let mi: i64 = hms.next().map_or(Some(0), |x| x.parse().ok())?;
    let (sec, nanos) = match hms.next() {
        None => (0, 0),
        Some(x) => match x.split_once('.') {
            None => (x.parse().ok()?, 0),
            Some((w, f)) => {
                let digits: String = f.chars().take(9).collect();
                let scale = 10i64.pow(9 - digits.len() as u32);
                (w.parse().ok()?, digits.parse::<i64>().ok()? * scale)
            }
        },
    };
    if !(0..=24).contains(&h) || !(0..=59).contains(&mi) || !(0..=60).contains(&sec) {
        return None;
    }
    let offset = match zone {
        "" | "Z" | "UTC" | "utc" | "GMT" => 0,
        z => {
            let (sign, rest) = match (z.strip_prefix('+'), z.strip_prefix('-')) {
                (Some(rest), _) => (1, rest),
                (_, Some(rest)) => (-1, rest),
                _ => return None,
            };
            let digits: String = rest.chars().filter(char::is_ascii_digit).collect();
            let (oh, om) = match digits.len() {
                1 | 2 => (digits.parse::<i64>().ok()?, 0),
                4 => (
                    digits[..2].parse::<i64>().ok()?,
                    digits[2..].parse::<i64>().ok()?,
                ),
                _ => return None,
            };
            if oh > 24 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + h * 3600 + mi * 60 + sec - offset, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #[test]
    fn masks_apply_to_sliced_booleans() {
        use arrow_array::Array;
        // A nullable-boolean column read from the second half of a chunk: a bit-offset slice
        // (found by fuzz/fuzz_targets/open_store.rs: 10 rows at offset 10 need 3 bytes of
        // validity under the offset, nullif gives 2).
        let values: ArrayRef = Arc::new(BooleanArray::from(vec![true; 20]).slice(10, 10));
        let mask = BooleanArray::from((0..10).map(|i| i % 3 == 0).collect::<Vec<_>>());
        let out = super::null_where(values, &mask).unwrap();
        out.to_data().validate_full().unwrap();
        assert_eq!(out.null_count(), 4);
        assert!(out.is_null(0) && out.is_valid(1) && out.is_null(9));
    }

    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01"), Some((0, 0)));
        assert_eq!(parse_date("2024-01-01"), Some((1_704_067_200, 0)));
        assert_eq!(parse_date("2024-1-1 06:00:00"), Some((1_704_088_800, 0)));
        assert_eq!(parse_date("2024-01-01T06:00:00Z"), Some((1_704_088_800, 0)));
        assert_eq!(
            parse_date("2024-01-01 06:00:00+01:00"),
            Some((1_704_085_200, 0))
        );
        assert_eq!(
            parse_date("1900-01-01 00:00:00.5"),
            Some((-2_208_988_800, 500_000_000))
        );
        assert_eq!(parse_date("not a date"), None);
        // Fields that would overflow the arithmetic into a wrong date are refused.
        for hostile in [
            "99999999999999-01-01",
            "-9223372036854775807-01-01",
            "2000-01-01 99999999999999:00",
            "2000-01-01 00:00:9223372036854775807",
            "2000-01-01 00:00+99999",
            // a zone that starts with a multi-byte character (sliced at byte 1 once)
            "2000-01-01 00:00:00 é5",
            "2000-01-01 00:00:00 Ĳ",
        ] {
            assert_eq!(parse_date(hostile), None, "{hostile}");
        }
    }

    #[test]
    fn time_units() {
        let t = parse_time("hours", "2024-01-01", false).unwrap();
        assert_eq!(
            (t.unit, t.factor, t.epoch),
            (TimeUnit::Second, 3600, 1_704_067_200)
        );
        let t = parse_time("days", "1970-01-01", true).unwrap();
        assert_eq!(
            (t.unit, t.factor, t.epoch),
            (TimeUnit::Millisecond, 86_400_000, 0)
        );
        let t = parse_time("ns", "1970-01-01", false).unwrap();
        assert_eq!((t.unit, t.factor), (TimeUnit::Nanosecond, 1));
        assert!(parse_time("fortnights", "1970-01-01", false).is_none());
    }

    #[test]
    fn base64_fill() {
        // xarray writes a float _FillValue on zarr v3 as base64 of the f64
        let v = Value::String("AAAAAICHw8A=".into());
        assert_eq!(fill_attr(&v, &DataType::Float32), Some(-9999.0));
        assert_eq!(
            fill_attr(&serde_json::json!(-1), &DataType::Int8),
            Some(-1.0)
        );
        assert!(fill_attr(&serde_json::json!("NaN"), &DataType::Float32)
            .unwrap()
            .is_nan());
    }

    #[test]
    fn scale_and_mask() {
        let cf = CfDecode {
            missing: vec![-1.0],
            scale: Some(0.5),
            offset: Some(10.0),
            time: None,
        };
        let out = cf
            .apply("x", Arc::new(arrow_array::Int16Array::from(vec![0, -1, 4])))
            .unwrap();
        let out = out.as_primitive::<Float64Type>();
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![Some(10.0), None, Some(12.0)]
        );
    }

    #[test]
    fn int64_min_is_nat_in_int64_times_only() {
        // xarray writes NaT as int64 min without a _FillValue; an int32 value is just a time.
        let hours = CfDecode {
            time: parse_time("hours", "2024-01-01", false),
            ..Default::default()
        };
        let out = hours
            .apply(
                "t",
                Arc::new(arrow_array::Int64Array::from(vec![1, i64::MIN, 0])),
            )
            .unwrap();
        let out = out.as_primitive::<TimestampSecondType>();
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            vec![Some(1_704_070_800), None, Some(1_704_067_200)]
        );
        let seconds = CfDecode {
            time: parse_time("seconds", "1970-01-01", false),
            ..Default::default()
        };
        let out = seconds
            .apply("t", Arc::new(arrow_array::Int32Array::from(vec![i32::MIN])))
            .unwrap();
        assert_eq!(
            out.as_primitive::<TimestampSecondType>().value(0),
            i32::MIN as i64
        );
    }
}
