//! `server.admin_socket`: binding a Unix domain socket with the mode and
//! group that say who may connect, taking over a stale socket file a
//! crashed run left, and removing the file when serving ends.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;

use tokio::net::UnixListener;

use crate::config::AdminSocket;

/// Why the socket could not be made; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("server.admin_socket {path}: another process accepts connections on it")]
    InUse { path: PathBuf },
    #[error(
        "server.admin_socket {path}: a file that is not a socket is there; remove it or name another path"
    )]
    NotASocket { path: PathBuf },
    #[error("server.admin_socket_group {group:?}: no such group")]
    NoSuchGroup { group: String },
    #[error("server.admin_socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A bound socket, and the file that goes when it is dropped.
pub struct BoundSocket {
    pub listener: UnixListener,
    pub file: SocketFile,
}

/// Removes the socket file on drop: what a client finds at the path after
/// hookinbox stopped is nothing, not a socket nobody answers.
pub struct SocketFile {
    path: PathBuf,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `socket.path` with `socket.mode` and `socket.group`. A socket file
/// already there is taken over when nothing accepts on it (a run that was
/// killed left it); one that answers is another process's, and refused.
pub fn bind(socket: &AdminSocket) -> Result<BoundSocket, SocketError> {
    let path = &socket.path;
    let io_err = |source| SocketError::Io {
        path: path.clone(),
        source,
    };
    let gid = socket.group.as_deref().map(group_id).transpose()?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse { path: path.clone() });
            }
            std::fs::remove_file(path).map_err(io_err)?;
        }
        Ok(_) => return Err(SocketError::NotASocket { path: path.clone() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    let listener = UnixListener::bind(path).map_err(io_err)?;
    let file = SocketFile { path: path.clone() };
    // The mode and group are set before the first accept: a connection
    // attempted in between is refused by the umask's bits at worst.
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(socket.mode)).map_err(io_err)?;
    Ok(BoundSocket { listener, file })
}

/// The id of the group named `name` (through NSS, as `ls -l` finds it).
fn group_id(name: &str) -> Result<u32, SocketError> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        _ => Err(SocketError::NoSuchGroup {
            group: name.to_owned(),
        }),
    }
}
