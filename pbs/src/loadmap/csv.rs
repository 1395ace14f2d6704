//! CSV load maps: `ny` lines of `nx` comma-separated numbers, line `j` holding boxes
//! `j*nx .. (j+1)*nx`; a 3D map is `nz` such blocks, one per layer from z = 0, separated by
//! blank lines. Blank lines before the first row and after the last are ignored; anything else
//! malformed is an error that names its line and column.

use std::path::Path;

use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::problem::validate_loads;

/// Parses a CSV load map into its grid and loads, validating every value: a 2D grid, or a 3D
/// one where blank lines separate its layers (every layer the same rows and columns).
///
/// ```
/// let (grid, loads) = pbs::loadmap::parse_csv("1,2,3\n4,5,6\n").unwrap();
/// assert_eq!((grid.nx(), grid.ny()), (3, 2));
/// assert_eq!(loads[4], 5.0);
/// let (cube, loads) = pbs::loadmap::parse_csv("1,2\n3,4\n\n5,6\n7,8\n").unwrap();
/// assert_eq!((cube.nx(), cube.ny(), cube.nz()), (2, 2, 2));
/// assert_eq!(loads[cube.index(0, 1, 1)], 7.0);
/// let err = pbs::loadmap::parse_csv("1,2,3\n4,x,6\n").unwrap_err();
/// assert_eq!(err.to_string(), "load map CSV, line 2, column 2: \"x\" is not a number");
/// ```
pub fn parse_csv(text: &str) -> Result<(Grid, Vec<f64>)> {
    // Spreadsheets on Windows start their UTF-8 exports with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    let blank = |l: &&str| l.trim().is_empty();
    let used = lines.iter().rposition(|l| !blank(l)).map_or(0, |p| p + 1);
    let first = lines.iter().position(|l| !blank(l)).unwrap_or(used);
    if used == 0 {
        return Err(Error::Csv { line: 1, column: 1, reason: "the file holds no numbers (empty grid)".into() });
    }
    let mut loads = Vec::new();
    // Columns, rows of the first layer, layers done; the rows of the layer being read, from
    // line `start`.
    let (mut nx, mut ny, mut nz) = (0, 0, 0);
    let (mut rows, mut start) = (0, first);
    // A layer's rows, checked against the first layer's once it ends.
    let end_layer = |rows: usize, nz: usize, ny: usize, start: usize| {
        if nz > 0 && rows != ny {
            return Err(Error::Csv {
                line: start + 1,
                column: 1,
                reason: format!(
                    "layer {} (from this line) has {rows} row{} where layer 1 has {ny} (layers must all be the same size)",
                    nz + 1,
                    if rows == 1 { "" } else { "s" }
                ),
            });
        }
        Ok(rows)
    };
    for (j, line) in lines.iter().enumerate().take(used).skip(first) {
        if blank(line) {
            if rows > 0 {
                ny = end_layer(rows, nz, ny, start)?;
                (nz, rows) = (nz + 1, 0);
            }
            continue;
        }
        if rows == 0 {
            start = j;
        }
        let row: Vec<&str> = line.split(',').map(str::trim).collect();
        if nx == 0 {
            nx = row.len();
        } else if row.len() != nx {
            return Err(Error::Csv {
                line: j + 1,
                column: row.len().min(nx) + 1,
                reason: format!(
                    "{} values on this line but {nx} on line {} (rows must all have the same length)",
                    row.len(),
                    first + 1
                ),
            });
        }
        rows += 1;
        if nz > 0 && rows > ny {
            return Err(Error::Csv {
                line: j + 1,
                column: 1,
                reason: format!(
                    "layer {} has more rows than layer 1's {ny} (layers must all be the same size)",
                    nz + 1
                ),
            });
        }
        for (i, field) in row.iter().enumerate() {
            let bad = |reason: String| Error::Csv { line: j + 1, column: i + 1, reason };
            if field.is_empty() {
                return Err(bad("empty field".into()));
            }
            let v: f64 = field.parse().map_err(|_| bad(format!("{field:?} is not a number")))?;
            if !v.is_finite() || v < 0.0 {
                return Err(bad(format!("load {v} must be finite and ≥ 0")));
            }
            loads.push(v);
        }
    }
    ny = end_layer(rows, nz, ny, start)?;
    let grid = Grid::new_3d(nx, ny, nz + 1)?;
    validate_loads(&grid, &loads)?;
    Ok((grid, loads))
}

/// The largest load-map file read: about 25 million boxes, and a bound for an endless
/// source (`/dev/zero`, a pipe) given by mistake.
pub const MAX_CSV_BYTES: u64 = 256 << 20;

/// Reads and parses a CSV load map from a file of at most [`MAX_CSV_BYTES`].
pub fn read_csv(path: &Path) -> Result<(Grid, Vec<f64>)> {
    use std::io::Read;
    let fail = |reason: String| Error::LoadMapFile { path: path.display().to_string(), reason };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_CSV_BYTES + 1).read_to_end(&mut bytes).map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_CSV_BYTES {
        return Err(fail(format!("it holds more than {} MiB, the most a load map may", MAX_CSV_BYTES >> 20)));
    }
    let text = String::from_utf8(bytes).map_err(|e| fail(format!("not UTF-8 text ({e})")))?;
    // Named, so that a message about line 3 says which of a folder's maps it is about.
    parse_csv(&text).map_err(|e| fail(e.to_string()))
}

/// Writes loads as a CSV load map, a 3D grid's layers separated by blank lines, so that
/// [`parse_csv`] reads back the same grid and loads.
///
/// # Panics
/// If `loads` has fewer entries than the grid has boxes.
pub fn to_csv(grid: &Grid, loads: &[f64]) -> String {
    let mut s = String::new();
    for l in 0..grid.nz() {
        if l > 0 {
            s.push('\n');
        }
        for j in 0..grid.ny() {
            let row: Vec<String> = (0..grid.nx()).map(|i| format!("{}", loads[grid.index(i, j, l)])).collect();
            s.push_str(&row.join(","));
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let g = Grid::new(3, 2).unwrap();
        let loads = vec![0.0, 1.5, 2.0, 3.0, 0.25, 1e-3];
        assert_eq!(parse_csv(&to_csv(&g, &loads)).unwrap(), (g, loads));
        assert!(parse_csv(" 1 , 2 \r\n3,4\n\n\n").is_ok());
        let err = |t: &str| parse_csv(t).unwrap_err().to_string();
        assert!(err("").contains("empty grid"));
        assert!(err("1,2\n3\n").contains("line 2"));
        // A short row is named at its first missing field, a long one at its first extra.
        assert!(err("1,2,3\n4,5\n").contains("line 2, column 3"), "{}", err("1,2,3\n4,5\n"));
        assert!(err("1\n2,3,4\n").contains("line 2, column 2"), "{}", err("1\n2,3,4\n"));
        assert!(err("1,2\n3,-1\n").contains("line 2, column 2"));
        assert!(err("1,NaN\n").contains("finite"));
        assert!(err("1,inf\n").contains("finite"));
        assert!(err("1,,2\n").contains("column 2: empty field"));
        // Blank lines between rows separate layers: every layer as many rows as the first.
        let (cube, loads) = parse_csv("\n1,2\n3,4\n\n\n5,6\n7,8\n\n9,10\n11,12\n\n").unwrap();
        assert_eq!(([cube.nx(), cube.ny(), cube.nz()], loads[cube.index(1, 0, 2)]), ([2, 2, 3], 10.0));
        assert_eq!(parse_csv(&to_csv(&cube, &loads)).unwrap(), (cube, loads));
        assert_eq!(to_csv(&cube, &[1.0; 12]), "1,1\n1,1\n\n1,1\n1,1\n\n1,1\n1,1\n");
        assert_eq!(parse_csv("1,2\n\n3,4\n").unwrap().0, Grid::new_3d(2, 1, 2).unwrap());
        let short = err("1,2\n3,4\n\n5,6\n\n7,8\n9,10\n");
        assert_eq!(short, "load map CSV, line 4, column 1: layer 2 (from this line) has 1 row where layer 1 has 2 (layers must all be the same size)");
        assert!(
            err("1,2\n3,4\n\n5,6\n7,8\n9,10\n").contains("line 6, column 1: layer 2 has more rows than layer 1's 2")
        );
        assert!(err("1,2\n3,4\n\n5,6\n7,8\n\n9,10\n")
            .contains("line 7, column 1: layer 3 (from this line) has 1 row where"));
        assert!(err("1,2\n\n3\n").contains("line 3, column 2: 1 values on this line but 2 on line 1"));
        assert!(err("\n\n1,2\n3\n").contains("line 4, column 2: 1 values on this line but 2 on line 3"));
        assert_eq!(parse_csv("\u{feff}1,2\n3,4\n").unwrap().1, [1.0, 2.0, 3.0, 4.0], "a byte-order mark");
    }

    #[test]
    fn files_that_cannot_be_read_or_parsed_are_named() {
        let e = read_csv(Path::new("/nonexistent/map.csv")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read load map /nonexistent/map.csv: No such file"), "{e}");
        let e = read_csv(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "cannot read load map /dev/zero: it holds more than 256 MiB, the most a load map may");
        let e = read_csv(Path::new("/")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read load map /: "), "{e}");
        // A file that reads but does not parse: the parser's words, after the file's name.
        let path = std::env::temp_dir().join(format!("pbs-csv-bad-{}.csv", std::process::id()));
        std::fs::write(&path, "1,2\n3,x\n").unwrap();
        let e = read_csv(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).ok();
        assert_eq!(
            e,
            format!("cannot read load map {}: load map CSV, line 2, column 2: \"x\" is not a number", path.display())
        );
    }
}
