//! Helpers for the end-to-end suite: start the real binary on free loopback ports, stop it.
