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

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// Aligned plain text: numbers right-aligned, text left-aligned.
    pub fn text(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let numeric = c.parse::<f64>().is_ok() || c.ends_with('%') || c.ends_with('×');
                    if numeric {
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

    /// A GitHub-flavoured markdown table.
    pub fn markdown(&self) -> String {
        let mut s = format!("| {} |\n", self.header.join(" | "));
        s += &format!("|{}\n", "---|".repeat(self.header.len()));
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
        assert!(t.markdown().starts_with("| case | steps |\n|---|---|\n"));
    }

    /// The whole text, literal: widths in characters (not bytes), numbers, percentages and
    /// ratios right-aligned, words (the titles too) left-aligned, two spaces between columns, no trailing
    /// spaces; the markdown table with every row.
    #[test]
    fn the_text_and_markdown_are_these_characters() {
        let mut t = Table::new(&["méthode", "max_avg", "share", "vs", "note"]);
        t.row(vec!["pbs".into(), "1.03".into(), "5%".into(), "0.9×".into(), "".into()]);
        t.row(vec!["rcb-kway".into(), "12".into(), "45%".into(), "1×".into(), "ok".into()]);
        assert_eq!(
            t.text(),
            "méthode   max_avg  share  vs    note\n\
             --------  -------  -----  ----  ----\n\
             pbs          1.03     5%  0.9×\n\
             rcb-kway       12    45%    1×  ok\n"
        );
        assert_eq!(
            t.markdown(),
            "| méthode | max_avg | share | vs | note |\n|---|---|---|---|---|\n| pbs | 1.03 | 5% | 0.9× |  |\n\
             | rcb-kway | 12 | 45% | 1× | ok |\n"
        );
    }
}
