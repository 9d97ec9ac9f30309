//! Per-core conversion-plan cache, keyed by table id and valid for one table revision (an
//! ALTER publishes a new revision; the plan recompiles only if schema or mapping changed).

use std::sync::Arc;

use kafluss_convert::ConversionPlan;

use crate::catalog::model::TableInfo;
use crate::idhash::IdMap;

/// Why a table has no conversion plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("Kafka mapping of {0} is disabled")]
    MappingDisabled(String),
    #[error("table {table} cannot be written from Kafka: {source}")]
    Compile {
        table: String,
        #[source]
        source: kafluss_convert::PlanError,
    },
}

/// The compiled plans of one core.
#[derive(Default)]
pub struct PlanCache {
    plans: IdMap<u64, (Arc<TableInfo>, Arc<ConversionPlan>)>,
}

impl PlanCache {
    /// The plan of `table`'s current version, compiled on first use and after a change of
    /// its schema or mapping.
    pub fn get(&mut self, table: &Arc<TableInfo>) -> Result<Arc<ConversionPlan>, PlanError> {
        if let Some((cached_table, plan)) = self.plans.get_mut(&table.id) {
            if cached_table.revision == table.revision {
                return Ok(plan.clone());
            }
            if cached_table.schema == table.schema && cached_table.kafka == table.kafka {
                *cached_table = table.clone();
                return Ok(plan.clone());
            }
        }
        let path = || format!("{}.{}", table.database, table.name);
        let mapping = table
            .kafka
            .as_ref()
            .ok_or_else(|| PlanError::MappingDisabled(path()))?;
        let plan = Arc::new(ConversionPlan::compile(&table.schema, mapping).map_err(|source| {
            PlanError::Compile {
                table: path(),
                source,
            }
        })?);
        self.plans.insert(table.id, (table.clone(), plan.clone()));
        Ok(plan)
    }

    /// Forgets a dropped table's plan (ids are never reused: it would stay for ever).
    pub fn forget(&mut self, table_id: u64) {
        self.plans.remove(&table_id);
    }

    /// Tables with a cached plan.
    pub fn len(&self) -> usize {
        self.plans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::append::tests::fixture;

    #[test]
    fn a_dropped_tables_plan_is_forgotten() {
        let (_dir, _config, table) = fixture();
        let mut cache = PlanCache::default();
        cache.get(&table).unwrap();
        assert_eq!(cache.len(), 1);
        cache.forget(table.id + 1);
        assert_eq!(cache.len(), 1, "another table's id forgets nothing");
        cache.forget(table.id);
        assert!(cache.is_empty());
    }
}
