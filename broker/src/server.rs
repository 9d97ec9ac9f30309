//! Start-up and shutdown of `kafluss serve`.
//!
//! The main thread validates the configuration, opens the catalog, resolves each Kafka
//! listener's concrete port (a probe socket bound with SO_REUSEPORT but never listening, so it
//! receives no connections), starts one glommio executor pinned per core (each binds the same
//! address with SO_REUSEPORT and the kernel spreads connections), starts the admin HTTP server
//! on the Fluss listener's own thread, prints the ready line, and then waits for SIGTERM or
//! SIGINT. Shutdown: cores stop accepting, finish queued requests, flush their bucket logs;
//! then the admin server stops and the process exits 0. A second signal exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{CpuSet, LocalExecutorBuilder, Placement};

use crate::admin::{start_admin_server, storage, AdminContext, AdminHandle};
use crate::catalog::ddl::{Catalog, CatalogConfig, TableDroppedHook};
use crate::catalog::model::TableInfo;
use crate::config::ServerConfig;
use crate::log::LogRegistry;
use crate::metrics::Metrics;
use crate::shard::{self, CoreStart, KafkaListener, Shard, Shared, MESH_CAPACITY};

/// A start-up failure, printed by `main` before exiting non-zero.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("security configuration: {0}")]
    Security(String),
    #[error("cannot bind listener {name} on {address}: {source}")]
    Bind {
        name: String,
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("catalog: {0}")]
    Catalog(String),
    #[error("admin server: {0}")]
    Admin(String),
    #[error("core start-up: {0}")]
    Core(String),
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// Messages from the admin thread to every core.
#[derive(Debug, Clone)]
pub enum ControlMessage {
    /// A table was dropped: close its bucket logs, then acknowledge on `done`.
    DropTable {
        table_id: u64,
        done: crossbeam_channel::Sender<()>,
    },
}

/// Handles one control message on a core.
pub async fn handle_control(shard: &Shard, message: ControlMessage) {
    match message {
        ControlMessage::DropTable { table_id, done } => {
            shard.close_table(table_id).await;
            let _ = done.send(());
        }
    }
}

/// The runtime services every core consults: catalog snapshots, credentials, authorizer,
/// storage statistics. All lock-free to read on the produce path.
pub struct Runtime {
    pub catalog: Arc<Catalog>,
    pub credentials: Arc<kafluss_auth::CredentialStore>,
    pub security: kafluss_auth::SecurityConfig,
    pub log_stats: Arc<LogRegistry>,
    /// Failed logins slow the next attempts of their address and user (SASL and HTTP Basic).
    pub login_throttle: Arc<kafluss_auth::LoginThrottle>,
}

impl Runtime {
    /// The authorizer in force (a lock-free `ArcSwap` load).
    pub fn authorizer(&self) -> arc_swap::Guard<Arc<kafluss_auth::Authorizer>> {
        self.catalog.authorizer_cell().load()
    }
}

/// Opens the catalog with the server configuration.
fn open_catalog(
    config: &ServerConfig,
    security: &kafluss_auth::SecurityConfig,
) -> Result<Catalog, ServerError> {
    let super_users = kafluss_auth::parse_super_users(&config.super_users)
        .map_err(|e| ServerError::Security(format!("super.users: {e}")))?;
    let catalog_config = CatalogConfig {
        data_dir: config.data_dir.clone(),
        default_bucket_number: config.default_bucket_number,
        kafka_enabled: config.kafka_enabled,
        kafka_default_database: config.kafka_default_database.clone(),
        authorizer_enabled: config.authorizer_enabled,
        super_users,
        plain_credentials: (!config.sasl_plain_credentials.is_empty())
            .then(|| config.sasl_plain_credentials.clone()),
        max_sql_statements: config.admin_max_sql_statements,
        admin_login_required: config.fluss_bind_listener().is_some_and(|listener| {
            security.listener_security(&listener.name) == kafluss_auth::ListenerSecurity::Sasl
        }),
    };
    Catalog::open(catalog_config).map_err(|e| ServerError::Catalog(e.to_string()))
}

/// The DROP TABLE hook: every core closes the table's bucket logs, then the directory goes.
fn table_dropped_hook(
    data_dir: PathBuf,
    cores: Vec<crossbeam_channel::Sender<ControlMessage>>,
    log_stats: Arc<LogRegistry>,
) -> TableDroppedHook {
    Arc::new(move |table: &TableInfo| {
        let (done_tx, done_rx) = crossbeam_channel::bounded(cores.len());
        let mut asked = 0;
        for core in &cores {
            let message = ControlMessage::DropTable {
                table_id: table.id,
                done: done_tx.clone(),
            };
            if core.send_timeout(message, Duration::from_secs(5)).is_ok() {
                asked += 1;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        for _ in 0..asked {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if done_rx.recv_timeout(remaining).is_err() {
                tracing::warn!("a core did not confirm closing {} within 15s", table.path());
                break;
            }
        }
        log_stats.remove_table(table.id);
        let dir = data_dir.join(table.relative_dir());
        if let Err(e) = crate::log::remove_table_dir(&dir) {
            tracing::error!(
                "cannot delete the directory of dropped table {}: {e}",
                table.path()
            );
        }
    })
}

/// Binds `listener` once, without listening, to learn its concrete address when port 0 was
/// asked for. Keeping it bound until every core has bound the same port reserves the port.
fn probe_bind(name: &str, address: SocketAddr) -> Result<(socket2::Socket, SocketAddr), ServerError> {
    let bind_error = |source| ServerError::Bind {
        name: name.to_string(),
        address: address.to_string(),
        source,
    };
    let domain = if address.is_ipv6() {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let new_socket = || {
        socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP)).map_err(bind_error)
    };
    // The cores share the port through SO_REUSEPORT, which would equally let a second server
    // (ours or anyone's, same user) share it and take half of the connections. A plain bind
    // first fails with "address already in use" when any other socket holds the address.
    if address.port() != 0 {
        let exclusive = new_socket()?;
        exclusive.set_reuse_address(true).map_err(bind_error)?;
        exclusive.bind(&address.into()).map_err(bind_error)?;
    }
    let socket = new_socket()?;
    socket.set_reuse_port(true).map_err(bind_error)?;
    socket.set_reuse_address(true).map_err(bind_error)?;
    socket.bind(&address.into()).map_err(bind_error)?;
    let bound = socket
        .local_addr()
        .map_err(bind_error)?
        .as_socket()
        .ok_or_else(|| bind_error(std::io::Error::other("not an inet address")))?;
    Ok((socket, bound))
}

/// CPU ids executors are pinned to, in order; core `i` runs on `cpus[i % cpus.len()]`.
fn cpu_ids() -> Vec<usize> {
    let mut ids: Vec<usize> = CpuSet::online()
        .map(|set| set.iter().map(|location| location.cpu).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        ids.push(0);
    }
    ids
}

/// Runs the server until a signal; returns after a clean shutdown.
pub fn run(mut config: ServerConfig) -> Result<(), ServerError> {
    // Relative paths are resolved once, against the working directory at start-up: the cores
    // open files through io_uring, which cannot resolve a path relative to the process's
    // working directory, and a later `chdir` must not move the data.
    config.resolve_paths().map_err(|source| ServerError::DataDir {
        path: config.data_dir.display().to_string(),
        source,
    })?;
    tracing::info!("data.dir: {}", config.data_dir.display());
    std::fs::create_dir_all(&config.data_dir).map_err(|source| ServerError::DataDir {
        path: config.data_dir.display().to_string(),
        source,
    })?;
    let security = kafluss_auth::SecurityConfig::parse(
        Some(&config.security_protocol_map),
        Some(&config.sasl_enabled_mechanisms),
    )
    .map_err(|e| ServerError::Security(e.to_string()))?;
    let names: Vec<&str> = config.bind_listeners.iter().map(|l| l.name.as_str()).collect();
    security
        .check_listeners_exist(&names)
        .map_err(|e| ServerError::Security(e.to_string()))?;

    if let Some(warning) = unprotected_admin_warning(&config, &security) {
        tracing::warn!("{warning}");
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // A second signal while shutting down exits at once with status 1.
        signal_hook::flag::register_conditional_shutdown(signal, 1, shutdown.clone())
            .map_err(ServerError::Signals)?;
        signal_hook::flag::register(signal, shutdown.clone()).map_err(ServerError::Signals)?;
    }

    let catalog = Arc::new(open_catalog(&config, &security)?);
    let log_stats = Arc::new(LogRegistry::new());
    let runtime = Runtime {
        credentials: catalog.credential_store(),
        catalog: catalog.clone(),
        security,
        log_stats: log_stats.clone(),
        login_throttle: Arc::new(kafluss_auth::LoginThrottle::new(config.login_throttle)),
    };

    // Kafka listeners: concrete addresses, reserved by probes until the cores have bound.
    let mut probes = Vec::new();
    let mut kafka_listeners = Vec::new();
    for listener in config.kafka_bind_listeners() {
        let address = listener.socket_addr().map_err(|source| ServerError::Bind {
            name: listener.name.clone(),
            address: format!("{}:{}", listener.host, listener.port),
            source,
        })?;
        let (probe, bound) = probe_bind(&listener.name, address)?;
        probes.push(probe);
        let advertised = config.advertised(&listener.name).cloned();
        let (advertised_host, advertised_port) = match advertised {
            Some(a) if a.port != 0 => (a.host, a.port),
            Some(a) => (a.host, bound.port()),
            None => (listener.host.clone(), bound.port()),
        };
        kafka_listeners.push(KafkaListener {
            name: listener.name.clone(),
            bound,
            advertised_host,
            advertised_port,
            security: runtime.security.listener_security(&listener.name),
        });
    }

    let cores = config.cores;
    let metrics = Arc::new(Metrics::new(cores).with_login_throttle(runtime.login_throttle.clone()));
    let shared = Arc::new(Shared {
        config: config.clone(),
        metrics: metrics.clone(),
        runtime,
        kafka_listeners: kafka_listeners.clone(),
        open_connections: AtomicUsize::new(0),
        shutdown: shutdown.clone(),
        drained_cores: AtomicUsize::new(0),
    });

    let append_mesh = MeshBuilder::full(cores, MESH_CAPACITY);
    let reply_mesh = MeshBuilder::full(cores, MESH_CAPACITY);
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(cores);
    let (exited_tx, exited_rx) = crossbeam_channel::bounded(cores);
    let mut control_senders = Vec::with_capacity(cores);
    let mut handles = Vec::with_capacity(cores);
    let cpus = cpu_ids();
    for index in 0..cores {
        let (control_tx, control_rx) = crossbeam_channel::bounded(64);
        control_senders.push(control_tx);
        let start = CoreStart {
            shared: shared.clone(),
            append_mesh: append_mesh.clone(),
            reply_mesh: reply_mesh.clone(),
            ready: ready_tx.clone(),
            exited: exited_tx.clone(),
            control: control_rx,
        };
        let handle = LocalExecutorBuilder::new(Placement::Fixed(cpus[index % cpus.len()]))
            .name(&format!("kafluss-core-{index}"))
            // Segment writes use buffered files, so little io_uring memory is needed; staying
            // small keeps many cores under the default 8 MiB memlock limit.
            .io_memory(256 << 10)
            .spawn(move || shard::run_core(start))
            .map_err(|e| ServerError::Core(format!("cannot start core {index}: {e}")))?;
        handles.push(handle);
    }
    drop(ready_tx);
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..cores {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match ready_rx.recv_timeout(remaining) {
            Ok(Ok(_)) => {}
            Ok(Err(message)) => {
                shutdown.store(true, Ordering::SeqCst);
                return Err(ServerError::Core(message));
            }
            Err(_) => {
                shutdown.store(true, Ordering::SeqCst);
                return Err(ServerError::Core("cores did not start within 60s".into()));
            }
        }
    }
    drop(probes);

    catalog.set_table_dropped_hook(table_dropped_hook(
        config.data_dir.clone(),
        control_senders,
        log_stats.clone(),
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let admin = start_admin(&config, &shared.runtime, &metrics, &ready)?;
    ready.store(true, Ordering::SeqCst);

    let mut line = String::from("kafluss ready:");
    if let Some(admin) = &admin {
        line.push_str(&format!(" {}={}", admin.0, admin.1.local_addr()));
    }
    for listener in &kafka_listeners {
        line.push_str(&format!(" {}={}", listener.name, listener.bound));
    }
    line.push_str(&format!(" cores={cores}"));
    println!("{line}");
    tracing::info!("{line}");

    while !shutdown.load(Ordering::SeqCst) {
        if let Ok(core) = exited_rx.try_recv() {
            tracing::error!("core {core} stopped unexpectedly; shutting down");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    shutdown.store(true, Ordering::SeqCst);
    tracing::info!("shutting down: draining connections and flushing bucket logs");
    for handle in handles {
        let _ = handle.join();
    }
    if let Some((_, admin)) = admin {
        admin.stop();
    }
    tracing::info!("shutdown complete");
    Ok(())
}

/// The start-up warning for a Kafka listener that requires SASL while the Fluss listener is
/// plaintext and the authorizer is off: anyone reaching the Fluss listener can then read every
/// row and change the credentials (`CALL sys.set_cluster_configs`), so the SASL is no guard.
fn unprotected_admin_warning(
    config: &ServerConfig,
    security: &kafluss_auth::SecurityConfig,
) -> Option<String> {
    use kafluss_auth::ListenerSecurity;
    let fluss = config.fluss_bind_listener()?;
    if config.authorizer_enabled || security.listener_security(&fluss.name) != ListenerSecurity::Plaintext {
        return None;
    }
    let kafka = config
        .kafka_bind_listeners()
        .into_iter()
        .find(|listener| security.listener_security(&listener.name) == ListenerSecurity::Sasl)?;
    Some(format!(
        "Kafka listener {} requires SASL, but Fluss listener {} is plaintext and authorizer.enabled is false: \
         anyone who can connect to {} can read every row and change the credentials. Map it to sasl \
         (security.protocol.map: {}:sasl,{}:sasl) and set authorizer.enabled: true with super.users",
        kafka.name, fluss.name, fluss.name, fluss.name, kafka.name
    ))
}

/// Starts the admin HTTP server on the Fluss listener (the first non-Kafka listener), with
/// the storage and metrics hooks; returns the listener name and the running server.
fn start_admin(
    config: &ServerConfig,
    runtime: &Runtime,
    metrics: &Arc<Metrics>,
    ready: &Arc<AtomicBool>,
) -> Result<Option<(String, AdminHandle)>, ServerError> {
    let Some(listener) = config.fluss_bind_listener() else {
        return Ok(None);
    };
    let address = listener.socket_addr().map_err(|source| ServerError::Bind {
        name: listener.name.clone(),
        address: format!("{}:{}", listener.host, listener.port),
        source,
    })?;
    let mut context = AdminContext::new(runtime.catalog.clone(), ready.clone());
    if runtime.security.listener_security(&listener.name) == kafluss_auth::ListenerSecurity::Sasl {
        context.credentials = Some(runtime.credentials.clone());
    }
    context.row_counts = Some(storage::row_counts_hook(
        config.data_dir.clone(),
        runtime.log_stats.clone(),
    ));
    context.scan = Some(storage::scan_hook(
        config.data_dir.clone(),
        runtime.log_stats.clone(),
    ));
    let metrics = metrics.clone();
    context.metrics = Some(Arc::new(move || metrics.render()));
    context.max_body_bytes = config.admin_max_request_size;
    context.limits = config.admin_limits.clone();
    context.login_throttle = runtime.login_throttle.clone();
    let handle = start_admin_server(address, context)
        .map_err(|e| ServerError::Admin(format!("listener {}: {e}", listener.name)))?;
    Ok(Some((listener.name.clone(), handle)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning_for(defines: &[&str]) -> Option<String> {
        let defines: Vec<String> = defines.iter().map(|d| d.to_string()).collect();
        let config = ServerConfig::load(None, &defines).unwrap();
        let security = kafluss_auth::SecurityConfig::parse(
            Some(&config.security_protocol_map),
            Some(&config.sasl_enabled_mechanisms),
        )
        .unwrap();
        unprotected_admin_warning(&config, &security)
    }

    #[test]
    fn warns_when_only_the_kafka_listener_is_protected() {
        let warning = warning_for(&["security.protocol.map=KAFKA:sasl"]).expect("a warning");
        assert!(
            warning.contains("Kafka listener KAFKA requires SASL"),
            "{warning}"
        );
        assert!(warning.contains("Fluss listener FLUSS is plaintext"), "{warning}");
        assert!(warning.contains("FLUSS:sasl,KAFKA:sasl"), "{warning}");
        assert_eq!(
            warning_for(&[]),
            None,
            "nothing protected: nothing pretends to be"
        );
        assert_eq!(
            warning_for(&["security.protocol.map=KAFKA:sasl,FLUSS:sasl"]),
            None
        );
        assert_eq!(
            warning_for(&["security.protocol.map=KAFKA:sasl", "authorizer.enabled=true"]),
            None
        );
    }
}
