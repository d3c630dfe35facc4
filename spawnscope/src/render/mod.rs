//! The only place that formats: summaries and comparisons as Markdown, terminal lines, CSV and
//! one HTML page; SVG charts and flame graphs. It reads no files and writes none: it is given
//! figures (analyse/) and returns text.

pub mod attribution;
pub mod charts;
pub mod columns;
pub mod compare;
pub mod flame;
pub mod html;
pub mod repeats;
pub mod sentinels;
pub mod summary;
pub mod table;
pub mod verdict;
pub mod waits;
