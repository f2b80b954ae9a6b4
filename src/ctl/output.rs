//! What an operator command prints: the API's JSON with `--json`, else
//! text for people (left-aligned tables, times, a dash for nothing). It
//! sends no request.

use serde::Serialize;

use crate::api::Timestamp;
use crate::exit::Failure;

/// What a command prints: the API's JSON with `--json`, else `text`.
pub(super) struct Output {
    json: serde_json::Value,
    text: String,
}

impl Output {
    pub(super) fn new(value: &impl Serialize, text: String) -> Output {
        Output {
            json: serde_json::to_value(value).unwrap_or_default(),
            text,
        }
    }

    /// Prints it: the JSON, pretty, with `json`; else the text.
    pub(super) fn print(self, json: bool) -> Result<(), Failure> {
        if json {
            let mut json = serde_json::to_string_pretty(&self.json).unwrap_or_default();
            json.push('\n');
            print(&json)
        } else {
            print(&self.text)
        }
    }
}

/// What a listing prints: one page as the API answered it (its items and
/// the cursor to the next), or with `--all` every item of every page, in
/// the order the pages gave them, as one JSON array: no page is left, so
/// there is no cursor. Every listing (`events list|search`, `dlq list`,
/// `keys list`, `audit`) prints these two shapes, so a script reads them
/// all the same way.
pub(super) fn listing<P: Serialize, T: Serialize>(
    pages: Vec<P>,
    all: bool,
    items: impl Fn(P) -> Vec<T>,
    text: String,
) -> Output {
    if all {
        let every: Vec<T> = pages.into_iter().flat_map(items).collect();
        Output::new(&every, text)
    } else {
        Output::new(&pages[0], text)
    }
}

pub(super) fn print(text: &str) -> Result<(), Failure> {
    Ok(crate::exit::write_stdout(text.as_bytes())?)
}

pub(super) fn or_dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub(super) fn time(at: Timestamp) -> String {
    serde_json::to_value(at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

pub(super) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Left-aligned columns, two spaces apart.
pub(super) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}
