//! Readable fixed-width tables for the terminal and markdown tables for reports.

/// A table with a header row; cells are already formatted strings.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// column titles
    pub header: Vec<String>,
    /// data rows
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row; a shorter row leaves its last columns blank.
    ///
    /// # Panics
    ///
    /// If the row has more cells than the table has columns: a caller's bug, named in the message.
    pub fn row(&mut self, cells: Vec<String>) {
        assert!(
            cells.len() <= self.header.len(),
            "a row of {} cells in a table of {} columns ({})",
            cells.len(),
            self.header.len(),
            self.header.join(", ")
        );
        self.rows.push(cells);
    }

    /// Each column's width: the widest of its title and cells (cells past the titles, pushed
    /// straight into `rows`, widen columns of their own).
    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            w.resize(w.len().max(r.len()), 0);
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// Which columns hold figures: at least one cell that starts with a number (`1.03`,
    /// `5%`, `0.9×`, `3 (21.9 %)`) and no cell but those and placeholders (`-`, `n/a`, empty).
    fn figure_columns(&self) -> Vec<bool> {
        let figure = |c: &str| {
            let first = c.split_whitespace().next().unwrap_or("");
            first.parse::<f64>().is_ok() || (first.len() > 1 && (first.ends_with('%') || first.ends_with('×')))
        };
        let placeholder = |c: &str| matches!(c.trim(), "" | "-" | "—" | "n/a" | "null");
        let columns = self.rows.iter().map(Vec::len).fold(self.header.len(), usize::max);
        (0..columns)
            .map(|i| {
                let cells = || self.rows.iter().filter_map(|r| r.get(i)).map(|c| c.as_str());
                cells().any(figure) && cells().all(|c| figure(c) || placeholder(c))
            })
            .collect()
    }

    /// Aligned plain text: columns of figures right-aligned, their titles too; the others
    /// left-aligned.
    pub fn text(&self) -> String {
        let w = self.widths();
        let right = self.figure_columns();
        let line = |cells: &[String]| {
            let parts: Vec<String> =
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if right[i] {
                            format!("{c:>width$}", width = w[i])
                        } else {
                            format!("{c:<width$}", width = w[i])
                        }
                    })
                    .collect();
            parts.join("  ").trim_end().to_string()
        };
        let mut s = line(&self.header) + "\n";
        s += &w.iter().map(|&n| "-".repeat(n)).collect::<Vec<_>>().join("  ");
        s.push('\n');
        for r in &self.rows {
            s += &line(r);
            s.push('\n');
        }
        s
    }

    /// A GitHub-flavoured markdown table, columns of figures right-aligned.
    pub fn markdown(&self) -> String {
        let mut s = format!("| {} |\n|", self.header.join(" | "));
        for right in self.figure_columns().into_iter().take(self.header.len()) {
            s += if right { "---:|" } else { "---|" };
        }
        s.push('\n');
        for r in &self.rows {
            s += &format!("| {} |\n", r.join(" | "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&["case", "steps"]);
        t.row(vec!["uniform".into(), "7".into()]);
        t.row(vec!["disc".into(), "123".into()]);
        let text = t.text();
        assert!(text.contains("uniform      7\n"), "{text}");
        assert!(t.markdown().starts_with("| case | steps |\n|---|---:|\n"));
    }

    /// The whole text, literal: widths in characters (not bytes), columns of numbers,
    /// percentages and ratios right-aligned with their titles, words left-aligned, two spaces
    /// between columns, no trailing spaces; the markdown table with every row, its columns of
    /// figures aligned right.
    #[test]
    fn the_text_and_markdown_are_these_characters() {
        let mut t = Table::new(&["méthode", "max_avg", "share", "vs", "note"]);
        t.row(vec!["pbs".into(), "1.03".into(), "5%".into(), "0.9×".into(), "".into()]);
        t.row(vec!["rcb-kway".into(), "12".into(), "45%".into(), "1×".into(), "ok".into()]);
        assert_eq!(
            t.text(),
            "méthode   max_avg  share    vs  note\n\
             --------  -------  -----  ----  ----\n\
             pbs          1.03     5%  0.9×\n\
             rcb-kway       12    45%    1×  ok\n"
        );
        assert_eq!(
            t.markdown(),
            "| méthode | max_avg | share | vs | note |\n|---|---:|---:|---:|---|\n| pbs | 1.03 | 5% | 0.9× |  |\n\
             | rcb-kway | 12 | 45% | 1× | ok |\n"
        );
    }

    /// A column is one of figures when a cell starts with a number and every other cell does
    /// too or holds nothing (`-`, `n/a`, empty); one word among the figures, a lone `%` or a
    /// column of placeholders alone leaves it to the left.
    #[test]
    fn columns_of_figures_are_told_by_every_cell() {
        let mut t = Table::new(&["a", "b", "c", "d", "e", "f"]);
        t.row(vec!["3 (21.9 %)".into(), "1".into(), "-".into(), "%".into(), "2".into(), "1.3/0.0".into()]);
        t.row(vec!["-".into(), "n/a".into(), "".into(), "×".into(), "two".into(), "0.5/1".into()]);
        t.row(vec!["12 (0.0 %)".into(), "NaN".into(), "—".into(), "%".into(), "3".into(), "1/2".into()]);
        assert_eq!(t.figure_columns(), [true, true, false, false, false, false]);
        let first = t.text().lines().nth(2).unwrap().to_string();
        assert_eq!(first, "3 (21.9 %)    1  -  %  2    1.3/0.0");
        assert!(t.markdown().contains("\n|---:|---:|---|---|---|---|\n"), "{}", t.markdown());
    }

    /// A short row leaves its last columns blank; a row longer than the titles is refused by
    /// `row` with the sizes named, and one pushed into `rows` directly widens a column of its own
    /// instead of indexing past the widths.
    #[test]
    fn rows_of_other_lengths() {
        let mut t = Table::new(&["case", "steps", "note"]);
        t.row(vec!["disc".into()]);
        t.row(vec!["uniform".into(), "7".into(), "ok".into()]);
        assert_eq!(t.text(), "case     steps  note\n-------  -----  ----\ndisc\nuniform      7  ok\n");
        let long = std::panic::catch_unwind(|| Table::new(&["a"]).row(vec!["1".into(), "2".into()]));
        let message = long.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(*message, "a row of 2 cells in a table of 1 columns (a)");
        t.rows.push(vec!["x".into(), "1".into(), "y".into(), "extra".into()]);
        assert_eq!(t.text().lines().last(), Some("x            1  y     extra"));
        assert!(t.markdown().starts_with("| case | steps | note |\n|---|---:|---|\n"), "{}", t.markdown());
    }
}
