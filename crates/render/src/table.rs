//! One table model for every table spawnscope shows: built once from figures, then written as
//! Markdown (summary.md, compare.md), HTML (report.html), CSV (compare.csv) or aligned terminal
//! columns. Adding a column is one more cell in the place that builds the rows.

use std::fmt::Write;

/// One cell: text (a figure, a label, or an empty string where a figure came out empty), or
/// blank, where nothing belongs (the header over row labels, a subtotal row's share). The two
/// differ only in Markdown, `|  |` against `| |`; HTML, CSV and the terminal write both empty.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Blank,
}

impl Cell {
    pub fn text(&self) -> &str {
        match self {
            Cell::Text(t) => t,
            Cell::Blank => "",
        }
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Cell::Text(s)
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Cell::Text(s.to_string())
    }
}

impl From<&String> for Cell {
    fn from(s: &String) -> Self {
        Cell::Text(s.clone())
    }
}

/// A table: a header, rows of already formatted cells, and which columns hold figures that
/// Markdown right-aligns (`---:`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub header: Vec<Cell>,
    pub rows: Vec<Vec<Cell>>,
    /// By column; a column past its end is not right-aligned.
    pub right: Vec<bool>,
}

impl Table {
    pub fn new<S: Into<Cell>>(header: impl IntoIterator<Item = S>) -> Self {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            right: Vec::new(),
        }
    }

    /// Right-aligns these columns (counted from 0) in Markdown.
    pub fn right_aligned(mut self, columns: impl IntoIterator<Item = usize>) -> Self {
        for c in columns {
            if self.right.len() <= c {
                self.right.resize(c + 1, false);
            }
            self.right[c] = true;
        }
        self
    }

    pub fn row<S: Into<Cell>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// GitHub-flavoured Markdown: `| a | b |`, a `|---|` rule (`---:` for right-aligned
    /// columns), one line per row. A `|` inside a cell is escaped.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let line = |md: &mut String, cells: &[Cell]| {
            md.push('|');
            for c in cells {
                match c {
                    Cell::Text(t) => {
                        let _ = write!(md, " {} |", t.replace('|', "\\|"));
                    }
                    Cell::Blank => md.push_str(" |"),
                }
            }
            md.push('\n');
        };
        line(&mut md, &self.header);
        md.push('|');
        for i in 0..self.header.len() {
            md.push_str(if self.right.get(i) == Some(&true) {
                "---:|"
            } else {
                "---|"
            });
        }
        md.push('\n');
        for row in &self.rows {
            line(&mut md, row);
        }
        md
    }

    /// An HTML `<table>` with escaped cells.
    pub fn html(&self, class: &str) -> String {
        let mut out = String::new();
        let _ = write!(out, "<table class=\"{}\"><thead><tr>", escape(class));
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape(h.text()));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell.text()));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>\n");
        out
    }

    /// RFC 4180 CSV: a header line, then one line per row; fields quoted when they need it.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let fields: Vec<String> = line.iter().map(|f| csv_field(f.text())).collect();
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        out
    }
}

/// Text safe inside HTML elements and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One CSV field, quoted when it holds a comma, a quote or a line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["figure", "threads", "goroutines"]);
        t.row(["RSS", "8.2 KiB", "2.6 KiB"]);
        t.row(["kernel <stack>", "16.0 KiB", "0 B"]);
        t
    }

    #[test]
    fn markdown_has_a_header_rule_and_one_line_per_row() {
        assert_eq!(
            sample().markdown(),
            "| figure | threads | goroutines |\n|---|---|---|\n| RSS | 8.2 KiB | 2.6 KiB |\n| kernel <stack> | 16.0 KiB | 0 B |\n"
        );
        let mut pipes = Table::new(["a"]);
        pipes.row(["x | y"]);
        assert!(
            pipes.markdown().contains("| x \\| y |"),
            "a | in a cell would split it"
        );
    }

    #[test]
    fn html_escapes_every_cell() {
        let html = sample().html("per-task");
        assert!(html.starts_with("<table class=\"per-task\"><thead><tr><th>figure</th>"));
        assert!(html.contains("<td>kernel &lt;stack&gt;</td>"));
        assert!(!html.contains("<stack>"));
        assert_eq!(html.matches("<tr>").count(), 3);
    }

    #[test]
    fn csv_quotes_only_what_needs_it() {
        let mut t = Table::new(["machine", "note"]);
        t.row(["M1 (vm)", "say \"x\", y"]);
        assert_eq!(t.csv(), "machine,note\nM1 (vm),\"say \"\"x\"\", y\"\n");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn blank_cells_and_right_aligned_columns_in_markdown() {
        let mut t =
            Table::new([Cell::Blank, "samples".into(), "entered from".into()]).right_aligned([1]);
        t.row([Cell::from("**kernel**"), "12".into(), Cell::Blank]);
        t.row(["user", "3", ""]);
        assert_eq!(
            t.markdown(),
            "| | samples | entered from |\n|---|---:|---|\n| **kernel** | 12 | |\n| user | 3 |  |\n"
        );
        // Elsewhere a blank is just empty.
        let headers: Vec<&str> = t.header.iter().map(Cell::text).collect();
        assert_eq!(headers, ["", "samples", "entered from"]);
        assert!(t.html("a").contains("<thead><tr><th></th><th>samples</th>"));
        assert!(t.html("a").contains("<td>12</td><td></td></tr>"));
        assert_eq!(t.csv().lines().nth(1), Some("**kernel**,12,"));
    }
}
