//! One run: its summary (what one task costs) and its phases.

pub mod phases;
pub mod summary;
