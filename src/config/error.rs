//! `ConfigError`: what is wrong, and where: the file or variable, the line
//! and column, the key path and the source it belongs to.

use std::fmt;

/// A configuration error: names the file (or variable), the line and column
/// when the TOML parser found it, the key, and what is wrong:
/// `hookinbox.toml:12:11: source[0].kind: unknown variant …`.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub origin: String,
    /// Where in the file: the parser's place, or the value of the key that
    /// validation refused (`None` when the text cannot tell, as for a
    /// variable).
    pub position: Option<Position>,
    /// The key path, like `source[0].tolerance`; empty when there is none
    /// (a syntax error, a file that cannot be read).
    pub key: String,
    /// The name of the source the key belongs to, as the file gives it:
    /// `source[3]` alone makes the reader count tables.
    pub source_name: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(position) = self.position {
            write!(f, ":{position}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        if let Some(source) = &self.source_name {
            write!(f, " (source {source:?})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl ConfigError {
    /// Adds what the file's `text` tells about the key: where its value is
    /// (validation finds a bad value in the typed structs, which have
    /// forgotten it), and the name of the source it is in. A key the file
    /// does not have (a value that is missing) is placed at the nearest
    /// table that holds it. A key in `from_env` took a variable's value:
    /// the file's line for it would mislead.
    pub(super) fn locate(mut self, text: &str, from_env: &[&str]) -> ConfigError {
        if self.key.is_empty() || from_env.contains(&self.key.as_str()) {
            return self;
        }
        let Ok(document) = toml::de::DeTable::parse(text) else {
            return self;
        };
        let mut at = None;
        let mut table = Some(document.get_ref());
        for segment in self.key.split('.') {
            let (name, index) = match segment.split_once('[') {
                Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                None => (segment, None),
            };
            let Some(found) = table.and_then(|t| member(t, name)) else {
                break;
            };
            let mut value = found;
            if let (Some(i), toml::de::DeValue::Array(items)) = (index, found.get_ref()) {
                value = items.get(i).unwrap_or(found);
                if name == "source" && self.source_name.is_none() {
                    self.source_name = items
                        .get(i)
                        .and_then(|s| match s.get_ref() {
                            toml::de::DeValue::Table(t) => member(t, "name"),
                            _ => None,
                        })
                        .and_then(|n| match n.get_ref() {
                            toml::de::DeValue::String(n) => Some(n.to_string()),
                            _ => None,
                        });
                }
            }
            at = Some(value.span().start);
            table = match value.get_ref() {
                toml::de::DeValue::Table(t) => Some(t),
                _ => None,
            };
        }
        if self.position.is_none() {
            self.position = at.map(|offset| Position::of(text, offset));
        }
        self
    }
}

/// The value of `key` in a parsed table.
fn member<'t, 'i>(
    table: &'t toml::de::DeTable<'i>,
    key: &str,
) -> Option<&'t toml::Spanned<toml::de::DeValue<'i>>> {
    table
        .iter()
        .find(|(k, _)| &**k.get_ref() == key)
        .map(|(_, v)| v)
}

/// A place in a config file, both counted from 1; the column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text`.
    pub(super) fn of(text: &str, offset: usize) -> Position {
        // A span from the parser falls on a character boundary; be safe anyway.
        let end = (0..=offset.min(text.len()))
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        let before = &text[..end];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}
