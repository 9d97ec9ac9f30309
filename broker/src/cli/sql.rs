//! `kafluss sql`: TODO
