//! Columns defined once for every format: each column knows how people see it (compare.md,
//! report.html) and how a spreadsheet gets it (the CSVs), and a list of columns becomes a `Table`
//! of either kind.

use crate::table::Table;
use analyse::comparisons::regression::Spread;

/// One column of a comparison table, defined once for compare.md and report.html (`shown`) and
/// for compare.csv / compare-fits.csv (`raw`). The tables take the columns in list order, each
/// format skipping the columns it does not have.
pub struct Column<T> {
    pub shown: Option<Shown<T>>,
    pub raw: Raw<T>,
    /// Shown only when the runs come from several machines (the CSV always has it).
    pub several_machines: bool,
}

/// How compare.md and report.html show a column: its header, whether Markdown right-aligns it
/// (figures), and its cell, formatted for people.
pub struct Shown<T> {
    pub header: &'static str,
    pub right: bool,
    pub cell: fn(&T) -> String,
}

/// How the CSV writes a column: exact values, no units.
pub enum Raw<T> {
    /// Not in the CSV.
    None,
    One(&'static str, fn(&T) -> String),
    /// Three fields, `{name}_min,{name}_median,{name}_max`, empty when not measured.
    Spread(&'static str, fn(&T) -> &Option<Spread>),
    Several(&'static [&'static str], fn(&T) -> Vec<String>),
}

/// A text column (left-aligned).
pub const fn label<T>(header: &'static str, cell: fn(&T) -> String) -> Option<Shown<T>> {
    Some(Shown {
        header,
        right: false,
        cell,
    })
}

/// A figure column (right-aligned).
pub const fn figure<T>(header: &'static str, cell: fn(&T) -> String) -> Option<Shown<T>> {
    Some(Shown {
        header,
        right: true,
        cell,
    })
}

impl<T> Raw<T> {
    pub fn names(&self) -> Vec<String> {
        match self {
            Raw::None => Vec::new(),
            Raw::One(name, _) => vec![name.to_string()],
            Raw::Spread(name, _) => ["min", "median", "max"]
                .iter()
                .map(|s| format!("{name}_{s}"))
                .collect(),
            Raw::Several(names, _) => names.iter().map(|n| n.to_string()).collect(),
        }
    }

    pub fn values(&self, record: &T) -> Vec<String> {
        match self {
            Raw::None => Vec::new(),
            Raw::One(_, get) => vec![get(record)],
            Raw::Spread(_, get) => match get(record) {
                Some(s) => vec![s.min.to_string(), s.median.to_string(), s.max.to_string()],
                None => vec![String::new(); 3],
            },
            Raw::Several(_, get) => get(record),
        }
    }
}

/// The columns shown in compare.md / report.html, as a table of `records`.
pub fn shown_table<T>(columns: &[Column<T>], records: &[T], several_machines: bool) -> Table {
    let shown: Vec<&Shown<T>> = columns
        .iter()
        .filter(|c| several_machines || !c.several_machines)
        .filter_map(|c| c.shown.as_ref())
        .collect();
    let mut t = Table::new(shown.iter().map(|c| c.header))
        .right_aligned((0..shown.len()).filter(|&i| shown[i].right));
    for r in records {
        t.row(shown.iter().map(|c| (c.cell)(r)));
    }
    t
}

/// The columns written in the CSV, as a table of `records`.
pub fn raw_table<T>(columns: &[Column<T>], records: &[T]) -> Table {
    let mut t = Table::new(columns.iter().flat_map(|c| c.raw.names()));
    for r in records {
        t.row(columns.iter().flat_map(|c| c.raw.values(r)));
    }
    t
}
