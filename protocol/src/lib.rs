//! Sans-IO Kafka wire protocol: bytes in, typed frames out, and back. No sockets, no async.
