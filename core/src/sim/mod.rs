//! The Discord simulator (in progress).
