//! `hookinbox backup`: streams a consistent copy of the running server's
//! database into a file only its owner can read, renamed into place when
//! whole. The copy itself is the server's (`admin`).

use std::io::Write;

use anyhow::anyhow;

use super::client::{Client, NO_BODY, fail};
use super::output::Output;
use crate::exit::{EXIT_FAILURE, Failure};

pub(super) async fn run(client: &Client, out: &std::path::Path, json: bool) -> Result<(), Failure> {
    let bytes = backup(client, out).await?;
    let written = serde_json::json!({"out": out.display().to_string(), "bytes": bytes});
    let text = format!("backup written to {} ({bytes} bytes)\n", out.display());
    Output::new(&written, text).print(json)
}

/// Streams the backup into `out` through a temp file, renamed when whole.
async fn backup(client: &Client, out: &std::path::Path) -> Result<u64, Failure> {
    let mut res = client
        .call(reqwest::Method::GET, "/api/backup", NO_BODY, NO_BODY)
        .await?;
    let partial = out.with_extension("partial");
    let io = |e: std::io::Error| fail(EXIT_FAILURE, anyhow!("{}: {e}", out.display()));
    let mut file = create_private(&partial).map_err(io)?;
    let mut bytes = 0u64;
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("the backup download broke off: {e}")))?
    {
        file.write_all(&chunk).map_err(io)?;
        bytes += chunk.len() as u64;
    }
    file.sync_all().map_err(io)?;
    std::fs::rename(&partial, out).map_err(io)?;
    Ok(bytes)
}

/// Creates (or truncates) `path` readable by its owner only: a backup holds
/// every stored payload, which the usual umask 022 would make world-readable.
fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // The mode applies only to a file this call creates; a partial file left
    // by an earlier broken download keeps its own. Tighten it before a byte
    // is written.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}
