//! Server-side limiters (in progress).
