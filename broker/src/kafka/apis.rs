//! The registry of Kafka APIs: for each, its advertised version range, its handler and its
//! metrics label. ApiVersions answers from it, `dispatch` routes and refuses by it, and the
//! metrics keep one series per counted entry, so the three cannot drift.
//!
//! Fetch and FindCoordinator are advertised for librdkafka (kcat, confluent-kafka; 2.0.2 and
//! 2.16 checked), which derives its features from the advertised APIs (`rdkafka_feature.c`):
//! - record batches (magic 2, `MsgVer2`) need Produce ≥ v3 AND Fetch ≥ v4: without Fetch it
//!   falls back to magic 0 message sets, which behaviour.md refuses;
//! - zstd needs Fetch v10 (with Produce v7), lz4 needs FindCoordinator v0: without them it
//!   silently sends lz4/zstd-configured batches uncompressed.
//!
//! A Fetch or FindCoordinator request closes the connection with a log line: producers send
//! neither (idempotent ones ask InitProducerId, which is served; only transactional producers
//! look up a coordinator, and transactions are not supported).

use kafluss_protocol::ApiKey;

/// Who answers an API's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// `produce.rs`; v0-2 are answered UNSUPPORTED_FOR_MESSAGE_FORMAT there.
    Produce,
    Metadata,
    /// `api_versions.rs`: answers any version (older format for unknown ones).
    ApiVersions,
    SaslHandshake,
    SaslAuthenticate,
    /// `init_producer_id.rs`: producer ids for idempotent producers.
    InitProducerId,
    /// Advertised for librdkafka's feature detection, never served: closes the connection.
    NotServed,
    /// Not advertised; answered by `unsupported.rs` with its own response.
    Unsupported,
}

/// One Kafka API as this server knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    pub key: ApiKey,
    /// The metrics label (`api="…"`) when `counted`.
    pub label: &'static str,
    /// The advertised version range; None: not advertised (every version is unsupported).
    pub versions: Option<(i16, i16)>,
    pub handler: Handler,
    /// Whether it has its own metric series; else it counts under [`OTHER_LABEL`].
    pub counted: bool,
}

/// Metrics label of every API without a series of its own.
pub const OTHER_LABEL: &str = "other";

const fn api(
    key: ApiKey,
    label: &'static str,
    versions: Option<(i16, i16)>,
    handler: Handler,
    counted: bool,
) -> Api {
    Api {
        key,
        label,
        versions,
        handler,
        counted,
    }
}

/// Every API this server answers or advertises. The counted ones come first, in the order
/// their series are rendered.
pub const APIS: [Api; 10] = [
    api(ApiKey::PRODUCE, "produce", Some((0, 12)), Handler::Produce, true),
    api(
        ApiKey::METADATA,
        "metadata",
        Some((0, 12)),
        Handler::Metadata,
        true,
    ),
    api(
        ApiKey::API_VERSIONS,
        "api_versions",
        Some((0, 4)),
        Handler::ApiVersions,
        true,
    ),
    api(
        ApiKey::SASL_HANDSHAKE,
        "sasl_handshake",
        Some((0, 1)),
        Handler::SaslHandshake,
        true,
    ),
    api(
        ApiKey::SASL_AUTHENTICATE,
        "sasl_authenticate",
        Some((0, 2)),
        Handler::SaslAuthenticate,
        true,
    ),
    api(
        ApiKey::INIT_PRODUCER_ID,
        "init_producer_id",
        Some((0, 5)),
        Handler::InitProducerId,
        true,
    ),
    api(
        ApiKey::CREATE_TOPICS,
        "create_topics",
        None,
        Handler::Unsupported,
        true,
    ),
    api(
        ApiKey::DELETE_TOPICS,
        "delete_topics",
        None,
        Handler::Unsupported,
        true,
    ),
    api(ApiKey::FETCH, "fetch", Some((4, 10)), Handler::NotServed, false),
    api(
        ApiKey::FIND_COORDINATOR,
        "find_coordinator",
        Some((0, 0)),
        Handler::NotServed,
        false,
    ),
];

const fn counted_apis() -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < APIS.len() {
        if APIS[i].counted {
            count += 1;
        }
        i += 1;
    }
    count
}

/// How many metric series per API metric: the counted APIs and `other`.
pub const METRIC_SERIES: usize = counted_apis() + 1;

const fn metric_labels() -> [&'static str; METRIC_SERIES] {
    let mut labels = [OTHER_LABEL; METRIC_SERIES];
    let (mut i, mut j) = (0, 0);
    while i < APIS.len() {
        if APIS[i].counted {
            labels[j] = APIS[i].label;
            j += 1;
        }
        i += 1;
    }
    labels
}

/// The `api` label values, in rendering order, `other` last.
pub const METRIC_LABELS: [&str; METRIC_SERIES] = metric_labels();

/// The registry entry of `api_key`.
pub fn find(api_key: i16) -> Option<&'static Api> {
    APIS.iter().find(|api| api.key.0 == api_key)
}

/// The index into [`METRIC_LABELS`] that a request of `api_key` counts under.
pub fn metric_index(api_key: i16) -> usize {
    APIS.iter()
        .filter(|api| api.counted)
        .position(|api| api.key.0 == api_key)
        .unwrap_or(METRIC_SERIES - 1)
}

/// The advertised ranges `(api_key, min, max)`, by api key.
pub fn advertised() -> Vec<(i16, i16, i16)> {
    let mut ranges: Vec<_> = APIS
        .iter()
        .filter_map(|api| api.versions.map(|(min, max)| (api.key.0, min, max)))
        .collect();
    ranges.sort_unstable();
    ranges
}

/// Whether `version` of `api` is advertised.
pub fn is_advertised(api: &Api, version: i16) -> bool {
    api.versions
        .is_some_and(|(min, max)| (min..=max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_is_behaviour_md_plus_librdkafka_feature_apis() {
        assert_eq!(
            advertised(),
            vec![
                (0, 0, 12),
                (1, 4, 10),
                (3, 0, 12),
                (10, 0, 0),
                (17, 0, 1),
                (18, 0, 4),
                (22, 0, 5),
                (36, 0, 2)
            ]
        );
        assert!(find(19).is_some_and(|api| api.versions.is_none()));
        assert!(find(42).is_none());
        assert_eq!(find(0).and_then(|api| api.versions), Some((0, 12)));
    }

    #[test]
    fn metric_labels_are_the_documented_ones() {
        assert_eq!(
            METRIC_LABELS,
            [
                "produce",
                "metadata",
                "api_versions",
                "sasl_handshake",
                "sasl_authenticate",
                "init_producer_id",
                "create_topics",
                "delete_topics",
                "other"
            ]
        );
        assert_eq!(METRIC_LABELS[metric_index(17)], "sasl_handshake");
        assert_eq!(METRIC_LABELS[metric_index(1)], "other");
        assert_eq!(METRIC_LABELS[metric_index(999)], "other");
    }
}
