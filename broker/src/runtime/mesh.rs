//! The cross-core mesh: a job whose bucket another core owns crosses the bounded `append` mesh
//! as an owned [`AppendJob`] (the still-compressed batch bytes and an `Arc` of the table), and
//! its outcome comes back over the `reply` mesh to the connection's core. Requests and replies
//! use separate meshes so that a core blocked on a full request channel can always drain
//! replies: no cycle can deadlock.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use glommio::channels::channel_mesh::{Receivers, Senders};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use super::routing::BucketOwners;
use crate::append::bucket::Buckets;
use crate::append::{AppendError, AppendJob, AppendOutcome, Reply, Submit};
use crate::idhash::IdMap;
use crate::telemetry::CoreTelemetry;

/// A message on the append mesh.
pub struct MeshAppend {
    pub request_id: u64,
    pub job: AppendJob,
}

/// A message on the reply mesh.
pub struct MeshReply {
    pub request_id: u64,
    pub outcome: AppendOutcome,
}

/// Where a bucket actor of this core sends an outcome.
pub enum ReplyTo {
    Local(LocalSender<AppendOutcome>),
    Remote {
        replies: Rc<Senders<MeshReply>>,
        core: usize,
        request_id: u64,
    },
}

impl Reply for ReplyTo {
    async fn send(self, outcome: AppendOutcome) {
        match self {
            ReplyTo::Local(tx) => {
                let _ = tx.try_send(outcome);
            }
            ReplyTo::Remote {
                replies,
                core,
                request_id,
            } => {
                let _ = replies.send_to(core, MeshReply { request_id, outcome }).await;
            }
        }
    }
}

/// This core's end of the mesh: routes each job to its owner's bucket actors.
pub struct Router {
    id: usize,
    cores: usize,
    telemetry: Rc<CoreTelemetry>,
    buckets: Rc<Buckets<ReplyTo>>,
    owners: Arc<BucketOwners>,
    /// The owners this core has looked up (they do not change while the table exists).
    known_owners: RefCell<IdMap<(u64, u32), usize>>,
    append_tx: Senders<MeshAppend>,
    reply_tx: Rc<Senders<MeshReply>>,
    pending: RefCell<IdMap<u64, LocalSender<AppendOutcome>>>,
    next_request_id: Cell<u64>,
}

impl Router {
    pub fn new(
        telemetry: Rc<CoreTelemetry>,
        buckets: Rc<Buckets<ReplyTo>>,
        owners: Arc<BucketOwners>,
        append_tx: Senders<MeshAppend>,
        reply_tx: Senders<MeshReply>,
    ) -> Rc<Self> {
        Rc::new(Self {
            id: append_tx.peer_id(),
            cores: append_tx.nr_consumers(),
            telemetry,
            buckets,
            owners,
            known_owners: RefCell::new(IdMap::default()),
            append_tx,
            reply_tx: Rc::new(reply_tx),
            pending: RefCell::new(IdMap::default()),
            next_request_id: Cell::new(0),
        })
    }

    /// Whether this core owns `bucket` of `table_id` (claims nothing).
    pub fn owns(&self, table_id: u64, bucket: u32) -> bool {
        self.owners.get(table_id, bucket) == Some(self.id)
    }

    /// The owner of `bucket` of `table_id`, claimed for this core if it has none
    /// ([`BucketOwners::claim`]).
    fn owner(&self, table_id: u64, bucket: u32) -> usize {
        if let Some(&owner) = self.known_owners.borrow().get(&(table_id, bucket)) {
            return owner;
        }
        let owner = self.owners.claim(table_id, bucket, self.id).min(self.cores - 1);
        self.known_owners.borrow_mut().insert((table_id, bucket), owner);
        owner
    }

    /// Forgets the owners of a dropped table's buckets that this core looked up.
    pub fn forget_table(&self, table_id: u64) {
        self.known_owners
            .borrow_mut()
            .retain(|&(id, _), _| id != table_id);
    }

    async fn route(&self, job: AppendJob) -> LocalReceiver<AppendOutcome> {
        let (tx, rx) = local_channel::new_bounded(1);
        // A job resolved before its table was dropped: this core's bucket actors answer it
        // (TableDropped). Claiming an owner here would leave an entry for a table that no
        // longer exists (the DROP has already forgotten the table's owners, or will not look
        // again), counted against the core by every later claim.
        if self.buckets.is_dropped(job.table.id) {
            self.buckets.submit(job, ReplyTo::Local(tx)).await;
            return rx;
        }
        let owner = self.owner(job.table.id, job.bucket);
        if owner == self.id {
            self.telemetry.metrics().record_local_append();
            self.buckets.submit(job, ReplyTo::Local(tx)).await;
        } else {
            self.telemetry.metrics().record_cross_core_append();
            let request_id = self.next_request_id.get();
            self.next_request_id.set(request_id.wrapping_add(1));
            self.pending.borrow_mut().insert(request_id, tx);
            if self
                .append_tx
                .send_to(owner, MeshAppend { request_id, job })
                .await
                .is_err()
            {
                if let Some(tx) = self.pending.borrow_mut().remove(&request_id) {
                    let _ = tx.try_send(Err(AppendError::OwnerUnreachable));
                }
            }
        }
        rx
    }

    /// One task per peer and direction: jobs from peers go to this core's bucket actors,
    /// replies from peers to the connection waiting for them.
    pub fn spawn_receivers(
        self: &Rc<Self>,
        append_rx: Receivers<MeshAppend>,
        reply_rx: Receivers<MeshReply>,
    ) -> Vec<glommio::Task<()>> {
        let mut tasks = Vec::new();
        let append_rx = Rc::new(append_rx);
        let reply_rx = Rc::new(reply_rx);
        for peer in 0..self.cores {
            if peer == self.id {
                continue;
            }
            let (router, rx) = (self.clone(), append_rx.clone());
            tasks.push(glommio::spawn_local(async move {
                while let Ok(Some(message)) = rx.recv_from(peer).await {
                    let reply = ReplyTo::Remote {
                        replies: router.reply_tx.clone(),
                        core: peer,
                        request_id: message.request_id,
                    };
                    router.buckets.submit(message.job, reply).await;
                }
            }));
            let (router, rx) = (self.clone(), reply_rx.clone());
            tasks.push(glommio::spawn_local(async move {
                while let Ok(Some(reply)) = rx.recv_from(peer).await {
                    if let Some(tx) = router.pending.borrow_mut().remove(&reply.request_id) {
                        let _ = tx.try_send(reply.outcome);
                    }
                }
            }));
        }
        tasks
    }
}

impl Submit for Router {
    fn submit(&self, job: AppendJob) -> Pin<Box<dyn Future<Output = LocalReceiver<AppendOutcome>> + '_>> {
        Box::pin(self.route(job))
    }

    fn owner_of(&self, table_id: u64, bucket: u32) -> Option<usize> {
        self.known_owners.borrow().get(&(table_id, bucket)).copied()
    }
}

#[cfg(test)]
mod tests {
    use glommio::channels::channel_mesh::MeshBuilder;
    use kafluss_protocol::Compression;

    use super::*;
    use crate::append::tests::{appender, batch, fixture, job, run_local};
    use crate::log::LogRegistry;
    use crate::metrics::Metrics;

    /// A batch resolved before its table was dropped and routed after the DROP reached this
    /// core is answered TableDropped and claims no owner: the shared table keeps no entry for
    /// a table that no longer exists, so later claims count only live buckets.
    #[test]
    fn a_job_for_a_dropped_table_claims_no_owner() {
        let (_dir, config, table) = fixture();
        let registry = Arc::new(LogRegistry::new());
        run_local(async move {
            let owners = Arc::new(BucketOwners::new(1));
            let buckets: Rc<Buckets<ReplyTo>> = Buckets::new(appender(&config, &registry));
            let (append_tx, _append_rx) = MeshBuilder::<MeshAppend, _>::full(1, 4).join().await.unwrap();
            let (reply_tx, _reply_rx) = MeshBuilder::<MeshReply, _>::full(1, 4).join().await.unwrap();
            let telemetry = Rc::new(CoreTelemetry::new(
                0,
                Arc::new(Metrics::new(1)),
                config.log_repeat_interval,
                config.log_repeat_keys,
            ));
            let router = Router::new(telemetry, buckets.clone(), owners.clone(), append_tx, reply_tx);
            let value = [r#"{"id": 1, "name": "a"}"#];

            let appended = router
                .route(job(&table, 0, batch(&value, Compression::None), 1))
                .await;
            assert!(appended.recv().await.unwrap().is_ok());
            assert_eq!(
                owners.get(table.id, 0),
                Some(0),
                "the first batch claims bucket 0"
            );

            // DROP TABLE as the hook runs it: every core closes the table, then the shared
            // owners forget it.
            buckets.close_table(table.id).await;
            router.forget_table(table.id);
            owners.forget_table(table.id);

            for bucket in [0, 1] {
                let late = router
                    .route(job(&table, bucket, batch(&value, Compression::None), 1))
                    .await;
                assert!(matches!(
                    late.recv().await.unwrap(),
                    Err(AppendError::TableDropped(_))
                ));
                assert_eq!(
                    owners.get(table.id, bucket),
                    None,
                    "bucket {bucket} claimed after the drop"
                );
            }
            assert!(router.known_owners.borrow().is_empty());
            buckets.close_all().await;
        });
    }
}
