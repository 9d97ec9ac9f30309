//! Start-up and shutdown of `kafluss serve`.
//!
//! The main thread validates the configuration, locks `data.dir` (`data_dir_lock`: one server
//! per data directory), opens the catalog, resolves each Kafka listener's concrete port (a
//! probe socket bound with SO_REUSEPORT but never listening, so it receives no connections),
//! starts one glommio executor pinned per core (each binds the same address with SO_REUSEPORT
//! and the kernel spreads connections), starts the admin HTTP server
//! on the Fluss listener's own thread, prints the ready line, and then sleeps until SIGTERM or
//! SIGINT (or a core's unexpected exit). Shutdown: cores stop accepting, finish queued requests, flush their bucket logs;
//! then the admin server stops and the process exits 0. A second signal exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{CpuSet, LocalExecutorBuilder, Placement};

use super::core::{run_core, CoreError, CoreStart};
use super::data_dir_lock::{lock_data_dir, DataDirLockError};
use super::routing::BucketOwners;
use super::{control_channel, ControlMessage, ControlSender, KafkaListener, Runtime, Shared, MESH_CAPACITY};
use crate::admin::{start_admin_server_on, storage, AdminContext, AdminError, AdminHandle};
use crate::catalog::error::CatalogError;
use crate::catalog::model::TableInfo;
use crate::catalog::{Catalog, CatalogConfig, TableDroppedHook};
use crate::config::ServerConfig;
use crate::log::LogRegistry;
use crate::metrics::Metrics;
use crate::producer::ids::ProducerIds;
use kafluss_auth::Principal;

/// A start-up failure, printed by `main` before exiting non-zero.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    DataDirLock(#[from] DataDirLockError),
    #[error("security configuration: {0}")]
    Security(#[from] kafluss_auth::SecurityConfigError),
    #[error("security configuration: super.users: {0}")]
    SuperUsers(#[source] kafluss_auth::AclError),
    #[error("cannot bind listener {name} on {address}: {source}")]
    Bind {
        name: String,
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("catalog: {0}")]
    Catalog(#[source] CatalogError),
    #[error("producer ids: {0}")]
    ProducerIds(#[source] crate::producer::ids::ProducerIdError),
    #[error("admin server: listener {listener}: {source}")]
    Admin {
        listener: String,
        #[source]
        source: AdminError,
    },
    #[error("core start-up: cannot start core {index}: {source}")]
    StartCore {
        index: usize,
        #[source]
        source: glommio::GlommioError<()>,
    },
    #[error("core start-up: {0}")]
    Core(#[source] CoreError),
    #[error("core start-up: cores did not start within 60s")]
    CoresTimedOut,
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// Opens the catalog with the server configuration.
fn open_catalog(
    config: &ServerConfig,
    security: &kafluss_auth::SecurityConfig,
    super_users: Vec<Principal>,
) -> Result<Catalog, ServerError> {
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
        max_size: config.catalog_max_size,
    };
    Catalog::open(catalog_config).map_err(ServerError::Catalog)
}

/// Removes the directories of tables dropped by a DROP that did not finish (the server stopped
/// or crashed after the catalog was saved, before the directory was deleted): a
/// `<data.dir>/<db>/<table>-<id>` directory holding only `bucket-<n>` directories whose id is
/// below the catalog's next table id and not a table of the catalog (ids are never reused).
/// Anything else is left alone. Each removal is logged at WARN.
fn remove_dropped_table_dirs(config: &ServerConfig, catalog: &Catalog) {
    let snapshot = catalog.snapshot();
    let next_id = catalog.next_table_id();
    for crate::log::FoundTableDir { path, id, .. } in crate::log::table_dirs(&config.data_dir) {
        if id >= next_id || snapshot.table_by_id(id).is_some() || !holds_only_buckets(&path) {
            continue;
        }
        match crate::log::remove_table_dir(&path) {
            Ok(()) => tracing::warn!(
                dir = %path.display(),
                table_id = id,
                "removed the directory of a dropped table: its DROP did not finish before the server stopped"
            ),
            Err(error) => tracing::warn!(
                dir = %path.display(),
                %error,
                "cannot remove the directory of a dropped table"
            ),
        }
    }
}

/// Whether `dir` is a directory whose entries are all `bucket-<n>` directories.
fn holds_only_buckets(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).all(|entry| {
        entry.file_type().is_ok_and(|kind| kind.is_dir())
            && entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_prefix("bucket-"))
                .and_then(crate::units::digits)
                .is_some()
    })
}

/// Gives every bucket with data on disk its owner by the fixed rule before the cores start,
/// so each core knows which of them to open (and recover) at once.
fn seed_recovered_buckets(config: &ServerConfig, catalog: &Catalog, owners: &BucketOwners) {
    for table in catalog.snapshot().tables() {
        let Ok(table_dir) = table.relative_dir().map(|dir| config.data_dir.join(dir)) else {
            continue;
        };
        for bucket in 0..table.bucket_count {
            if crate::log::bucket_dir(&table_dir, bucket).exists() {
                owners.seed(table.id, bucket);
            }
        }
    }
}

/// How often the DROP TABLE hook says which cores it is still waiting for.
const DROP_WAIT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The DROP TABLE hook: every core closes the table's bucket logs, then the directory goes.
/// It waits as long as that takes (a core acknowledges only once its logs of the table are
/// closed), logging while it waits: deleting files a core still writes would lose the rows it
/// appends and answers for. A core that has exited holds no open log; its channel is closed.
fn table_dropped_hook(
    data_dir: PathBuf,
    cores: Vec<ControlSender>,
    log_stats: Arc<LogRegistry>,
    owners: Arc<BucketOwners>,
) -> TableDroppedHook {
    Arc::new(move |table: &TableInfo| {
        close_on_every_core(table, &cores);
        log_stats.remove_table(table.id);
        owners.forget_table(table.id);
        let removed = table
            .relative_dir()
            .and_then(|dir| crate::log::remove_table_dir(&data_dir.join(dir)));
        if let Err(e) = removed {
            tracing::error!(
                "cannot delete the directory of dropped table {}: {e}",
                table.path()
            );
        }
    })
}

/// Asks every core to close `table`'s logs and returns once each that received the request
/// has acknowledged (or exited).
fn close_on_every_core(table: &TableInfo, cores: &[ControlSender]) {
    let (done_tx, done_rx) = crossbeam_channel::bounded(cores.len());
    let mut asked = 0;
    for (index, core) in cores.iter().enumerate() {
        let mut message = ControlMessage::DropTable {
            table_id: table.id,
            done: done_tx.clone(),
        };
        // Waits only while the core's control queue is full; fails once the core has exited.
        loop {
            match core.send_timeout(message, DROP_WAIT_LOG_INTERVAL) {
                Ok(()) => asked += 1,
                Err(crossbeam_channel::SendTimeoutError::Timeout(unsent)) => {
                    tracing::warn!(
                        "dropping {}: core {index} has not taken the request for {DROP_WAIT_LOG_INTERVAL:?}; waiting",
                        table.path()
                    );
                    message = unsent;
                    continue;
                }
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {}
            }
            break;
        }
    }
    // Only the messages hold senders now: a core that exits without answering drops its own.
    drop(done_tx);
    let started = Instant::now();
    let mut confirmed = 0;
    while confirmed < asked {
        match done_rx.recv_timeout(DROP_WAIT_LOG_INTERVAL) {
            Ok(()) => confirmed += 1,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => tracing::warn!(
                "dropping {}: {} of {asked} cores have not closed its bucket logs after {:?}; waiting",
                table.path(),
                asked - confirmed,
                started.elapsed()
            ),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// How long a start-up bind keeps trying an address that is in use. A server killed a moment
/// ago (SIGKILL) releases its listening sockets a little after the process is gone (its
/// io_uring rings, which hold them, are torn down after it exits): a restart at once failed
/// "Address already in use" about 30 ms later. An address another server holds still fails,
/// this much later.
pub const BIND_RETRY_FOR: Duration = Duration::from_secs(2);
/// Pause between two tries.
const BIND_RETRY_EVERY: Duration = Duration::from_millis(10);

/// Runs `bind` until it does not fail with "address in use", for at most [`BIND_RETRY_FOR`];
/// the wait is logged (WARN at its start, INFO once bound).
fn bind_retrying<T>(
    name: &str,
    address: SocketAddr,
    mut bind: impl FnMut() -> std::io::Result<T>,
) -> Result<T, ServerError> {
    let started = Instant::now();
    let mut waiting = false;
    loop {
        match bind() {
            Ok(bound) => {
                if waiting {
                    tracing::info!(listener = name, %address, waited = ?started.elapsed(), "listener bound");
                }
                return Ok(bound);
            }
            Err(error)
                if error.kind() == std::io::ErrorKind::AddrInUse && started.elapsed() < BIND_RETRY_FOR =>
            {
                if !waiting {
                    tracing::warn!(
                        listener = name,
                        %address,
                        "address in use: retrying for up to {BIND_RETRY_FOR:?} (a server stopped a moment ago may still hold it)"
                    );
                    waiting = true;
                }
                std::thread::sleep(BIND_RETRY_EVERY);
            }
            Err(source) => {
                return Err(ServerError::Bind {
                    name: name.to_string(),
                    address: address.to_string(),
                    source,
                })
            }
        }
    }
}

/// Binds `listener` once, without listening, to learn its concrete address when port 0 was
/// asked for. Keeping it bound until every core has bound the same port reserves the port. An
/// address in use is retried for [`BIND_RETRY_FOR`].
fn probe_bind(name: &str, address: SocketAddr) -> Result<(socket2::Socket, SocketAddr), ServerError> {
    bind_retrying(name, address, || probe_bind_once(address))
}

fn probe_bind_once(address: SocketAddr) -> std::io::Result<(socket2::Socket, SocketAddr)> {
    let domain = if address.is_ipv6() {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let new_socket = || socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP));
    // The cores share the port through SO_REUSEPORT, which would equally let a second server
    // (ours or anyone's, same user) share it and take half of the connections. A plain bind
    // first fails with "address already in use" when any other socket holds the address.
    // It fails as well beside connections that only linger (TIME_WAIT, FIN-WAIT-2) in sockets
    // without SO_REUSEADDR: those a server of an earlier version accepted (before its accepted
    // sockets got it) and closed at its stop, for about a minute. Only a listener is another
    // server, so without one the binds below go ahead: they share the port with such sockets
    // through SO_REUSEPORT, which those inherited from their listener (where they lack it,
    // the binds below fail "address in use" as before).
    if address.port() != 0 {
        let exclusive = new_socket()?;
        exclusive.set_reuse_address(true)?;
        if let Err(error) = exclusive.bind(&address.into()) {
            if error.kind() != std::io::ErrorKind::AddrInUse || listening_on(address) {
                return Err(error);
            }
            tracing::info!(
                %address,
                "address held only by connections that linger, no listener: binding beside them"
            );
        }
    }
    let socket = new_socket()?;
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    let bound = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| std::io::Error::other("not an inet address"))?;
    Ok((socket, bound))
}

/// Whether a TCP socket of this network namespace listens on `address`'s port at an address
/// that overlaps it (the same, or either a wildcard), as /proc/net/tcp and /proc/net/tcp6
/// list them. A table that cannot be read (tcp6 may be absent: IPv6 off) and a listening
/// entry that cannot be parsed count as a listener.
fn listening_on(address: SocketAddr) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .into_iter()
        .any(|path| match std::fs::read_to_string(path) {
            Ok(table) => table.lines().skip(1).any(|line| entry_listens_on(line, address)),
            Err(error) => !(path.ends_with('6') && error.kind() == std::io::ErrorKind::NotFound),
        })
}

/// Whether one line of /proc/net/tcp{,6} is a listener (state `0A`) on `address`.
fn entry_listens_on(line: &str, address: SocketAddr) -> bool {
    let mut fields = line.split_whitespace();
    let (Some(local), Some(state)) = (fields.nth(1), fields.nth(1)) else {
        return false;
    };
    if state != "0A" {
        return false;
    }
    let Some((host, port)) = local.split_once(':') else {
        return true;
    };
    match u16::from_str_radix(port, 16) {
        Ok(port) if port != address.port() => false,
        Ok(_) => proc_net_address(host).is_none_or(|listener| addresses_overlap(listener, address.ip())),
        Err(_) => true,
    }
}

/// An address as /proc/net/tcp{,6} prints it: the address bytes (network order) as 32-bit
/// words in host byte order, each in 8 hex digits.
fn proc_net_address(hex: &str) -> Option<std::net::IpAddr> {
    let word = |index: usize| {
        hex.get(index * 8..index * 8 + 8)
            .and_then(|digits| u32::from_str_radix(digits, 16).ok())
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(std::net::Ipv4Addr::from(word(0)?).into()),
        32 => {
            let mut octets = [0u8; 16];
            for (index, chunk) in octets.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(index)?);
            }
            Some(std::net::Ipv6Addr::from(octets).into())
        }
        _ => None,
    }
}

/// Whether a listener on `listener` takes connections to `ours` (IPv4-mapped IPv6 addresses
/// as IPv4); a wildcard on either side overlaps every address of either family.
fn addresses_overlap(listener: std::net::IpAddr, ours: std::net::IpAddr) -> bool {
    let (listener, ours) = (listener.to_canonical(), ours.to_canonical());
    listener.is_unspecified() || ours.is_unspecified() || listener == ours
}

/// CPU ids executors are pinned to, in order; core `i` runs on `cpus[i % cpus.len()]`: the
/// online CPUs this thread may run on (its affinity mask, which `taskset` or a container's
/// cpuset narrows and threads inherit), so that no core is pinned outside the mask, where
/// `server.cores`'s default (`available_parallelism`, which honours the mask too, and a cgroup
/// CPU quota, which may make it fewer) did not count it. All online CPUs when the mask cannot
/// be read.
fn cpu_ids() -> Vec<usize> {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
    let mut ids: Vec<usize> = CpuSet::online()
        .map(|set| set.iter().map(|location| location.cpu).collect())
        .unwrap_or_default();
    if let Some(allowed) = allowed {
        let within: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&cpu| allowed.is_set(cpu).unwrap_or(false))
            .collect();
        if !within.is_empty() {
            ids = within;
        }
    }
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
    // Before anything in data.dir is read or written, and held until the process exits: a
    // second server on the same directory refuses to start.
    let data_dir_lock = lock_data_dir(&config.data_dir)?;
    let security = kafluss_auth::SecurityConfig::parse(
        Some(&config.security_protocol_map),
        Some(&config.sasl_enabled_mechanisms),
    )?;
    let names: Vec<&str> = config.bind_listeners.iter().map(|l| l.name.as_str()).collect();
    security.check_listeners_exist(&names)?;

    let super_users =
        kafluss_auth::parse_super_users(&config.super_users).map_err(ServerError::SuperUsers)?;
    if let Some(warning) = fluss_listener_warning(&config, &security, &super_users) {
        tracing::warn!("{warning}");
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // A second signal while shutting down exits at once with status 1.
        signal_hook::flag::register_conditional_shutdown(signal, 1, shutdown.clone())
            .map_err(ServerError::Signals)?;
        signal_hook::flag::register(signal, shutdown.clone()).map_err(ServerError::Signals)?;
    }

    let signalled = signal_channel()?;

    let catalog = Arc::new(open_catalog(&config, &security, super_users)?);
    let log_stats = Arc::new(LogRegistry::new());
    let runtime = Runtime {
        credentials: catalog.credential_store(),
        catalog: catalog.clone(),
        security,
        log_stats: log_stats.clone(),
        login_throttle: Arc::new(kafluss_auth::LoginThrottle::new(config.login_throttle)),
        producer_ids: Arc::new(ProducerIds::open(&config.data_dir).map_err(ServerError::ProducerIds)?),
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
    let bucket_owners = Arc::new(BucketOwners::new(cores));
    remove_dropped_table_dirs(&config, &catalog);
    seed_recovered_buckets(&config, &catalog, &bucket_owners);
    let metrics = Arc::new(Metrics::new(cores).with_login_throttle(runtime.login_throttle.clone()));
    let shared = Arc::new(Shared {
        config: config.clone(),
        metrics: metrics.clone(),
        runtime,
        kafka_listeners: kafka_listeners.clone(),
        open_connections: AtomicUsize::new(0),
        shutdown: shutdown.clone(),
        connection_load: super::handoff::ConnectionLoad::new(cores),
        bucket_owners: bucket_owners.clone(),
        drained_cores: AtomicUsize::new(0),
    });

    let append_mesh = MeshBuilder::full(cores, MESH_CAPACITY);
    let reply_mesh = MeshBuilder::full(cores, MESH_CAPACITY);
    let handoff_mesh = MeshBuilder::full(cores, MESH_CAPACITY);
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(cores);
    let (exited_tx, exited_rx) = crossbeam_channel::bounded(cores);
    let mut control_senders = Vec::with_capacity(cores);
    let mut handles = Vec::with_capacity(cores);
    let cpus = cpu_ids();
    abort_on_core_panic();
    for index in 0..cores {
        let (control_tx, control_rx) = control_channel(64);
        control_senders.push(control_tx);
        let start = CoreStart {
            shared: shared.clone(),
            append_mesh: append_mesh.clone(),
            reply_mesh: reply_mesh.clone(),
            handoff_mesh: handoff_mesh.clone(),
            ready: ready_tx.clone(),
            exited: exited_tx.clone(),
            control: control_rx,
        };
        let mut builder = LocalExecutorBuilder::new(Placement::Fixed(cpus[index % cpus.len()]))
            .name(&format!("{CORE_THREAD}{index}"));
        if !config.spin_before_park.is_zero() {
            builder = builder.spin_before_park(config.spin_before_park);
        }
        if let Some(handler) = super::stall::handler(config.stall_threshold) {
            builder = builder.detect_stalls(Some(handler));
        }
        let handle = builder
            // Segment writes use buffered files, so little io_uring memory is needed; staying
            // small keeps many cores under the default 8 MiB memlock limit.
            .io_memory(256 << 10)
            .spawn(move || run_core(start))
            .map_err(|source| ServerError::StartCore { index, source })?;
        handles.push(handle);
    }
    drop(ready_tx);
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..cores {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match ready_rx.recv_timeout(remaining) {
            Ok(Ok(_)) => {}
            Ok(Err(message)) => {
                stop_cores(&shutdown, &control_senders);
                return Err(ServerError::Core(message));
            }
            Err(_) => {
                stop_cores(&shutdown, &control_senders);
                return Err(ServerError::CoresTimedOut);
            }
        }
    }
    drop(probes);

    catalog.set_table_dropped_hook(table_dropped_hook(
        config.data_dir.clone(),
        control_senders.clone(),
        log_stats.clone(),
        bucket_owners,
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let admin = start_admin(&config, &shared.runtime, &metrics, &ready, &shutdown)?;
    ready.store(true, Ordering::SeqCst);

    let mut line = String::from("kafluss ready:");
    if let Some(admin) = &admin {
        line.push_str(&format!(" {}={}", admin.0, admin.1.local_addr()));
    }
    for listener in &kafka_listeners {
        line.push_str(&format!(" {}={}", listener.name, listener.bound));
    }
    line.push_str(&format!(" cores={cores}"));
    // The log line first: whoever waits for the stdout line (a harness, a supervisor) then
    // finds it in the log too, instead of racing the second write.
    tracing::info!("{line}");
    // A stdout that cannot take the line (a full disk, a closed pipe) does not stop the
    // server: the line is in the log.
    if let Err(error) = write_ready_line(&mut std::io::stdout().lock(), &line) {
        tracing::warn!("cannot write the ready line to stdout: {error}; the server keeps serving");
    }

    // Sleeps until a signal or a core's exit: an idle server's main thread never wakes.
    crossbeam_channel::select! {
        recv(signalled) -> _ => {}
        recv(exited_rx) -> core => {
            if let Ok(core) = core {
                tracing::error!("core {core} stopped unexpectedly; shutting down");
            }
        }
    }
    stop_cores(&shutdown, &control_senders);
    tracing::info!(
        "shutting down: answering the Kafka requests already read (for at most kafka.shutdown-timeout, {:?}), then flushing bucket logs",
        config.kafka_shutdown_timeout
    );
    for handle in handles {
        let _ = handle.join();
    }
    if let Some((_, admin)) = admin {
        admin.stop();
    }
    tracing::info!("shutdown complete");
    drop(data_dir_lock);
    Ok(())
}

/// Writes the ready line and flushes it, so whoever waits for it sees it at once.
fn write_ready_line(out: &mut impl std::io::Write, line: &str) -> std::io::Result<()> {
    writeln!(out, "{line}")?;
    out.flush()
}

/// A channel that receives one message per SIGTERM/SIGINT, from a thread blocked on the
/// signals (`signal_hook::iterator`), so the main thread can sleep until one comes.
fn signal_channel() -> Result<crossbeam_channel::Receiver<()>, ServerError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).map_err(ServerError::Signals)?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("kafluss-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                let _ = tx.try_send(());
            }
        })
        .map_err(ServerError::Signals)?;
    Ok(rx)
}

/// Sets the shutdown flag and wakes every core to see it.
/// The start of every core thread's name (glommio appends `<index>-<executor id>`).
const CORE_THREAD: &str = "kafluss-core-";

/// A panic on a core thread aborts the process, after the panic message and an ERROR line.
///
/// A core cannot go on without the task that panicked, nor be wound down: glommio leaves its
/// executor in place when a task's panic unwinds the thread (nothing it holds is dropped), so
/// the core's connections and its listener socket would stay open and unserved, its mesh
/// peers would wait for answers that never come, and shutdown would wait for its drain for
/// ever. Aborting closes every socket, so clients reconnect and retry; what was acknowledged
/// is in the page cache (acks=1) or on disk (acks=-1) and is recovered at the next start.
/// Other threads keep Rust's default (the admin server answers 500 when a handler panics).
fn abort_on_core_panic() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            let thread = std::thread::current();
            if let Some(name) = thread.name().filter(|name| name.starts_with(CORE_THREAD)) {
                tracing::error!(
                    thread = name,
                    "a core panicked ({info}); aborting the process: the core's connections and buckets cannot be served or drained without it"
                );
                std::process::abort();
            }
        }));
    });
}

fn stop_cores(shutdown: &AtomicBool, cores: &[ControlSender]) {
    shutdown.store(true, Ordering::SeqCst);
    for core in cores {
        core.ring();
    }
}

/// The start-up warning about a plaintext Fluss listener, whose every request acts as
/// `User:ANONYMOUS`. With the authorizer off while a Kafka listener requires SASL: anyone
/// reaching the Fluss listener can read every row and change the credentials (`CALL
/// sys.set_cluster_configs`), so the SASL is no guard. With the authorizer on and
/// `User:ANONYMOUS` not a super user: nobody can administer the server there (granting
/// anything, `CALL sys.add_acl` included, needs ALTER on CLUSTER, which only an ACL for
/// `User:ANONYMOUS` could give), and nothing else said so.
fn fluss_listener_warning(
    config: &ServerConfig,
    security: &kafluss_auth::SecurityConfig,
    super_users: &[Principal],
) -> Option<String> {
    use kafluss_auth::ListenerSecurity;
    let fluss = config.fluss_bind_listener()?;
    if security.listener_security(&fluss.name) != ListenerSecurity::Plaintext {
        return None;
    }
    if config.authorizer_enabled {
        if super_users.contains(&Principal::anonymous()) {
            return None;
        }
        let others: String = config
            .kafka_bind_listeners()
            .into_iter()
            .map(|listener| {
                format!(
                    ",{}:{}",
                    listener.name,
                    security.listener_security(&listener.name)
                )
            })
            .collect();
        return Some(format!(
            "authorizer.enabled is true and Fluss listener {fluss} is plaintext: every SQL and admin HTTP \
             request on it acts as User:ANONYMOUS, which is not in super.users, so it may do only what \
             ACLs grant User:ANONYMOUS (nothing at first: CALL sys.add_acl itself needs ALTER on CLUSTER), \
             and nobody can administer the server there. Either map {fluss} to sasl \
             (security.protocol.map: {fluss}:sasl{others}) with an administrator in super.users who has \
             a password in security.sasl.plain.credentials, or add User:ANONYMOUS to super.users \
             (then anyone who can connect to {fluss} administers the server)",
            fluss = fluss.name,
        ));
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
/// the storage and metrics hooks, `/healthz` following `ready` and `shutdown`; returns the
/// listener name and the running server.
fn start_admin(
    config: &ServerConfig,
    runtime: &Runtime,
    metrics: &Arc<Metrics>,
    ready: &Arc<AtomicBool>,
    shutdown: &Arc<AtomicBool>,
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
    // Set by the signal handler (or when a core exits): /healthz says the server is going.
    context.stopping = shutdown.clone();
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
    let socket = bind_retrying(&listener.name, address, || std::net::TcpListener::bind(address))?;
    let handle = start_admin_server_on(socket, context).map_err(|source| ServerError::Admin {
        listener: listener.name.clone(),
        source,
    })?;
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
        let super_users = kafluss_auth::parse_super_users(&config.super_users).unwrap();
        fluss_listener_warning(&config, &security, &super_users)
    }

    /// The CPUs this thread may run on, highest first.
    fn allowed_cpus() -> Vec<usize> {
        let mask = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
        (0..nix::sched::CpuSet::count())
            .rev()
            .filter(|&cpu| mask.is_set(cpu).unwrap())
            .collect()
    }

    /// Under a narrowed affinity mask (`taskset -c N`, a container's cpuset) the cores are
    /// pinned inside it: once to the highest allowed CPU alone (not CPU 0 unless it is the only
    /// one), and with the whole mask every id is allowed and online.
    #[test]
    fn cores_are_pinned_within_the_affinity_mask() {
        let all = allowed_cpus();
        let ids = cpu_ids();
        assert!(!ids.is_empty());
        assert!(ids.iter().all(|cpu| all.contains(cpu)), "{ids:?} outside {all:?}");
        let highest = all[0];
        let narrowed = std::thread::spawn(move || {
            let mut one = nix::sched::CpuSet::new();
            one.set(highest).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).unwrap();
            cpu_ids()
        })
        .join()
        .unwrap();
        assert_eq!(narrowed, vec![highest]);
    }

    /// A core that holds the table's logs open (it acknowledges only when told to): the
    /// directory must survive until it has closed them, however long that takes.
    #[test]
    fn a_dropped_tables_directory_waits_for_the_slowest_core() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(CatalogConfig::new(dir.path())).unwrap();
        let mut session = catalog.session(
            kafluss_auth::Principal::anonymous(),
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        );
        catalog.execute("CREATE TABLE t (x INT)", &mut session).unwrap();
        let table = catalog.snapshot().table("fluss", "t").unwrap().clone();
        let table_dir = dir.path().join(table.relative_dir().unwrap());
        std::fs::create_dir_all(crate::log::bucket_dir(&table_dir, 0)).unwrap();

        let (fast_tx, fast_rx) = control_channel(4);
        let (slow_tx, slow_rx) = control_channel(4);
        let (exited_tx, exited_rx) = control_channel(4);
        drop(exited_rx); // a core that has exited: nothing to wait for
        let (fast_rx, slow_rx) = (fast_rx.queue, slow_rx.queue);
        let hook = table_dropped_hook(
            dir.path().to_path_buf(),
            vec![fast_tx, slow_tx, exited_tx],
            Arc::new(LogRegistry::new()),
            Arc::new(BucketOwners::new(3)),
        );
        let fast = std::thread::spawn(move || {
            let ControlMessage::DropTable { done, .. } = fast_rx.recv().unwrap();
            done.send(()).unwrap();
        });
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
        let slow = std::thread::spawn(move || {
            let ControlMessage::DropTable { done, .. } = slow_rx.recv().unwrap();
            release_rx.recv().unwrap(); // holds its logs open until released
            done.send(()).unwrap();
        });
        let dropping = std::thread::spawn(move || hook(&table));
        fast.join().unwrap();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(25));
            assert!(
                table_dir.exists(),
                "deleted while a core still holds the logs open"
            );
            assert!(!dropping.is_finished());
        }
        release_tx.send(()).unwrap();
        slow.join().unwrap();
        dropping.join().unwrap();
        assert!(!table_dir.exists(), "deleted once every core has closed");
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
    }

    /// With the authorizer on, a plaintext Fluss listener serves only `User:ANONYMOUS`: unless
    /// it is a super user, nobody can administer the server there (not even `add_acl`), which
    /// start-up says, naming both ways out.
    #[test]
    fn warns_when_the_authorizer_leaves_the_fluss_listener_nobody_to_administer_it() {
        for defines in [
            &["authorizer.enabled=true", "super.users=User:admin"][..],
            &["authorizer.enabled=true"],
            &["security.protocol.map=KAFKA:sasl", "authorizer.enabled=true"],
        ] {
            let warning = warning_for(defines).expect("a warning");
            for needle in [
                "Fluss listener FLUSS is plaintext",
                "User:ANONYMOUS",
                "nobody can administer",
                "map FLUSS to sasl",
                "add User:ANONYMOUS to super.users",
            ] {
                assert!(warning.contains(needle), "{defines:?}: {needle}: {warning}");
            }
        }
        assert!(
            warning_for(&["security.protocol.map=KAFKA:sasl", "authorizer.enabled=true"])
                .expect("a warning")
                .contains("security.protocol.map: FLUSS:sasl,KAFKA:sasl")
        );
        for defines in [
            &["authorizer.enabled=true", "super.users=User:admin;User:ANONYMOUS"][..],
            &[
                "security.protocol.map=FLUSS:sasl,KAFKA:sasl",
                "security.sasl.plain.credentials=admin:x",
                "authorizer.enabled=true",
                "super.users=User:admin",
            ],
        ] {
            assert_eq!(warning_for(defines), None, "{defines:?}");
        }
    }

    /// A /proc/net/tcp{,6} line for a socket on `ip`:`port` in `state`, printed as the kernel
    /// prints it (address words in host byte order).
    fn proc_line(ip: std::net::IpAddr, port: u16, state: &str) -> String {
        let octets = match ip {
            std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
            std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        let host: String = octets
            .chunks_exact(4)
            .map(|word| format!("{:08X}", u32::from_ne_bytes(word.try_into().unwrap())))
            .collect();
        let zeros = "0".repeat(host.len());
        format!("   3: {host}:{port:04X} {zeros}:0000 {state} 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0")
    }

    #[test]
    fn proc_net_entries_are_listeners_on_an_overlapping_address_only() {
        let ip = |text: &str| text.parse::<std::net::IpAddr>().unwrap();
        let at = |text: &str| text.parse::<SocketAddr>().unwrap();
        // As the kernel prints 127.0.0.1:19921 on a little-endian machine.
        #[cfg(target_endian = "little")]
        assert!(entry_listens_on(
            "   0: 0100007F:4DD1 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0",
            at("127.0.0.1:19921")
        ));
        for (listener, ours, listens) in [
            ("127.0.0.1", "127.0.0.1:9092", true),
            ("0.0.0.0", "127.0.0.1:9092", true),
            ("127.0.0.1", "0.0.0.0:9092", true),
            ("::", "127.0.0.1:9092", true),
            ("::ffff:127.0.0.1", "127.0.0.1:9092", true),
            ("::1", "[::1]:9092", true),
            ("fe80::1:2:3:4", "[fe80::1:2:3:4]:9092", true),
            ("127.0.0.2", "127.0.0.1:9092", false),
            ("::1", "127.0.0.1:9092", false),
            ("fe80::1:2:3:5", "[fe80::1:2:3:4]:9092", false),
        ] {
            let ours = at(ours);
            let line = proc_line(ip(listener), 9092, "0A");
            assert_eq!(
                entry_listens_on(&line, ours),
                listens,
                "{listener} {ours}: {line}"
            );
            // Another port, or a connection (TIME_WAIT 06, ESTABLISHED 01, FIN-WAIT-2 05).
            assert!(!entry_listens_on(&proc_line(ip(listener), 9093, "0A"), ours));
            for state in ["06", "01", "05"] {
                assert!(!entry_listens_on(&proc_line(ip(listener), 9092, state), ours));
            }
        }
        // The header, and a listening entry that cannot be read, which counts.
        assert!(!entry_listens_on(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
            at("127.0.0.1:9092")
        ));
        assert!(entry_listens_on(
            "   0: 0100007F 00000000:0000 0A",
            at("127.0.0.1:9092")
        ));
        assert!(entry_listens_on(
            "   0: 01007F:2384 00000000:0000 0A",
            at("127.0.0.1:9092")
        ));
    }

    #[test]
    fn a_live_listener_is_seen_in_proc_net_tcp() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let bound = listener.local_addr().unwrap();
        assert!(listening_on(bound));
        assert!(listening_on(SocketAddr::from(([0, 0, 0, 0], bound.port()))));
        assert!(!listening_on(SocketAddr::from(([127, 0, 0, 2], bound.port()))));
    }
}
