//! `GET /api/backup`: a consistent copy of the database, streamed. Owns the
//! private temp file the copy passes through; refuses to leave it behind.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};

/// Streams a consistent copy of the database (a redb file). The copy is
/// made from one read snapshot into a private temp file in the data dir,
/// which is unlinked as soon as it is open: nothing is left behind.
#[utoipa::path(get, path = "/api/backup", tag = "operations",
    responses((status = 200, description = "A consistent copy of the database (a redb file)", content_type = "application/octet-stream", body = Vec<u8>), Unauthorized, StoreUnavailable))]
pub(super) async fn backup(State(state): State<AdminState>) -> Result<Response, AdminError> {
    let store = state.store.clone();
    let dir = store
        .path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let stamp = state.clock.now_ms();
    let made = tokio::task::spawn_blocking(move || {
        let path = dir.join(format!(".backup-{}-{stamp}.redb", std::process::id()));
        let result = store
            .backup_to(&path)
            .map_err(AdminError::from)
            .and_then(|events| {
                let file = std::fs::File::open(&path).map_err(AdminError::Backup)?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                Ok((file, size, events))
            });
        let _ = std::fs::remove_file(&path);
        result
    })
    .await;
    let (file, size, events) = made??;
    tracing::info!(
        events,
        bytes = size,
        millis = started.elapsed().as_millis() as u64,
        "backup taken"
    );
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, size.to_string()),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"hookinbox-backup.redb\"".to_owned(),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}
