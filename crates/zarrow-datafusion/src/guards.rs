//! Guards against DataFusion's own wrong answers and panics, for the plans of a zarrow
//! session (docs/reliability.md, "DataFusion bugs zarrow guards against").
//!
//! [`FloatKeyJoins`]: DataFusion 55's sort-merge join compares float join keys with
//! `partial_cmp(..).unwrap()` (`joins/utils.rs`, `compare_join_arrays`), which panics on NaN.
//! A sort-merge join with a float key is planned as a hash join instead (same rows: both
//! compare keys as Arrow does, a NaN equal to a NaN), before the rules that add the
//! repartitioning and sorting a join needs.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode, SortMergeJoinExec};
use datafusion::physical_plan::ExecutionPlan;

/// Plans a sort-merge join on a float key as a hash join; see the module documentation.
#[derive(Debug, Default)]
pub struct FloatKeyJoins;

/// Whether a join key of `join` is a float (on either side).
fn float_key(join: &SortMergeJoinExec) -> Result<bool> {
    let (left, right) = (join.left().schema(), join.right().schema());
    for (l, r) in join.on() {
        for ty in [l.data_type(&left)?, r.data_type(&right)?] {
            if matches!(
                ty,
                DataType::Float16 | DataType::Float32 | DataType::Float64
            ) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

impl PhysicalOptimizerRule for FloatKeyJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<SortMergeJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if !float_key(join)? {
                return Ok(Transformed::no(node));
            }
            let hash = HashJoinExec::try_new(
                join.left().clone(),
                join.right().clone(),
                join.on().to_vec(),
                join.filter().clone(),
                &join.join_type(),
                None,
                PartitionMode::Auto,
                join.null_equality(),
                false,
            )?;
            Ok(Transformed::yes(Arc::new(hash) as Arc<dyn ExecutionPlan>))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "zarrow_float_key_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
