//! journald's native protocol: a log line as one datagram of fields, so what
//! a line names (`EVENT_ID`, `ROUTE`, `TRACE_ID`, `SPAN_ID` …) is a journal
//! field that `journalctl TRACE_ID=…` selects, not words inside `MESSAGE`.
//!
//! The framing is systemd's (sd_journal_sendv(3), systemd.journal-fields(7)):
//! `NAME=value\n`, or `NAME\n`, the value's length as a little-endian u64,
//! the value and `\n` when the value holds a newline. An entry that cannot be
//! sent (journald restarting, an entry larger than a datagram) is the
//! caller's to write to the stream instead, so no line is lost.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use tracing::field::{Field, Visit};

/// Where journald takes native entries.
const SOCKET: &str = "/run/systemd/journal/socket";

/// Names another socket than journald's: the tests run their own listener.
pub const SOCKET_ENV: &str = "HOOKINBOX_JOURNAL_SOCKET";

/// journald's longest field name.
const NAME_MAX: usize = 64;

/// A socket to journald.
pub struct Journal {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Journal {
    /// The journal, when its socket takes a datagram (an empty one, which
    /// journald drops); `None` without one.
    pub fn open() -> Option<Journal> {
        let path = std::env::var_os(SOCKET_ENV).map_or_else(|| SOCKET.into(), PathBuf::from);
        let socket = UnixDatagram::unbound().ok()?;
        socket.send_to(&[], &path).ok()?;
        Some(Journal { socket, path })
    }

    /// Sends one entry. Addressed by path each time, so a journald that
    /// restarted (a new socket at the same path) takes the next entry.
    pub fn send(&self, entry: &Entry) -> io::Result<()> {
        self.socket.send_to(&entry.0, &self.path).map(|_| ())
    }
}

/// One journal entry, framed.
#[derive(Default)]
pub struct Entry(Vec<u8>);

impl Entry {
    /// Appends a field. The name is made one journald takes: upper case,
    /// anything but a letter, digit or `_` as `_`, no leading `_` or digit
    /// (journald keeps those for its own fields), at most 64 bytes. A name
    /// with nothing left is skipped.
    pub fn field(&mut self, name: &str, value: &[u8]) {
        let name: String = name
            .chars()
            .map(|c| match c.to_ascii_uppercase() {
                c @ ('A'..='Z' | '0'..='9') => c,
                _ => '_',
            })
            .skip_while(|c| *c == '_' || c.is_ascii_digit())
            .take(NAME_MAX)
            .collect();
        if name.is_empty() {
            return;
        }
        self.0.extend_from_slice(name.as_bytes());
        if value.contains(&b'\n') {
            self.0.push(b'\n');
            self.0
                .extend_from_slice(&(value.len() as u64).to_le_bytes());
        } else {
            self.0.push(b'=');
        }
        self.0.extend_from_slice(value);
        self.0.push(b'\n');
    }

    #[cfg(test)]
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// An event's fields into an entry: strings as they are, the rest as the
/// text log shows them. `message` is left out (it is in `MESSAGE`), and so
/// are the `log.*` fields a line from a crate that logs through `log`
/// carries, but its `log.target`, which is the line's `TARGET`.
pub struct Fields<'a> {
    pub entry: &'a mut Entry,
    pub log_target: Option<String>,
}

impl Fields<'_> {
    fn record(&mut self, field: &Field, value: &[u8]) {
        match field.name() {
            "message" => {}
            "log.target" => self.log_target = Some(String::from_utf8_lossy(value).into_owned()),
            name if name.starts_with("log.") => {}
            name => self.entry.field(name, value),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.as_bytes());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_without_a_newline_is_name_equals_value() {
        let mut entry = Entry::default();
        entry.field("trace_id", b"4bf92f3577b34da6a3ce929d0e0e4736");
        entry.field("MESSAGE", b"delivered");
        assert_eq!(
            entry.bytes(),
            b"TRACE_ID=4bf92f3577b34da6a3ce929d0e0e4736\nMESSAGE=delivered\n"
        );
    }

    #[test]
    fn a_value_with_a_newline_is_length_framed() {
        let mut entry = Entry::default();
        entry.field("error", b"a\nb");
        let mut want = b"ERROR\n".to_vec();
        want.extend_from_slice(&3u64.to_le_bytes());
        want.extend_from_slice(b"a\nb\n");
        assert_eq!(entry.bytes(), want);
    }

    #[test]
    fn names_are_made_ones_journald_takes() {
        let mut entry = Entry::default();
        entry.field("event.id", b"1");
        entry.field("_private", b"2");
        entry.field("9lives", b"3");
        entry.field("__", b"4");
        entry.field(&"a".repeat(80), b"5");
        let text = String::from_utf8(entry.bytes().to_vec()).unwrap();
        let names: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
        assert_eq!(
            names,
            ["EVENT_ID", "PRIVATE", "LIVES", &"A".repeat(NAME_MAX)]
        );
    }
}
