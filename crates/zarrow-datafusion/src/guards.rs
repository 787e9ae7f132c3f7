//! Guards against DataFusion's own wrong answers and panics, for the plans of a zarrow
//! session (docs/reliability.md, "DataFusion bugs zarrow guards against").
//!
//! [`ConstantFunctionFilters`]: DataFusion 55 takes a filter `f(c) = literal` to make `f(c)`
//! a constant, and from there orders by `c` as if `c` were one too, although a function such
//! as `c / 10` or `CAST(t AS DATE)` holds many values of `c` in one of its own: the sort on
//! `c` is dropped (`… WHERE x / 10 = 0 ORDER BY x` returns rows out of order) and a
//! sort-merge join can miss matches. The filter is given to DataFusion as
//! `NOT (f(c) <> literal)`, the same rows, from which it infers no constant (`c = literal`,
//! a true constant, is kept).
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
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal, NotExpr};
use datafusion::physical_expr::utils::{conjunction, split_conjunction};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode, SortMergeJoinExec};
use datafusion::physical_plan::ExecutionPlan;

/// `plan` with every node of type `T` that `rewrite` gives a replacement for replaced (bottom
/// up).
fn replace_nodes<T: ExecutionPlan + 'static>(
    plan: Arc<dyn ExecutionPlan>,
    rewrite: impl Fn(&T) -> Result<Option<Arc<dyn ExecutionPlan>>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let replaced = match node.downcast_ref::<T>() {
            Some(found) => rewrite(found)?,
            None => None,
        };
        Ok(match replaced {
            Some(new) => Transformed::yes(new),
            None => Transformed::no(node),
        })
    })
    .map(|t| t.data)
}

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
        replace_nodes(plan, |join: &SortMergeJoinExec| {
            if !float_key(join)? {
                return Ok(None);
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
            Ok(Some(Arc::new(hash) as Arc<dyn ExecutionPlan>))
        })
    }

    fn name(&self) -> &str {
        "zarrow_float_key_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Gives DataFusion `f(c) = literal` filters as `NOT (f(c) <> literal)`; see the module
/// documentation.
#[derive(Debug, Default)]
pub struct ConstantFunctionFilters;

/// `conjunct` as DataFusion should see it: `NOT (f(c) <> literal)` for `f(c) = literal` (either
/// way round) where `f(c)` is not a column; `None` when it stays.
fn unconstant(conjunct: &Arc<dyn PhysicalExpr>) -> Option<Arc<dyn PhysicalExpr>> {
    let binary = conjunct.downcast_ref::<BinaryExpr>()?;
    if binary.op() != &Operator::Eq {
        return None;
    }
    let is_literal = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().is_some();
    let is_plain =
        |e: &Arc<dyn PhysicalExpr>| is_literal(e) || e.downcast_ref::<Column>().is_some();
    let (l, r) = (binary.left(), binary.right());
    let function_of_literal = (is_literal(l) && !is_plain(r)) || (is_literal(r) && !is_plain(l));
    if !function_of_literal {
        return None;
    }
    let differs = BinaryExpr::new(Arc::clone(l), Operator::NotEq, Arc::clone(r));
    Some(Arc::new(NotExpr::new(Arc::new(differs))))
}

impl PhysicalOptimizerRule for ConstantFunctionFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        replace_nodes(plan, |filter: &FilterExec| {
            let conjuncts = split_conjunction(filter.predicate());
            if conjuncts.iter().all(|c| unconstant(c).is_none()) {
                return Ok(None);
            }
            let rewritten = conjuncts
                .into_iter()
                .map(|c| unconstant(c).unwrap_or_else(|| Arc::clone(c)));
            let rebuilt = FilterExecBuilder::from(filter)
                .with_predicate(conjunction(rewritten))
                .build()?;
            Ok(Some(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>))
        })
    }

    fn name(&self) -> &str {
        "zarrow_constant_function_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
