//! A small table printer for people: left-aligned columns separated by two spaces.

use std::fmt::Write as _;

/// Rows of text cells under optional headers, printed with aligned columns.
#[derive(Debug, Default)]
pub(crate) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (none: a plain two-column listing, say).
    pub(crate) fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; line breaks in cells become spaces so every row stays one line.
    pub(crate) fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let cells = cells
            .into_iter()
            .map(|c| c.into().replace(['\n', '\r'], " "))
            .collect();
        self.rows.push(cells);
        self
    }

    /// Whether the table has no rows.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row (and one for the headers, if any).
    pub(crate) fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, cell) in line.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let lines = (!self.headers.is_empty())
            .then_some(&self.headers)
            .into_iter()
            .chain(&self.rows);
        for line in lines {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                let _ = write!(text, "{cell:<width$}", width = widths[i]);
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text` cut to at most `max` characters, ending in `…` when cut.
pub(crate) fn ellipsize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_trailing_space_is_trimmed() {
        let mut table = Table::new(&["ID", "STEP"]);
        table.row(["a", "1"]).row(["longer", "10"]);
        assert_eq!(table.render(), "ID      STEP\na       1\nlonger  10\n");
    }

    #[test]
    fn headerless_tables_and_cut_cells() {
        let mut table = Table::new(&[]);
        table.row(["key", "multi\nline"]);
        assert_eq!(table.render(), "key  multi line\n");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
        assert_eq!(ellipsize("abc", 4), "abc");
    }
}
