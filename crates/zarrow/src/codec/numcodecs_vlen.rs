//! numcodecs `vlen-utf8` and `vlen-bytes` (v3 names with or without the `numcodecs.` prefix,
//! v2 object-array filters): a u32 count, then a u32 length and the bytes of each item. Their
//! configuration, if any, is ignored (zarr-python writes an empty one).

use super::config::{Config, ConfigError};
use super::registry::Codec;
use super::ArrayToBytes;
use crate::data_type::DataType;

/// `vlen-utf8`.
pub(super) fn utf8(_c: &Config<'_>, _data_type: &DataType) -> Result<Codec, ConfigError> {
    Ok(Codec::ArrayToBytes(ArrayToBytes::VlenUtf8))
}

/// `vlen-bytes`.
pub(super) fn bytes(_c: &Config<'_>, _data_type: &DataType) -> Result<Codec, ConfigError> {
    Ok(Codec::ArrayToBytes(ArrayToBytes::VlenBytes))
}
