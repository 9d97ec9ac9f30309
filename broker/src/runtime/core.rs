//! One core: bind its Kafka listeners, join the meshes, open the buckets it owns, accept
//! connections, follow control messages, and at shutdown drain its connections, keep serving
//! the mesh until every core has drained, close its bucket logs, then log what its
//! rate-limited lines left out.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::Gate;

use crate::sched::{AddressAllowances, FairSemaphore, StopSignal};

use super::handoff::Handoff;
use super::mesh::{MeshAppend, MeshReply, ReplyTo, Router};
use super::{ControlMessage, ControlReceiver, KafkaListener, Shared};
use crate::append::bucket::Buckets;
use crate::append::pipeline::Appender;
use crate::kafka::connection::{Carried, Served};
use crate::kafka::context::{AnswerCutoff, KafkaCore};
use crate::telemetry::{CoreTelemetry, Repeats};

/// Why a core could not start (reported to the main thread).
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("cannot bind Kafka listener {name} on {address}: {source}")]
    Bind {
        name: String,
        address: std::net::SocketAddr,
        #[source]
        source: glommio::GlommioError<()>,
    },
    #[error("cannot join the core mesh")]
    MeshJoin,
}

/// Everything a core needs to start, moved into its executor thread.
pub struct CoreStart {
    pub shared: Arc<Shared>,
    pub append_mesh: MeshBuilder<MeshAppend, Full>,
    pub reply_mesh: MeshBuilder<MeshReply, Full>,
    pub handoff_mesh: MeshBuilder<Handoff, Full>,
    pub ready: crossbeam_channel::Sender<Result<usize, CoreError>>,
    /// Told the core's index when `run_core` returns, so the main thread notices a core that
    /// ended. (A panic never unwinds out of it: glommio keeps the executor's futures, and the
    /// server aborts on a core's panic, see `server::abort_on_core_panic`.)
    pub exited: crossbeam_channel::Sender<usize>,
    pub control: ControlReceiver,
}

/// Runs one core until shutdown: bind, join the meshes, serve, drain, flush.
pub async fn run_core(start: CoreStart) {
    let CoreStart {
        shared,
        append_mesh,
        reply_mesh,
        handoff_mesh,
        ready,
        exited,
        control,
    } = start;
    let _exit_notice = ExitNotice(exited, Cell::new(usize::MAX));
    let mut listeners = Vec::new();
    for listener in &shared.kafka_listeners {
        match TcpListener::bind(listener.bound) {
            Ok(bound) => listeners.push((bound, Rc::new(listener.clone()))),
            Err(source) => {
                let _ = ready.send(Err(CoreError::Bind {
                    name: listener.name.clone(),
                    address: listener.bound,
                    source,
                }));
                return;
            }
        }
    }
    // glommio's mesh join can miss a cross-core wake-up and leave every core asleep (seen as a
    // start-up hang roughly once in twenty starts on a loaded 2-CPU machine). A reactor that
    // wakes up re-checks its shared channels, so a short ticker during the join makes a lost
    // notification cost milliseconds instead of forever. After start-up `watch_control` ticks.
    let join_ticker = glommio::spawn_local(async {
        loop {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
    });
    tracing::debug!("core listeners bound; joining the append mesh");
    let (append_tx, append_rx) = match append_mesh.join().await {
        Ok(pair) => pair,
        Err(_) => {
            let _ = ready.send(Err(CoreError::MeshJoin));
            return;
        }
    };
    tracing::debug!(
        core = append_tx.peer_id(),
        "joined the append mesh; joining the reply mesh"
    );
    let (reply_tx, reply_rx) = match reply_mesh.join().await {
        Ok(pair) => pair,
        Err(_) => {
            let _ = ready.send(Err(CoreError::MeshJoin));
            return;
        }
    };
    let (handoff_tx, handoff_rx) = match handoff_mesh.join().await {
        Ok(pair) => pair,
        Err(_) => {
            let _ = ready.send(Err(CoreError::MeshJoin));
            return;
        }
    };
    join_ticker.cancel().await;
    let id = append_tx.peer_id();
    let cores = append_tx.nr_consumers();
    let config = &shared.config;
    let telemetry = Rc::new(CoreTelemetry::new(
        id,
        shared.metrics.clone(),
        config.log_repeat_interval,
        config.log_repeat_keys,
    ));
    let appender = Rc::new(
        Appender::new(
            config.clone(),
            shared.runtime.log_stats.clone(),
            telemetry.clone(),
        )
        .with_catalog(shared.runtime.catalog.clone()),
    );
    let buckets: Rc<Buckets<ReplyTo>> = Buckets::new(appender);
    let router = Router::new(
        telemetry.clone(),
        buckets.clone(),
        shared.bucket_owners.clone(),
        append_tx,
        reply_tx,
    );
    let stop = Rc::new(StopSignal::default());
    let kafka = Rc::new(KafkaCore {
        shared: shared.clone(),
        telemetry,
        router: router.clone(),
        stop: stop.clone(),
        request_memory: Rc::new(FairSemaphore::new(config.max_request_memory as u64)),
        address_memory: Rc::new(AddressAllowances::new(
            config.max_request_memory_per_address as u64,
        )),
        answer_memory: Rc::new(FairSemaphore::new(config.max_answer_memory as u64)),
        cutoff: AnswerCutoff::default(),
    });
    let connections = Rc::new(Gate::new());

    // This core's buckets with data are recovered before anything can append to them: the mesh
    // receivers start after, so a job another (already serving) core routes here waits in the
    // channel instead of starting an actor that recovers the bucket while `open_existing` does
    // too (two recoveries of one log, the second truncating what the first's actor appended).
    let snapshot = shared.runtime.catalog.snapshot();
    buckets
        .open_existing(&snapshot, |table, bucket| router.owns(table, bucket))
        .await;
    let mesh_tasks = router.spawn_receivers(append_rx, reply_rx);
    telemetry_thread(&shared, id);
    // The DROP TABLE tasks: shutdown waits for them after closing every log, so each answers
    // the DROP waiting on the admin thread (a task left behind never did: the DROP waited until
    // admin.shutdown-timeout and its client was told nothing).
    let drops = Rc::new(Gate::new());
    let control_task = glommio::spawn_local(watch_control(
        shared.clone(),
        buckets.clone(),
        router.clone(),
        stop.clone(),
        control,
        drops.clone(),
    ));
    let serving = Rc::new(Serving {
        core: kafka.clone(),
        connections: connections.clone(),
        infos: listeners.iter().map(|(_, info)| info.clone()).collect(),
        handoff: handoff_tx,
    });
    let handoff_tasks = spawn_handoff_receivers(&serving, handoff_rx);
    let mut accept_tasks = Vec::new();
    for (index, (listener, _)) in listeners.into_iter().enumerate() {
        accept_tasks.push(glommio::spawn_local(accept_loop(
            serving.clone(),
            listener,
            index,
        )));
    }
    _exit_notice.1.set(id);
    let _ = ready.send(Ok(id));

    stop.stopping().await;
    for task in accept_tasks {
        task.await;
    }
    drain(&kafka, &connections).await;
    shared.drained_cores.fetch_add(1, Ordering::SeqCst);
    // Keep serving appends from cores still draining; bounded by their own drain.
    while shared.drained_cores.load(Ordering::SeqCst) < cores {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    control_task.cancel().await;
    // Closing the bucket queues ends each actor after its queued jobs, which flushes the log.
    buckets.close_all().await;
    let _ = drops.close().await;
    for task in mesh_tasks.into_iter().chain(handoff_tasks) {
        task.cancel().await;
    }
    // What the rate-limited lines left out within their last interval (the executor drops
    // the tasks that wait to log it when this returns).
    kafka.telemetry.flush_tails().await;
}

/// Waits until every connection of this core has written the answers to the requests it read
/// and closed: at most `kafka.shutdown-timeout`, then the connections still writing are closed
/// (a client that stops reading would otherwise hold the shutdown for
/// `kafka.connection.max-idle-time`). The appends of requests already read still finish: a
/// connection closed this way awaits its requests' results before it ends, unwritten.
async fn drain(core: &KafkaCore, connections: &Gate) {
    let me = core.telemetry.core();
    let limit = core.config().kafka_shutdown_timeout;
    let open = core.shared.connection_load.of(me);
    if open > 0 {
        tracing::info!(
            core = me,
            connections = open,
            "waiting for the Kafka connections to write the answers to the requests they read (at most kafka.shutdown-timeout, {limit:?})"
        );
    }
    // One close, polled across the deadline: dropping a gate's close while it waits would make
    // the last pass's drop fail to tell it.
    let close = connections.close();
    futures_lite::pin!(close);
    let drained = futures_lite::future::or(
        async {
            let _ = close.as_mut().await;
            true
        },
        async {
            glommio::timer::sleep(limit).await;
            false
        },
    )
    .await;
    if drained {
        return;
    }
    tracing::info!(
        core = me,
        "kafka.shutdown-timeout ({limit:?}) passed: closing the Kafka connections whose answers are not written yet"
    );
    core.cutoff.cut();
    let _ = close.await;
    let (closed, answers) = core.cutoff.counts();
    if closed > 0 {
        tracing::warn!(
            core = me,
            connections = closed,
            answers,
            "shutdown closed {closed} Kafka connections with {answers} answers not written: their clients did not read them within kafka.shutdown-timeout ({limit:?})"
        );
    }
}

/// Follows the control queue from the admin thread and the shutdown flag. It sleeps until
/// the queue's doorbell rings (a message was queued, or shutdown began): no ticker.
async fn watch_control(
    shared: Arc<Shared>,
    buckets: Rc<Buckets<ReplyTo>>,
    router: Rc<Router>,
    stop: Rc<StopSignal>,
    control: ControlReceiver,
    drops: Rc<Gate>,
) {
    loop {
        while let Ok(message) = control.queue.try_recv() {
            match message {
                ControlMessage::DropTable { table_id, done } => {
                    // Acknowledged only once every log of the table on this core is closed,
                    // however long that takes; meanwhile this loop goes on (shutdown). The
                    // owners this core looked up are forgotten once `close_table` has marked
                    // the table dropped, after which the router claims none for it.
                    // Once shutdown has closed the gate the task is not spawned: `done` goes
                    // unanswered, which the DROP reads as a core that exited.
                    let (buckets, router) = (buckets.clone(), router.clone());
                    if let Ok(task) = drops.spawn(async move {
                        buckets.close_table(table_id).await;
                        router.forget_table(table_id);
                        let _ = done.send(());
                    }) {
                        task.detach();
                    }
                }
            }
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            stop.stop();
        }
        control.bell.wait().await;
    }
}

/// Tells the metrics which thread is this core's (its context switches count its wake-ups).
fn telemetry_thread(shared: &Shared, core: usize) {
    match std::fs::read_link("/proc/thread-self") {
        Ok(link) => {
            let tid = link
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.parse::<u64>().ok());
            if let Some(tid) = tid {
                shared.metrics.core(core).set_thread_id(tid);
            }
        }
        Err(e) => tracing::debug!("cannot read /proc/thread-self: {e}"),
    }
}

/// What a core needs to serve Kafka connections: the connection gate that shutdown drains,
/// the listeners (by index), and the mesh that gives connections to other cores.
struct Serving {
    core: Rc<KafkaCore>,
    connections: Rc<Gate>,
    infos: Vec<Rc<KafkaListener>>,
    handoff: Senders<Handoff>,
}

async fn accept_loop(serving: Rc<Serving>, listener: TcpListener, index: usize) {
    let core = &serving.core;
    let me = core.telemetry.core();
    let info = serving.infos[index].clone();
    // The key of this listener's repeat-limited lines (`server.log-repeat-interval`).
    let bound = info.bound.to_string();
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.shared_accept().await) }, async {
            core.stop.stopping().await;
            None
        })
        .await;
        let stream = match accepted {
            None => return,
            Some(Ok(stream)) => stream,
            Some(Err(e)) => {
                // Out of file descriptors, say: at most one line per listener and
                // server.log-repeat-interval on each core, with the count in between.
                core.telemetry.log_limited(
                    &bound,
                    "accept failed",
                    0,
                    |Repeats { suppressed, .. }| {
                        tracing::warn!(listener = %bound, suppressed, "accept failed on {bound}: {e}")
                    },
                    |listener, Repeats { suppressed, interval, .. }| {
                        tracing::warn!(
                            listener,
                            suppressed,
                            "accept failed on {listener}: {suppressed} more failures in the {interval:?} after the last such line"
                        )
                    },
                );
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let shared = &core.shared;
        let limit = shared.config.max_connections;
        if shared.open_connections.fetch_add(1, Ordering::SeqCst) >= limit {
            shared.open_connections.fetch_sub(1, Ordering::SeqCst);
            core.metrics().connection_rejected();
            let stream = stream.bind_to_executor();
            // A client connecting in a loop gets at most one line per listener and
            // server.log-repeat-interval on each core; the first names it.
            core.telemetry.log_limited(
                &bound,
                "kafka.max-connections",
                0,
                |Repeats { suppressed, .. }| match stream.peer_addr() {
                    Ok(client) => tracing::warn!(
                        %client,
                        listener = %bound,
                        suppressed,
                        "refusing a Kafka connection: kafka.max-connections ({limit}) reached"
                    ),
                    Err(_) => tracing::warn!(
                        listener = %bound,
                        suppressed,
                        "refusing a Kafka connection: kafka.max-connections ({limit}) reached"
                    ),
                },
                move |listener, Repeats { suppressed, interval, .. }| {
                    tracing::warn!(
                        listener,
                        suppressed,
                        "refusing a Kafka connection: {suppressed} more refused on {listener} in the {interval:?} after the last such line: kafka.max-connections ({limit}) reached"
                    )
                },
            );
            drop(stream);
            continue;
        }
        let target = shared.connection_load.place(me);
        if target == me {
            serve_accepted(&serving, stream.bind_to_executor(), index, None);
            continue;
        }
        let message = Handoff::Accepted {
            stream,
            listener: index,
        };
        if give(&serving, target, message).await {
            core.metrics().connection_handed_over();
        }
    }
}

/// Serves connections given by other cores (accepted there, or moved here), one task per peer
/// core.
fn spawn_handoff_receivers(serving: &Rc<Serving>, receivers: Receivers<Handoff>) -> Vec<glommio::Task<()>> {
    let receivers = Rc::new(receivers);
    let me = serving.core.telemetry.core();
    (0..receivers.nr_producers())
        .filter(|&peer| peer != me)
        .map(|peer| {
            let (serving, receivers) = (serving.clone(), receivers.clone());
            glommio::spawn_local(async move {
                while let Ok(Some(handoff)) = receivers.recv_from(peer).await {
                    if serving.core.stop.is_stopping() {
                        // Closed unanswered; dropping an accepted stream unbound would leak it.
                        // A moved connection's client may have requests in flight: what it
                        // sent is read first, so the close is a FIN, not a reset.
                        match handoff {
                            Handoff::Accepted { stream, .. } => drop(stream.bind_to_executor()),
                            Handoff::Moved { socket, .. } => crate::kafka::connection::close_unserved(socket),
                        }
                        connection_gone(&serving.core.shared, me);
                        continue;
                    }
                    serve_returned(&serving, handoff);
                }
            })
        })
        .collect()
}

/// Serves on this core a connection that a handoff carries (one given by another core, or one
/// whose handoff to another core failed).
fn serve_returned(serving: &Rc<Serving>, handoff: Handoff) {
    match handoff {
        Handoff::Accepted { stream, listener } => {
            serve_accepted(serving, stream.bind_to_executor(), listener, None)
        }
        Handoff::Moved {
            socket,
            listener,
            carried,
        } => serve_accepted(serving, TcpStream::from(socket), listener, Some(carried)),
    }
}

/// Serves `stream` on this core until it closes or moves to another core; the connection is
/// already counted in `open_connections` and on this core's [`super::handoff::ConnectionLoad`].
/// `carried`: what a connection moved here brings along.
fn serve_accepted(serving: &Rc<Serving>, stream: TcpStream, listener: usize, carried: Option<Box<Carried>>) {
    let core = &serving.core;
    let me = core.telemetry.core();
    let (Some(info), Ok(pass)) = (serving.infos.get(listener).cloned(), serving.connections.enter()) else {
        // Draining: the connection is closed unanswered.
        drop(stream);
        connection_gone(&core.shared, me);
        return;
    };
    if carried.is_some() {
        core.metrics().connection_resumed();
    } else {
        core.metrics().connection_opened();
    }
    let serving = serving.clone();
    glommio::spawn_local(async move {
        let mut served =
            crate::kafka::connection::serve(serving.core.clone(), stream, info.clone(), carried).await;
        // A connection that chose to move as this core began to stop (it waits for its last
        // answers before it leaves) stays: the core it would go to may be stopping too, and
        // would close it with its pipelined requests unanswered. Served again here (the pass
        // held, so the drain waits for it), it answers the complete requests it has read and
        // closes with a FIN, as every connection does at shutdown.
        loop {
            match served {
                Served::Move { socket, carried, .. } if serving.core.stop.is_stopping() => {
                    let stream = TcpStream::from(socket);
                    served = crate::kafka::connection::serve(
                        serving.core.clone(),
                        stream,
                        info.clone(),
                        Some(carried),
                    )
                    .await;
                }
                other => {
                    served = other;
                    break;
                }
            }
        }
        let core = &serving.core;
        core.metrics().connection_closed();
        match served {
            Served::Closed => connection_gone(&core.shared, me),
            Served::Move { to, socket, carried } => {
                let shared = &core.shared;
                shared.connection_load.closed(me);
                shared.connection_load.place_on(to);
                let message = Handoff::Moved {
                    socket,
                    listener,
                    carried,
                };
                // A task of its own, so that this one (the memory of every connection, idle
                // or not) holds nothing but the connection's future; the pass goes with it:
                // shutdown waits for the hand-over too.
                glommio::spawn_local(hand_over(serving.clone(), to, message, pass)).detach();
                return;
            }
        }
        drop(pass);
    })
    .detach();
}

/// Sends a moving connection to core `to`; the gate's pass goes with it, so shutdown waits for
/// the hand-over too.
async fn hand_over(serving: Rc<Serving>, to: usize, message: Handoff, pass: glommio::sync::Pass) {
    if give(&serving, to, message).await {
        serving.core.metrics().connection_moved();
    }
    drop(pass);
}

/// Gives a connection (already counted on core `to`) to core `to`; true once that core has it.
/// When that core is gone (shutting down) the connection is counted and served here after all.
async fn give(serving: &Rc<Serving>, to: usize, message: Handoff) -> bool {
    let shared = &serving.core.shared;
    match serving.handoff.send_to(to, message).await {
        Ok(()) => true,
        Err(
            glommio::GlommioError::Closed(glommio::ResourceType::Channel(message))
            | glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(message)),
        ) => {
            shared.connection_load.closed(to);
            shared.connection_load.place_on(serving.core.telemetry.core());
            serve_returned(serving, message);
            false
        }
        Err(_) => {
            tracing::warn!("could not give a Kafka connection to core {to}");
            connection_gone(shared, to);
            false
        }
    }
}

/// A connection counted in `open_connections` and on `core`'s load is closed.
fn connection_gone(shared: &Shared, core: usize) {
    shared.connection_load.closed(core);
    shared.open_connections.fetch_sub(1, Ordering::SeqCst);
}

/// Sends the core index on drop, including during a panic unwind.
struct ExitNotice(crossbeam_channel::Sender<usize>, Cell<usize>);

impl Drop for ExitNotice {
    fn drop(&mut self) {
        let _ = self.0.try_send(self.1.get());
    }
}
