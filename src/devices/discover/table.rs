//! Box-drawn tables as `furiosa-smi` and `rbln-smi` print them.
//!
//! Cells are found by splitting on `|`, never by column positions: the vendor
//! documentation holds rows whose width does not match their borders.

/// One table: its header cells and its data rows, each row's cells trimmed.
#[derive(Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Column index of a header cell, compared case-insensitively.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
    }
}

/// Splits text into tables. A `|` line after a border that follows nothing else is a
/// title and ignored when it has a single cell; the first multi-cell line of a table
/// is its header; `+---` / `+===` lines are borders.
pub fn tables(text: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    let mut current: Option<Table> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('+') {
            continue;
        }
        if !line.starts_with('|') {
            // Text outside a table (a date line, `...`) ends the current one.
            if let Some(t) = current.take() {
                out.push(t);
            }
            continue;
        }
        let cells = cells(line);
        if cells.len() < 2 {
            // A title box ("Device Information KMD ver: 3.0.0") starts a new table.
            if let Some(t) = current.take() {
                out.push(t);
            }
            continue;
        }
        match current.as_mut() {
            None => {
                current = Some(Table {
                    header: cells,
                    rows: Vec::new(),
                })
            }
            Some(t) => t.rows.push(cells),
        }
    }
    if let Some(t) = current {
        out.push(t);
    }
    out
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// Parses a size such as `15.7GiB`, `47.50 GiB`, `2.4GB`, `0.0B`, `81559 MiB`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let number: f64 = t.get(..split)?.parse().ok()?;
    let unit = t.get(split..)?.trim();
    let factor: f64 = match unit {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    let bytes = number * factor;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then(|| bytes.round() as u64)
}
