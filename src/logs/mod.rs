//! Logs: where the lines go, at which priority, and how many there are.
//!
//! Owns the subscriber (text or JSON on stderr; under systemd each line
//! goes to journald's native socket with its priority and its fields as
//! journal fields, so `journalctl -p warning` finds the warnings and
//! `journalctl TRACE_ID=…` an event's attempts, or, when that socket does
//! not answer, to the stream with the `<N>` priority prefix journald reads),
//! the periodic summary line, and
//! `loud_or_debug!`, which logs at warn within the per-minute [`Budget`]
//! and at debug past it (the budget is `metrics`', which holds and counts
//! it beside the counter it bounds). Per-event lines (stored, delivered,
//! retrying) are at debug; at info the volume is the summary, one line per
//! `log.summary_interval` while something happens, plus what people and
//! state changes do (a circuit opening, an operator's replay). Bodies,
//! secrets and full header sets are never logged: that rule is kept by the
//! call sites, which log ids, names and counts, and by the tests that send
//! a known secret and body through a bad request and look for neither in
//! the output; this module only carries the lines.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, time::SystemTime};
use tracing_subscriber::registry::LookupSpan;

use crate::config::{LogConfig, LogFormat};
pub use crate::metrics::{Budget, LOUD_PER_MINUTE};
use crate::metrics::{Metrics, Tally};
use crate::supervise::TaskError;

mod journal;
use journal::{Entry, Fields, Journal};

/// The log filter (`log.level`) did not parse.
#[derive(Debug, thiserror::Error)]
#[error("log.level: {level:?} is not a level or filter: {source}")]
pub struct FilterError {
    level: String,
    source: tracing_subscriber::filter::ParseError,
}

/// Installs the process's subscriber: `log`'s level and format on stderr,
/// or, when stderr is the journal, as native journal entries (the stream
/// with priority prefixes when journald's socket does not answer). Once per
/// process.
pub fn init(log: &LogConfig) -> Result<(), FilterError> {
    let filter =
        tracing_subscriber::EnvFilter::try_new(&log.level).map_err(|source| FilterError {
            level: log.level.clone(),
            source,
        })?;
    let journal = crate::systemd::stderr_is_the_journal();
    let sink = || {
        if journal {
            Journal::open().map_or(Sink::Stream, Sink::Native)
        } else {
            Sink::Stderr
        }
    };
    // Colour only on a terminal: journald and log files get plain text.
    let ansi = !journal && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match log.format {
        // The time stays in JSON: shippers read it from the object.
        LogFormat::Json => builder
            .fmt_fields(format::JsonFields::new())
            .event_format(Journaled {
                sink: sink(),
                inner: format().json().flatten_event(true),
            })
            .init(),
        // journald stamps each line itself.
        LogFormat::Text if journal => builder
            .event_format(Journaled {
                sink: sink(),
                inner: format().without_time(),
            })
            .init(),
        LogFormat::Text => builder.init(),
    }
    Ok(())
}

fn format() -> format::Format<format::Full, SystemTime> {
    format::Format::default()
}

/// Where a formatted line goes.
enum Sink {
    /// stderr as it is: a terminal, a file, a pipe.
    Stderr,
    /// stderr is the journal's stream, its native socket did not answer:
    /// each line starts with its syslog priority, which journald
    /// (`SyslogLevelPrefix=yes`, its default) strips and files the line at.
    Stream,
    /// journald's native socket: the line as `MESSAGE`, with `PRIORITY`,
    /// `SYSLOG_IDENTIFIER`, `TARGET` and the event's fields beside it.
    Native(Journal),
}

/// A formatter that sends each line where [`Sink`] says: it formats with
/// `inner`, then writes the line to stderr or sends it to journald itself
/// (writing nothing to stderr then).
struct Journaled<F> {
    sink: Sink,
    inner: F,
}

/// sd-daemon(3)'s `SD_ERR` … `SD_DEBUG` for a tracing level.
fn priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

impl<S, N, F> FormatEvent<S, N> for Journaled<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let priority = priority(*event.metadata().level());
        let journal = match &self.sink {
            Sink::Stderr => return self.inner.format_event(ctx, writer, event),
            Sink::Stream => {
                write!(writer, "<{priority}>")?;
                return self.inner.format_event(ctx, writer, event);
            }
            Sink::Native(journal) => journal,
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let mut entry = Entry::default();
        // The text format pads the level to five columns: " INFO".
        entry.field("MESSAGE", line.trim().as_bytes());
        entry.field("PRIORITY", priority.to_string().as_bytes());
        entry.field("SYSLOG_IDENTIFIER", b"hookinbox");
        let mut fields = Fields {
            entry: &mut entry,
            log_target: None,
        };
        event.record(&mut fields);
        let target = fields
            .log_target
            .take()
            .unwrap_or_else(|| event.metadata().target().to_owned());
        entry.field("TARGET", target.as_bytes());
        match journal.send(&entry) {
            Ok(()) => Ok(()),
            // journald restarting, or an entry too large for a datagram:
            // the stream still takes the line.
            Err(_) => write!(writer, "<{priority}>{line}"),
        }
    }
}

/// Logs an event at `$level` (`warn`, `error`) while `$loud`, else at
/// debug: the same fields, so a line the [`Budget`] quieted still shows with
/// `log.level = "debug"`.
#[macro_export]
macro_rules! loud_or_debug {
    ($loud:expr, $level:ident, $($rest:tt)+) => {
        if $loud {
            ::tracing::$level!($($rest)+)
        } else {
            ::tracing::debug!($($rest)+)
        }
    };
}

/// Every `every`, one line of what happened since the last: at info, or at
/// warn when a request was refused, an attempt failed or an event was
/// dead-lettered. Nothing when nothing happened. Runs until `shutdown`, and
/// then says what happened since the last line.
pub async fn summarize(
    metrics: Metrics,
    every: Duration,
    shutdown: CancellationToken,
) -> Result<(), TaskError> {
    let mut last = metrics.tally();
    let mut since = tokio::time::Instant::now();
    loop {
        let stopping = tokio::select! {
            biased;
            () = shutdown.cancelled() => true,
            () = tokio::time::sleep_until(since + every) => false,
        };
        let now = metrics.tally();
        // Whole seconds: "1m", not "1m 3ms" of a late wake-up.
        let window = Duration::from_secs(since.elapsed().as_secs_f64().round() as u64);
        summary_line(
            &now.since(last),
            &humantime::format_duration(window).to_string(),
        );
        if stopping {
            return Ok(());
        }
        last = now;
        since = tokio::time::Instant::now();
    }
}

fn summary_line(t: &Tally, window: &str) {
    if t.is_quiet() {
        return;
    }
    macro_rules! summary {
        ($level:ident) => {
            tracing::$level!(
                window,
                received = t.received,
                duplicates = t.duplicates,
                rejected = t.rejected,
                delivered = t.delivered,
                failed_attempts = t.failed_attempts,
                dead_lettered = t.dead_lettered,
                quieted = t.quieted,
                "summary"
            )
        };
    }
    if t.has_trouble() {
        summary!(warn);
    } else {
        summary!(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_the_syslog_ones() {
        assert_eq!(priority(Level::ERROR), 3);
        assert_eq!(priority(Level::WARN), 4);
        assert_eq!(priority(Level::INFO), 6);
        assert_eq!(priority(Level::DEBUG), 7);
        assert_eq!(priority(Level::TRACE), 7);
    }
}
