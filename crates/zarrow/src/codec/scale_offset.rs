//! `scale_offset` (zarr-extensions): an array-to-array codec that stores
//! `(x - offset) * scale`; decoding computes `x / scale + offset` in the arithmetic of the
//! array's data type (float16 and float32 operations rounded to their type, as numpy does). For
//! an integer type a value that is not a whole multiple of `scale`, or a result outside the
//! type, is a chunk error, as the spec asks. `offset` and `scale` are in the fill-value encoding
//! of the data type; both may be absent (0 and 1).
//!
//! Like `cast_value` it is read before the array-to-bytes codec (inside shards too), as a step
//! on the `bytes` codec's output. Low-precision floats are not computed with here.

use serde_json::Value;

use super::config::{Config, ConfigError};
use super::filters::Filter;
use super::registry::{Codec, Context};
use super::scalar::{self, Scalar};
use super::{config_error, unsupported, ChainError};
use crate::data_type::{parse_fill_value, DataType, Endian};
use crate::error::ChunkError;

/// A `scale_offset` codec, for decoding.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleOffset {
    /// The data type of its input and output.
    pub data_type: DataType,
    /// Subtracted when encoding.
    pub(crate) offset: Scalar,
    /// Multiplied by when encoding.
    pub(crate) scale: Scalar,
    /// The byte order of the elements (the `bytes` codec's).
    pub endian: Endian,
    /// The configuration as written.
    pub config: Value,
}

/// `scale_offset` for elements of `cx.data_type`.
pub(super) fn v3(
    name: &str,
    config: Option<&Value>,
    cx: &Context<'_>,
) -> Result<Codec, ChainError> {
    let err = |e| config_error(name, e);
    let c = Config::from_value(config).map_err(err)?;
    c.only(&["offset", "scale"]).map_err(err)?;
    let dt = cx.data_type;
    let supported = matches!(
        dt,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    ) || (scalar::int_range(dt).is_some() && !matches!(dt, DataType::Bool));
    if !supported {
        return Err(unsupported(
            name,
            format!("cannot compute with {}", dt.name()),
        ));
    }
    let value = |key: &str, default: i128| -> Result<Scalar, ChainError> {
        match c.get(key) {
            None => Ok(Scalar::Int(default)),
            Some(v) => {
                let bytes = parse_fill_value(dt, v, false).map_err(|e| {
                    err(ConfigError::bad_value(
                        key,
                        v,
                        format!("a {} value ({e})", dt.name()),
                    ))
                })?;
                Ok(scalar::read(dt, Endian::Little, &bytes.bytes))
            }
        }
    };
    let (offset, scale) = (value("offset", 0)?, value("scale", 1)?);
    if scale.to_f64() == 0.0 || scale.to_f64().is_nan() {
        return Err(err(ConfigError::bad_value(
            "scale",
            c.get("scale").unwrap_or(&Value::Null),
            "a number other than 0 (decoding divides by it)",
        )));
    }
    Ok(Codec::Filter(Filter::ScaleOffset(ScaleOffset {
        data_type: dt.clone(),
        offset,
        scale,
        endian: Endian::Little,
        config: config.cloned().unwrap_or(Value::Null),
    })))
}

impl ScaleOffset {
    /// `x / scale + offset` as bits of the data type.
    fn apply(&self, x: Scalar) -> Result<u64, String> {
        let (s, o) = (self.scale, self.offset);
        match (&self.data_type, x, s, o) {
            (DataType::Float64, ..) => Ok((x.to_f64() / s.to_f64() + o.to_f64()).to_bits()),
            (DataType::Float32, ..) => {
                let v = (x.to_f64() as f32) / (s.to_f64() as f32) + (o.to_f64() as f32);
                Ok(u64::from(v.to_bits()))
            }
            (DataType::Float16, ..) => {
                let h = |v: Scalar| half::f16::from_f64(v.to_f64());
                Ok(u64::from((h(x) / h(s) + h(o)).to_bits()))
            }
            (dt, Scalar::Int(x), Scalar::Int(s), Scalar::Int(o)) => {
                let (min, max) = scalar::int_range(dt).unwrap_or((0, 0));
                let v = (x % s == 0)
                    .then(|| x / s + o)
                    .filter(|v| (min..=max).contains(v))
                    .ok_or_else(|| format!("{x} / {s} + {o} is not a {} value", dt.name()))?;
                Ok(v as u64)
            }
            (dt, ..) => Err(format!("cannot compute with {}", dt.name())),
        }
    }

    /// Decode the elements of `input` (as many bytes out as in, at most `max_size`).
    pub(crate) fn decode(&self, input: &[u8], max_size: usize) -> Result<Vec<u8>, ChunkError> {
        let size = self.data_type.fixed_size().unwrap_or(1);
        scalar::map_elements(
            "scale_offset",
            input,
            (size, size),
            max_size,
            self.endian,
            |b| self.apply(scalar::read(&self.data_type, self.endian, b)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(dt: &DataType, config: Value) -> Result<ScaleOffset, ChainError> {
        match v3(
            "scale_offset",
            Some(&config),
            &Context {
                data_type: dt,
                ndim: 1,
            },
        )? {
            Codec::Filter(Filter::ScaleOffset(c)) => Ok(c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn floats_and_integers() {
        let c = codec(&DataType::Float32, json!({"offset": 5, "scale": 0.1})).unwrap();
        let out = c
            .decode(&[1.0f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat(), 8)
            .unwrap();
        let want = [1.0f32 / 0.1 + 5.0, -2.0f32 / 0.1 + 5.0];
        assert_eq!(out, [want[0].to_le_bytes(), want[1].to_le_bytes()].concat());
        let c = codec(&DataType::Int16, json!({"offset": -3, "scale": 4})).unwrap();
        assert_eq!(c.decode(&[8, 0], 2).unwrap(), (-1i16).to_le_bytes());
        assert!(c.decode(&[9, 0], 2).is_err(), "9 / 4 is no int16");
        let c = codec(&DataType::UInt8, json!({"offset": 250})).unwrap();
        assert!(c.decode(&[10], 1).is_err(), "260 is no uint8");
        assert_eq!(
            codec(&DataType::Float64, json!({}))
                .unwrap()
                .decode(&2.5f64.to_le_bytes(), 8)
                .unwrap(),
            2.5f64.to_le_bytes()
        );
    }

    #[test]
    fn configurations_are_checked() {
        for bad in [
            json!({"scale": 0}),
            json!({"offset": "x"}),
            json!({"factor": 2}),
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
            codec(&DataType::String, json!({})),
            Err(ChainError::Unsupported { .. })
        ));
        assert!(matches!(
            codec(&DataType::Int8, json!({"scale": 0.5})),
            Err(ChainError::Config { .. })
        ));
    }
}
