//! zarrow-datafusion
