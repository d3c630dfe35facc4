//! What every chart shares: the drawn chart as the exports take it, the font, plotters' errors,
//! and N written short on an axis.

use anyhow::anyhow;

use units::count;

/// The font family of every chart's text (the browser renders it: no fonts are embedded).
pub const FONT: &str = "sans-serif";

/// One chart, ready to write or inline.
pub struct Chart {
    /// File name under charts/.
    pub file: String,
    pub title: String,
    /// What the chart shows and where its data came from.
    pub note: String,
    pub svg: String,
}

/// A plotters error as ours.
pub fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}

/// N on an axis: 1M, 10k, 1,500.
pub fn short_n(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => count(n),
    }
}
