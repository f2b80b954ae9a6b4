//! The `[server]`, `[retention]` and `[log]` sections: addresses, timeouts,
//! connection limits, ages and the log level. Sources, destinations, the
//! admin token and alerts are checked elsewhere.

use std::path::PathBuf;

use super::{Ctx, longest};
use crate::config::raw::{RawRetention, RawServer, default};
use crate::config::{AdminSocket, ConfigError, RetentionConfig, ServerConfig};

/// Past this, one process runs out of file descriptors long before.
const MAX_CONNECTIONS_LIMIT: u64 = 1_000_000;

pub(super) fn validate_server(cx: &mut Ctx<'_>, s: RawServer) -> Result<ServerConfig, ConfigError> {
    let admin_socket = admin_socket(cx, &s)?;
    let addr = |key: &str, value: Option<&str>, default: &str| {
        let text = value.unwrap_or(default);
        text.parse().map_err(|_| {
            cx.err(
                key,
                format!("{text:?} is not an address like 127.0.0.1:8080"),
            )
        })
    };
    let max_connections = match s.max_connections.unwrap_or(default::MAX_CONNECTIONS) {
        n @ 1..=MAX_CONNECTIONS_LIMIT => n as usize,
        n => {
            return Err(cx.err(
                "server.max_connections",
                format!("{n} is not between 1 and {MAX_CONNECTIONS_LIMIT}"),
            ));
        }
    };
    let max_buffered_body = cx.size(
        "server.max_buffered_body",
        s.max_buffered_body,
        default::MAX_BUFFERED_BODY,
    )?;
    let tls = match (&s.tls_cert_file, &s.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let files = crate::tls::TlsFiles {
                cert: cx.path(cert),
                key: cx.path(key),
            };
            // Read now: a wrong path or a key that does not match is a
            // config error, not a listener that cannot handshake.
            files
                .load()
                .map_err(|e| cx.err("server.tls_cert_file", e.to_string()))?;
            Some(files)
        }
        (Some(_), None) => {
            return Err(cx.err(
                "server.tls_key_file",
                "is required with server.tls_cert_file",
            ));
        }
        (None, Some(_)) => {
            return Err(cx.err(
                "server.tls_cert_file",
                "is required with server.tls_key_file",
            ));
        }
    };
    let timeout = |key: &str, value: &Option<String>, default: &str| {
        cx.duration(key, value.as_deref(), default, longest::TIMEOUT)
    };
    let server = ServerConfig {
        listen: addr("server.listen", s.listen.as_deref(), default::LISTEN)?,
        admin_listen: addr(
            "server.admin_listen",
            s.admin_listen.as_deref(),
            default::ADMIN_LISTEN,
        )?,
        data_dir: PathBuf::from(s.data_dir.as_deref().unwrap_or(default::DATA_DIR)),
        header_read_timeout: timeout(
            "server.header_read_timeout",
            &s.header_read_timeout,
            default::HEADER_READ_TIMEOUT,
        )?,
        body_read_timeout: timeout(
            "server.body_read_timeout",
            &s.body_read_timeout,
            default::BODY_READ_TIMEOUT,
        )?,
        shutdown_timeout: timeout(
            "server.shutdown_timeout",
            &s.shutdown_timeout,
            default::SHUTDOWN_TIMEOUT,
        )?,
        max_connections,
        max_buffered_body,
        tls,
        admin_socket,
    };
    if server.listen == server.admin_listen && server.listen.port() != 0 {
        return Err(cx.err("server.admin_listen", "must differ from server.listen"));
    }
    // Allowed (behind a firewall or a VPN it is useful), but said out loud.
    if !server.admin_listen.ip().is_loopback() {
        cx.warnings.push(format!(
            "{}: server.admin_listen (HOOKINBOX_ADMIN_LISTEN) {} is reachable from other hosts: the admin token is then the only guard of the admin API (every payload, replay, backup); keep it on 127.0.0.1 unless a firewall or VPN stands in front",
            cx.origin, server.admin_listen
        ));
    }
    Ok(server)
}

/// `server.admin_socket` with its mode and group: an absolute path (the
/// service's working directory is no place to look for it), a mode of
/// permission bits only, a group name. Whether the group exists is found
/// out at start, where the socket is made.
fn admin_socket(cx: &mut Ctx<'_>, s: &RawServer) -> Result<Option<AdminSocket>, ConfigError> {
    let Some(path) = s.admin_socket.as_deref() else {
        for (key, value) in [
            ("server.admin_socket_mode", &s.admin_socket_mode),
            ("server.admin_socket_group", &s.admin_socket_group),
        ] {
            if value.is_some() {
                return Err(cx.err(key, "is set but server.admin_socket is not"));
            }
        }
        return Ok(None);
    };
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(cx.err(
            "server.admin_socket",
            format!(
                "{:?} is not an absolute path like /run/hookinbox/admin.sock",
                path.display().to_string()
            ),
        ));
    }
    // sun_path holds 108 bytes with its terminating NUL.
    if path.as_os_str().len() > 107 {
        return Err(cx.err(
            "server.admin_socket",
            "is longer than a Unix socket's 107 bytes",
        ));
    }
    let mode = match s.admin_socket_mode.as_deref() {
        None => default::ADMIN_SOCKET_MODE,
        Some(text) => match u32::from_str_radix(text.trim_start_matches("0o"), 8) {
            Ok(mode) if mode <= 0o777 && mode & 0o600 == 0o600 => mode,
            Ok(mode) if mode <= 0o777 => {
                return Err(cx.err(
                    "server.admin_socket_mode",
                    format!("{text:?} does not let hookinbox's own user read and write it (0600 at least)"),
                ));
            }
            _ => {
                return Err(cx.err(
                    "server.admin_socket_mode",
                    format!("{text:?} is not permission bits in octal like \"0660\""),
                ));
            }
        },
    };
    if mode & 0o006 != 0 {
        cx.warnings.push(format!(
            "{}: server.admin_socket_mode {mode:04o} lets every user of the machine connect to {}: the admin token is then the only guard; 0660 with admin_socket_group names who may",
            cx.origin,
            path.display()
        ));
    }
    let group = match s.admin_socket_group.as_deref() {
        Some("") => return Err(cx.err("server.admin_socket_group", "is empty")),
        group => group.map(str::to_owned),
    };
    Ok(Some(AdminSocket { path, mode, group }))
}

pub(super) fn validate_retention(
    cx: &Ctx<'_>,
    r: RawRetention,
) -> Result<RetentionConfig, ConfigError> {
    let age = |key: &str, value: Option<String>, default: &str| {
        cx.duration(key, value.as_deref(), default, longest::AGE)
    };
    Ok(RetentionConfig {
        dedupe_ttl: age("retention.dedupe_ttl", r.dedupe_ttl, default::DEDUPE_TTL)?,
        payload_ttl: age("retention.payload_ttl", r.payload_ttl, default::PAYLOAD_TTL)?,
        dlq_ttl: age("retention.dlq_ttl", r.dlq_ttl, default::DLQ_TTL)?,
        audit_ttl: age("retention.audit_ttl", r.audit_ttl, default::AUDIT_TTL)?,
        sweep_interval: cx.positive_duration(
            "retention.sweep_interval",
            r.sweep_interval.as_deref(),
            default::SWEEP_INTERVAL,
            longest::INTERVAL,
        )?,
    })
}

/// `log.level`: a level, or comma-separated `target=level` directives.
/// Anything else would pass the log filter and then log nothing.
pub(super) fn log_level(cx: &Ctx<'_>, text: String) -> Result<String, ConfigError> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    for part in text.split(',') {
        let level = part.rsplit_once('=').map_or(part, |(_, l)| l).trim();
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(cx.err(
                "log.level",
                format!(
                    "{level:?} is not a level: use trace, debug, info, warn, error or off \
                     (or target=level directives, comma-separated)"
                ),
            ));
        }
    }
    Ok(text)
}
