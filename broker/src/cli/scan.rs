//! `kafluss scan`: TODO
