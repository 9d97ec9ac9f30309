//! The SQL examples of the product contract (`kafka-compatibility.txt`, "Create or enable a
//! table"), verbatim, for every test that runs them: this suite and the broker's tests.

/// Creates the `sales` database and the `sales.orders` table with the Kafka mapping enabled.
pub const SEED_CREATE: &str = "CREATE DATABASE IF NOT EXISTS sales;

CREATE TABLE sales.orders (
    order_id BIGINT,
    amount DECIMAL(18, 2),
    _kafka_key BYTES,
    _kafka_headers MAP<STRING, BYTES>
) WITH (
    'table.kafka.enabled' = 'true'
);";

/// Enables the Kafka mapping of the existing `sales.orders`.
pub const SEED_ENABLE: &str = "ALTER TABLE sales.orders SET (
    'table.kafka.enabled' = 'true'
);";

/// Both examples as one script (the ALTER on line 12).
pub fn seed_script() -> String {
    format!("{SEED_CREATE}\n\n{SEED_ENABLE}\n")
}
