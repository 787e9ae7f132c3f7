//! `cast_value` (zarr-extensions): an array-to-array codec that stores the values of the
//! array's data type as another numeric `data_type`. Decoding casts them back: a `scalar_map`
//! `decode` entry first (e.g. a sentinel back to NaN), then an exact value as it is, else
//! `rounding` (default nearest-even) and `out_of_range` (`error` by default, `clamp`, or `wrap`
//! for integers). NaN or an infinity into a type without them is an error unless mapped.
//!
//! zarrow reads it where it stands before the array-to-bytes codec (inside shards too), as a
//! step on the `bytes` codec's output, like numcodecs' filters. Rounding into a float type is
//! nearest-even only; another mode there is an error naming it when a value needs rounding.

use serde_json::Value;

use super::config::{Config, ConfigError};
use super::filters::Filter;
use super::registry::{Codec, Context};
use super::scalar::{self, Scalar};
use super::{config_error, unsupported, ChainError};
use crate::data_type::{parse_fill_value, parse_v3_data_type, DataType, Endian};
use crate::error::ChunkError;

/// How a value between two representable ones is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// To nearest, ties to even.
    NearestEven,
    /// Toward zero.
    TowardsZero,
    /// Toward +infinity.
    TowardsPositive,
    /// Toward -infinity.
    TowardsNegative,
    /// To nearest, ties away from zero.
    NearestAway,
}

/// What happens to a value outside the target type's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRange {
    /// A chunk error.
    Error,
    /// The type's least or greatest value (±infinity for floats that have them).
    Clamp,
    /// Modulo 2^bits (integer types only).
    Wrap,
}

/// A `cast_value` codec, for decoding.
#[derive(Debug, Clone, PartialEq)]
pub struct CastValue {
    /// The type values are stored as (`data_type`).
    pub stored: DataType,
    /// The type they decode to (the codec's input type).
    pub decoded: DataType,
    /// The rounding mode.
    pub rounding: Rounding,
    /// The out-of-range rule.
    pub out_of_range: OutOfRange,
    /// `scalar_map.decode`: stored value → decoded element's little-endian bytes.
    pub(crate) decode_map: Vec<(Scalar, Vec<u8>)>,
    /// The byte order of the elements (the `bytes` codec's).
    pub endian: Endian,
    /// The configuration as written.
    pub config: Value,
}

fn parse_rounding(s: Option<&str>) -> Result<Rounding, ConfigError> {
    Ok(match s {
        None | Some("nearest-even") => Rounding::NearestEven,
        Some("towards-zero") => Rounding::TowardsZero,
        Some("towards-positive") => Rounding::TowardsPositive,
        Some("towards-negative") => Rounding::TowardsNegative,
        Some("nearest-away") => Rounding::NearestAway,
        Some(other) => {
            return Err(ConfigError::bad_value(
                "rounding",
                format!("'{other}'"),
                "nearest-even, towards-zero, towards-positive, towards-negative or nearest-away",
            ))
        }
    })
}

/// `scalar_map.decode`: pairs of (stored value, decoded value), each in its type's fill-value
/// encoding; the first of a repeated key wins.
fn decode_map(
    c: &Config<'_>,
    stored: &DataType,
    decoded: &DataType,
) -> Result<Vec<(Scalar, Vec<u8>)>, ConfigError> {
    let Some(map) = c.get("scalar_map") else {
        return Ok(Vec::new());
    };
    let bad = || {
        ConfigError::bad_value(
            "scalar_map",
            map,
            "{\"encode\": [[in, out], …], \"decode\": [[in, out], …]}",
        )
    };
    let obj = map.as_object().ok_or_else(bad)?;
    if obj.keys().any(|k| k != "encode" && k != "decode") {
        return Err(bad());
    }
    let mut out: Vec<(Scalar, Vec<u8>)> = Vec::new();
    for pair in obj
        .get("decode")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let [key, value] = pair.as_array().map(Vec::as_slice).unwrap_or_default() else {
            return Err(bad());
        };
        let key = parse_fill_value(stored, key, false).map_err(|_| bad())?;
        let key = scalar::read(stored, Endian::Little, &key.bytes);
        let value = parse_fill_value(decoded, value, false).map_err(|_| bad())?;
        if !out.iter().any(|(k, _)| k.same(key)) {
            out.push((key, value.bytes.to_vec()));
        }
    }
    Ok(out)
}

/// `cast_value`, whose input (decoded) type is `cx.data_type`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let err = |e| config_error(name, e);
    let c = Config::from_value(config).map_err(err)?;
    c.only(&["data_type", "rounding", "out_of_range", "scalar_map"])
        .map_err(err)?;
    let dt_json = c
        .get("data_type")
        .ok_or_else(|| err(ConfigError::missing("data_type")))?;
    let stored = parse_v3_data_type(dt_json)
        .map_err(|e| err(ConfigError::bad_value("data_type", dt_json, e.to_string())))?;
    for t in [&stored, cx.data_type] {
        if !scalar::is_numeric(t) {
            return Err(unsupported(
                name,
                format!("casts numbers, not {}", t.name()),
            ));
        }
    }
    let out_of_range = match c.str("out_of_range").map_err(err)? {
        None | Some("error") => OutOfRange::Error,
        Some("clamp") => OutOfRange::Clamp,
        Some("wrap") => OutOfRange::Wrap,
        Some(other) => {
            return Err(err(ConfigError::bad_value(
                "out_of_range",
                format!("'{other}'"),
                "error, clamp or wrap",
            )))
        }
    };
    Ok(Codec::Filter(Filter::CastValue(Box::new(CastValue {
        rounding: parse_rounding(c.str("rounding").map_err(err)?).map_err(err)?,
        decode_map: decode_map(&c, &stored, cx.data_type).map_err(err)?,
        stored,
        decoded: cx.data_type.clone(),
        out_of_range,
        endian: Endian::Little,
        config: config.cloned().unwrap_or(Value::Null),
    }))))
}

fn round(f: f64, mode: Rounding) -> f64 {
    match mode {
        Rounding::NearestEven => f.round_ties_even(),
        Rounding::TowardsZero => f.trunc(),
        Rounding::TowardsPositive => f.ceil(),
        Rounding::TowardsNegative => f.floor(),
        Rounding::NearestAway => f.round(),
    }
}

impl CastValue {
    /// Bytes of one stored and one decoded element.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (
            self.stored.fixed_size().unwrap_or(1),
            self.decoded.fixed_size().unwrap_or(1),
        )
    }

    /// The decoded bits of the stored value `v`.
    fn cast(&self, v: Scalar) -> Result<u64, String> {
        if let Some((_, bytes)) = self.decode_map.iter().find(|(k, _)| k.same(v)) {
            let mut le = [0u8; 8];
            le[..bytes.len()].copy_from_slice(bytes);
            return Ok(u64::from_le_bytes(le));
        }
        let to = &self.decoded;
        if let Some((min, max)) = scalar::int_range(to) {
            let i = match v {
                Scalar::Int(i) => i,
                Scalar::Float(f) if f.is_nan() => return Err(format!("NaN into {}", to.name())),
                Scalar::Float(f) if f.is_infinite() && self.out_of_range == OutOfRange::Clamp => {
                    if f > 0.0 {
                        max
                    } else {
                        min
                    }
                }
                Scalar::Float(f) if f.is_infinite() => {
                    return Err(format!("{f} into {}", to.name()))
                }
                Scalar::Float(f) => round(f, self.rounding) as i128,
            };
            let i = match self.out_of_range {
                _ if (min..=max).contains(&i) => i,
                OutOfRange::Clamp => i.clamp(min, max),
                OutOfRange::Wrap if !matches!(to, DataType::Bool) => {
                    min + (i - min).rem_euclid(max - min + 1)
                }
                _ => return Err(format!("{i} is outside {}", to.name())),
            };
            return Ok(i as u64);
        }
        let f = v.to_f64();
        let (has_inf, has_nan) = scalar::float_has(to);
        if (f.is_nan() && !has_nan) || (f.is_infinite() && !has_inf) {
            return Err(format!("{f} into {}", to.name()));
        }
        let max = scalar::float_max(to);
        let f = if f.is_finite() && f.abs() > max {
            match self.out_of_range {
                OutOfRange::Clamp if has_inf => f.signum() * f64::INFINITY,
                OutOfRange::Clamp => f.signum() * max,
                _ => return Err(format!("{f} is outside {}", to.name())),
            }
        } else {
            f
        };
        let bits = scalar::float_bits(to, f).ok_or("not a number type")?;
        if self.rounding != Rounding::NearestEven {
            let back = scalar::read(to, Endian::Little, &bits.to_le_bytes()[..self.sizes().1]);
            if !back.same(Scalar::Float(f)) {
                return Err(format!(
                    "{f} needs rounding into {}: only nearest-even is read",
                    to.name()
                ));
            }
        }
        Ok(bits)
    }

    /// Decode the stored elements of `input` into at most `max_size` bytes.
    pub(crate) fn decode(&self, input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
        scalar::map_elements(
            "cast_value",
            input,
            self.sizes(),
            max_size,
            self.endian,
            |b| self.cast(scalar::read(&self.stored, self.endian, b)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(decoded: &DataType, config: Value) -> Result<CastValue, ChainError> {
        match v3(
            "cast_value",
            Some(&config),
            &Context {
                data_type: decoded,
                ndim: 1,
            },
        )? {
            Codec::Filter(Filter::CastValue(c)) => Ok(*c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn uint8_back_to_float32_with_a_nan_sentinel() {
        let c = codec(
            &DataType::Float32,
            json!({"data_type": "uint8",
            "scalar_map": {"encode": [["NaN", 255]], "decode": [[255, "NaN"], [255, 1.0]]}}),
        )
        .unwrap();
        let out = c.decode(&[0, 7, 255], 12).unwrap();
        let v: Vec<f32> = out
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(&v[..2], &[0.0, 7.0]);
        assert!(v[2].is_nan());
        assert!(c.decode(&[0, 7], 4).is_err(), "over the bound");
    }

    #[test]
    fn integers_round_clamp_and_wrap() {
        let c = codec(
            &DataType::Int8,
            json!({"data_type": "int16", "out_of_range": "wrap"}),
        )
        .unwrap();
        assert_eq!(c.decode(&[0x80, 0, 0x81, 0x7f], 2).unwrap(), [0x80, 0x81]);
        let c = codec(
            &DataType::Int8,
            json!({"data_type": "int16", "out_of_range": "clamp"}),
        )
        .unwrap();
        assert_eq!(c.decode(&[0x80, 0, 0x00, 0xff], 2).unwrap(), [0x7f, 0x80]);
        let c = codec(&DataType::Int8, json!({"data_type": "int16"})).unwrap();
        assert!(c.decode(&[0x80, 0], 1).is_err());
        let c = codec(
            &DataType::Int16,
            json!({"data_type": "float32", "rounding": "towards-negative"}),
        )
        .unwrap();
        assert_eq!(
            c.decode(&(-2.5f32).to_le_bytes(), 2).unwrap(),
            (-3i16).to_le_bytes()
        );
        let c = codec(&DataType::Int16, json!({"data_type": "float32"})).unwrap();
        assert_eq!(
            c.decode(&(2.5f32).to_le_bytes(), 2).unwrap(),
            2i16.to_le_bytes()
        );
        assert!(c.decode(&f32::NAN.to_le_bytes(), 2).is_err());
    }

    #[test]
    fn configurations_are_checked() {
        for bad in [
            json!({}),
            json!({"data_type": "uint8", "rounding": "up"}),
            json!({"data_type": "uint8", "out_of_range": "saturate"}),
            json!({"data_type": "uint8", "extra": 1}),
            json!({"data_type": "uint8", "scalar_map": {"decode": [[1]]}}),
        ] {
            assert!(
                matches!(
                    codec(&DataType::Float32, bad.clone()),
                    Err(ChainError::Config { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            codec(&DataType::String, json!({"data_type": "uint8"})),
            Err(ChainError::Unsupported { .. })
        ));
    }
}
