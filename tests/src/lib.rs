//! Helpers for the end-to-end suite: start the real `kafluss` binary on free loopback ports,
//! drive it with real Kafka clients (kcat, confluent-kafka, kafka-python, aiokafka, kafkajs),
//! read every row back (HTTP scan and pyarrow on the segment files) and compare.
//!
//! `server` runs the binary; `http` and `process` are the bounded plumbing; `clients` finds the
//! client tools and runs plans through the driver scripts in `tests/clients/`; `tables` makes
//! the records and the rows they must become; `expect` compares; `suite` strings it together per
//! client; `report` gathers results into the summary line and the compatibility matrix;
//! `wire_tap` is a loopback proxy that notes what each client really put on the wire (and cuts
//! connections for the exactly-once tests); `kafka` runs Apache Kafka's broker and tools.

pub mod clients;
pub mod docs;
pub mod expect;
pub mod http;
pub mod kafka;
pub mod process;
pub mod report;
pub mod seed_sql;
pub mod server;
pub mod suite;
pub mod tables;
pub mod timestamp;
pub mod wire_tap;
