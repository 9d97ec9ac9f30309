//! A loopback TCP proxy between a client and the Kafka listener that notes what each client really
//! sent: the API versions it used, and for every Produce request the acks, the topics and each
//! record batch's codec and producer id. The suite advertises the tap as the Kafka listener, so
//! every connection of the client goes through it, and then checks that a "zstd" case really sent
//! zstd batches, an "acks=0" case really asked for acks 0, and each batch's producer id says
//! whether the client was idempotent.
//!
//! It also injects faults for the exactly-once tests ([`WireTap::cut_produce_every`]): it drops a
//! connection after forwarding a Produce request (the server appends, the client never hears) or
//! half-way through one. The upstream can change ([`WireTap::set_upstream`] again) when the
//! server restarts on new ports.
//!
//! The parsing here is written from the Kafka protocol guide on purpose, apart from the
//! `kafluss-protocol` crate under test.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// Frames larger than this are forwarded without being looked at.
const MAX_PARSED_FRAME: usize = 64 * 1024 * 1024;
/// How long a connection waits for the upstream address to be known.
const UPSTREAM_WAIT: Duration = Duration::from_secs(30);
/// Bound on the observations kept (a runaway client cannot grow memory without limit).
const MAX_OBSERVATIONS: usize = 100_000;

/// One record batch inside a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSeen {
    /// `none`, `gzip`, `snappy`, `lz4`, `zstd`, or `codec-N` for an unknown one.
    pub codec: String,
    pub magic: i8,
    pub producer_id: i64,
}

/// What one Produce request carried for one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceSeen {
    pub topic: String,
    pub api_version: i16,
    pub acks: i16,
    pub batches: Vec<BatchSeen>,
}

#[derive(Debug, Default)]
struct Observations {
    /// (api key, api version) of every request.
    requests: BTreeSet<(i16, i16)>,
    produce: Vec<ProduceSeen>,
    /// Frames the tap could not read (a tap bug, or a client sending something odd).
    unparsed: Vec<String>,
}

/// Faults to inject: every `every`-th Produce request (0: never) drops its connection.
#[derive(Debug, Default)]
struct Faults {
    every: AtomicU64,
    produce_seen: AtomicU64,
    cuts: AtomicU64,
}

/// Where connections go, and what they share.
struct Shared {
    upstream: RwLock<Option<SocketAddr>>,
    observations: Mutex<Observations>,
    faults: Faults,
}

/// The running proxy; stops accepting when dropped.
pub struct WireTap {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

impl WireTap {
    /// Binds a free loopback port; connections wait for [`WireTap::set_upstream`].
    pub fn start() -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let tap = Self {
            addr: listener.local_addr()?,
            shared: Arc::new(Shared {
                upstream: RwLock::new(None),
                observations: Mutex::new(Observations::default()),
                faults: Faults::default(),
            }),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (shared, stop) = (tap.shared.clone(), tap.stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let shared = shared.clone();
                        thread::spawn(move || relay(client, &shared));
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        Ok(tap)
    }

    /// The address clients connect to (advertise it as the Kafka listener).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where new connections are forwarded (the server's real Kafka listener); connections
    /// already open keep theirs.
    pub fn set_upstream(&self, addr: SocketAddr) {
        *self.shared.upstream.write().unwrap_or_else(|p| p.into_inner()) = Some(addr);
    }

    /// From now on every `n`-th Produce request (counted over all connections; 0: none) drops
    /// its connection: alternately right after the whole request was forwarded (the server
    /// handles it, its answer never reaches the client) and after only half of it.
    pub fn cut_produce_every(&self, n: u64) {
        self.shared.faults.every.store(n, Ordering::Relaxed);
    }

    /// Produce requests that went through so far (over all connections, cut or not).
    pub fn produce_requests(&self) -> u64 {
        self.shared.faults.produce_seen.load(Ordering::Relaxed)
    }

    /// Connections dropped by [`WireTap::cut_produce_every`] so far.
    pub fn cuts(&self) -> u64 {
        self.shared.faults.cuts.load(Ordering::Relaxed)
    }

    fn observations(&self) -> std::sync::MutexGuard<'_, Observations> {
        self.shared.observations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Produce requests seen for `topic`, in arrival order.
    pub fn produce_for(&self, topic: &str) -> Vec<ProduceSeen> {
        let observations = self.observations();
        observations
            .produce
            .iter()
            .filter(|seen| seen.topic == topic)
            .cloned()
            .collect()
    }

    /// `ApiVersions v3, Metadata v12, Produce v9` — every API and version seen so far.
    pub fn versions_used(&self) -> String {
        let observations = self.observations();
        let mut by_api: Vec<(i16, Vec<i16>)> = Vec::new();
        for (key, version) in &observations.requests {
            match by_api.last_mut() {
                Some((last, versions)) if last == key => versions.push(*version),
                _ => by_api.push((*key, vec![*version])),
            }
        }
        by_api
            .iter()
            .map(|(key, versions)| {
                let list: Vec<String> = versions.iter().map(|v| format!("v{v}")).collect();
                format!("{} {}", api_name(*key), list.join("/"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Frames that could not be read, with the reason.
    pub fn unparsed(&self) -> Vec<String> {
        self.observations().unparsed.clone()
    }
}

impl Drop for WireTap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn api_name(key: i16) -> String {
    match key {
        0 => "Produce".into(),
        3 => "Metadata".into(),
        17 => "SaslHandshake".into(),
        18 => "ApiVersions".into(),
        22 => "InitProducerId".into(),
        36 => "SaslAuthenticate".into(),
        other => format!("api{other}"),
    }
}

fn relay(client: TcpStream, shared: &Shared) {
    let started = Instant::now();
    let target = loop {
        if let Some(addr) = *shared.upstream.read().unwrap_or_else(|p| p.into_inner()) {
            break addr;
        }
        if started.elapsed() > UPSTREAM_WAIT {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let Ok(server) = TcpStream::connect(target) else {
        return;
    };
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let (Ok(client_reader), Ok(server_writer)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let back = thread::spawn(move || {
        let (mut from, mut to) = (server, client);
        let _ = io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
    forward_requests(client_reader, server_writer, shared);
    let _ = back.join();
}

/// What to do with a Produce request under the tap's faults.
#[derive(Debug, PartialEq)]
enum Cut {
    No,
    /// Forward it whole, then drop the connection.
    AfterRequest,
    /// Forward half of it, then drop the connection.
    MidRequest,
}

fn produce_cut(faults: &Faults) -> Cut {
    let seen = faults.produce_seen.fetch_add(1, Ordering::Relaxed) + 1;
    let every = faults.every.load(Ordering::Relaxed);
    if every == 0 || !seen.is_multiple_of(every) {
        return Cut::No;
    }
    if faults.cuts.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
        Cut::AfterRequest
    } else {
        Cut::MidRequest
    }
}

/// Copies client bytes upstream frame by frame, noting each frame. After the connection's SASL
/// handshake v0 the frames are raw tokens, not requests; they fail to parse as requests of a
/// known API and are simply forwarded.
fn forward_requests(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut prefix = [0u8; 4];
    loop {
        if from.read_exact(&mut prefix).is_err() {
            break;
        }
        let size = i32::from_be_bytes(prefix);
        if size < 0 || size as usize > MAX_PARSED_FRAME {
            // Not ours to judge: forward the prefix and the rest of the stream untouched.
            let _ = to.write_all(&prefix);
            let _ = io::copy(&mut from, &mut to);
            break;
        }
        let mut frame = vec![0u8; size as usize];
        if from.read_exact(&mut frame).is_err() {
            break;
        }
        let cut = match frame.get(..2) {
            Some([0, 0]) => produce_cut(&shared.faults),
            _ => Cut::No,
        };
        if cut == Cut::No {
            // Noted before it is forwarded: whoever reads the answer then sees the request.
            note_request(&frame, &shared.observations);
        }
        let sent = if cut == Cut::MidRequest {
            frame.len() / 2
        } else {
            frame.len()
        };
        if to
            .write_all(&prefix)
            .and_then(|()| to.write_all(&frame[..sent]))
            .is_err()
        {
            break;
        }
        if cut != Cut::No {
            // Both ways at once: an answer already on its way back is lost too.
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn note_request(frame: &[u8], observations: &Mutex<Observations>) {
    let mut observations = observations.lock().unwrap_or_else(|p| p.into_inner());
    if observations.produce.len() >= MAX_OBSERVATIONS {
        return;
    }
    let mut reader = Reader::new(frame);
    let (Ok(key), Ok(version)) = (reader.i16(), reader.i16()) else {
        return;
    };
    if !matches!(key, 0 | 3 | 17 | 18 | 22 | 36) {
        return; // a raw SASL token, or an API kafluss does not serve
    }
    observations.requests.insert((key, version));
    if key == 0 {
        match parse_produce(frame) {
            Ok(seen) => observations.produce.extend(seen),
            Err(reason) => observations
                .unparsed
                .push(format!("Produce v{version}: {reason}")),
        }
    }
}

/// Parses a Produce request frame (header included) into one entry per topic.
pub fn parse_produce(frame: &[u8]) -> Result<Vec<ProduceSeen>, String> {
    let mut r = Reader::new(frame);
    let _key = r.i16()?;
    let version = r.i16()?;
    let _correlation_id = r.i32()?;
    let _client_id = r.nullable_string()?;
    let flexible = version >= 9;
    if flexible {
        r.skip_tagged_fields()?;
    }
    let _transactional_id = if flexible {
        r.compact_nullable_bytes()?
    } else {
        r.nullable_string()?
    };
    let acks = r.i16()?;
    let _timeout = r.i32()?;
    let topics = r.array_len(flexible)?;
    let mut seen = Vec::new();
    for _ in 0..topics {
        let name = if flexible {
            r.compact_nullable_bytes()?
        } else {
            r.nullable_string()?
        }
        .ok_or("null topic name")?;
        let topic = String::from_utf8(name).map_err(|_| "topic name is not UTF-8")?;
        let partitions = r.array_len(flexible)?;
        let mut batches = Vec::new();
        for _ in 0..partitions {
            let _index = r.i32()?;
            let records = if flexible {
                r.compact_nullable_bytes()?
            } else {
                r.nullable_bytes()?
            };
            batches.extend(parse_batches(&records.unwrap_or_default())?);
            if flexible {
                r.skip_tagged_fields()?;
            }
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
        seen.push(ProduceSeen {
            topic,
            api_version: version,
            acks,
            batches,
        });
    }
    Ok(seen)
}

/// The header fields of each v2 record batch in a `records` field.
fn parse_batches(records: &[u8]) -> Result<Vec<BatchSeen>, String> {
    let mut batches = Vec::new();
    let mut rest = records;
    while rest.len() >= 17 {
        let mut r = Reader::new(rest);
        let _base_offset = r.i64()?;
        let length = r.i32()?;
        let _leader_epoch = r.i32()?;
        let magic = r.i8()?;
        let end = 12usize
            .checked_add(usize::try_from(length).map_err(|_| "negative batch length")?)
            .filter(|end| *end <= rest.len())
            .ok_or("batch longer than its records field")?;
        if magic != 2 {
            batches.push(BatchSeen {
                codec: "legacy".into(),
                magic,
                producer_id: -1,
            });
        } else {
            let _crc = r.i32()?;
            let attributes = r.i16()?;
            let _last_offset_delta = r.i32()?;
            let _first_timestamp = r.i64()?;
            let _max_timestamp = r.i64()?;
            let producer_id = r.i64()?;
            let codec = match attributes & 0x07 {
                0 => "none".to_owned(),
                1 => "gzip".to_owned(),
                2 => "snappy".to_owned(),
                3 => "lz4".to_owned(),
                4 => "zstd".to_owned(),
                other => format!("codec-{other}"),
            };
            batches.push(BatchSeen {
                codec,
                magic,
                producer_id,
            });
        }
        rest = &rest[end..];
    }
    Ok(batches)
}

/// Big-endian reads over a byte slice; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], String> {
        if count > self.bytes.len() {
            return Err(format!(
                "truncated: wanted {count} bytes, {} left",
                self.bytes.len()
            ));
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }

    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().map_err(|_| "i16")?))
    }

    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().map_err(|_| "i32")?))
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().map_err(|_| "i64")?))
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn nullable_string(&mut self) -> Result<Option<Vec<u8>>, String> {
        let length = self.i16()?;
        if length < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(length as usize)?.to_vec()))
    }

    fn nullable_bytes(&mut self) -> Result<Option<Vec<u8>>, String> {
        let length = self.i32()?;
        if length < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(length as usize)?.to_vec()))
    }

    /// Compact string or bytes: unsigned varint length + 1, 0 for null.
    fn compact_nullable_bytes(&mut self) -> Result<Option<Vec<u8>>, String> {
        let length = self.uvarint()?;
        if length == 0 {
            return Ok(None);
        }
        let length = usize::try_from(length - 1).map_err(|_| "length")?;
        Ok(Some(self.take(length)?.to_vec()))
    }

    fn array_len(&mut self, flexible: bool) -> Result<usize, String> {
        let count = if flexible {
            self.uvarint()?.checked_sub(1).ok_or("null array")? as i64
        } else {
            i64::from(self.i32()?)
        };
        // Each element takes at least one byte, which bounds what a bad count can claim.
        usize::try_from(count)
            .ok()
            .filter(|count| *count <= self.bytes.len())
            .ok_or_else(|| format!("bad array length {count}"))
    }

    fn skip_tagged_fields(&mut self) -> Result<(), String> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| "tag size")?;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 batch header (61 bytes, no records) with these attributes and producer id.
    fn batch(attributes: i16, producer_id: i64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0i64.to_be_bytes()); // base offset
        b.extend(49i32.to_be_bytes()); // length: the 49 bytes after this field
        b.extend(0i32.to_be_bytes()); // leader epoch
        b.push(2); // magic
        b.extend(0i32.to_be_bytes()); // crc (not checked here)
        b.extend(attributes.to_be_bytes());
        b.extend(0i32.to_be_bytes()); // last offset delta
        b.extend(0i64.to_be_bytes());
        b.extend(0i64.to_be_bytes());
        b.extend(producer_id.to_be_bytes());
        b.extend(0i16.to_be_bytes()); // producer epoch
        b.extend(0i32.to_be_bytes()); // base sequence
        b.extend(0i32.to_be_bytes()); // record count
        assert_eq!(b.len(), 61);
        b
    }

    #[test]
    fn reads_a_v3_produce_request() {
        let records = [batch(4, -1), batch(0, -1)].concat();
        let mut f = Vec::new();
        f.extend(0i16.to_be_bytes());
        f.extend(3i16.to_be_bytes());
        f.extend(7i32.to_be_bytes());
        f.extend(2i16.to_be_bytes());
        f.extend(b"me");
        f.extend((-1i16).to_be_bytes()); // transactional id
        f.extend(1i16.to_be_bytes()); // acks
        f.extend(1000i32.to_be_bytes());
        f.extend(1i32.to_be_bytes()); // topics
        f.extend(3i16.to_be_bytes());
        f.extend(b"a.b");
        f.extend(1i32.to_be_bytes()); // partitions
        f.extend(0i32.to_be_bytes());
        f.extend((records.len() as i32).to_be_bytes());
        f.extend(&records);
        let seen = parse_produce(&f).unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (seen[0].topic.as_str(), seen[0].api_version, seen[0].acks),
            ("a.b", 3, 1)
        );
        let codecs: Vec<&str> = seen[0].batches.iter().map(|b| b.codec.as_str()).collect();
        assert_eq!(codecs, ["zstd", "none"]);
        assert_eq!(seen[0].batches[0].producer_id, -1);
    }

    #[test]
    fn reads_a_flexible_v9_produce_request() {
        let records = batch(2, 42);
        let mut f = Vec::new();
        f.extend(0i16.to_be_bytes());
        f.extend(9i16.to_be_bytes());
        f.extend(7i32.to_be_bytes());
        f.extend((-1i16).to_be_bytes()); // null client id
        f.push(0); // header tags
        f.push(0); // null transactional id
        f.extend((-1i16).to_be_bytes()); // acks
        f.extend(1000i32.to_be_bytes());
        f.push(2); // one topic
        f.push(4);
        f.extend(b"x.y");
        f.push(2); // one partition
        f.extend(5i32.to_be_bytes());
        f.push(records.len() as u8 + 1);
        f.extend(&records);
        f.extend([0, 0, 0]); // partition, topic and body tags
        let seen = parse_produce(&f).unwrap();
        assert_eq!((seen[0].topic.as_str(), seen[0].acks), ("x.y", -1));
        assert_eq!(
            seen[0].batches,
            vec![BatchSeen {
                codec: "snappy".into(),
                magic: 2,
                producer_id: 42
            }]
        );
    }

    #[test]
    fn truncated_frames_are_errors_not_panics() {
        let records = batch(1, -1);
        for cut in 0..records.len() {
            assert!(parse_batches(&records[..cut]).unwrap_or_default().is_empty());
        }
        assert!(parse_produce(&[0, 0, 0, 3, 0]).is_err());
        assert!(parse_produce(&[0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0, 0xff]).is_err());
    }

    #[test]
    fn relays_and_notes_versions() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        let echo = thread::spawn(move || {
            let (mut stream, _) = upstream.accept().unwrap();
            let mut frame = [0u8; 12];
            stream.read_exact(&mut frame).unwrap();
            stream.write_all(&frame).unwrap();
        });
        let tap = WireTap::start().unwrap();
        tap.set_upstream(upstream_addr);
        let mut client = TcpStream::connect(tap.addr()).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // ApiVersions v3 header only: size 8, key 18, version 3, correlation 1.
        let request = [0, 0, 0, 8, 0, 18, 0, 3, 0, 0, 0, 1];
        client.write_all(&request).unwrap();
        let mut answer = [0u8; 12];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(answer, request);
        echo.join().unwrap();
        assert_eq!(tap.versions_used(), "ApiVersions v3");
    }
}
