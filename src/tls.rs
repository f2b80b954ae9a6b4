//! TLS for the ingest listener, for teams without a reverse proxy: a
//! certificate chain and a private key from PEM files, reloaded on SIGHUP
//! (a renewed certificate) without dropping open connections — each
//! connection keeps the configuration it was accepted with; new ones get
//! the new one.
//!
//! Owns reading and checking the files and the current server config;
//! knows nothing of HTTP or of the config file's syntax.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where the certificate chain and the key live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM, leaf certificate first, then intermediates.
    pub cert: PathBuf,
    /// PEM: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain {}: {source}", path.display())]
    Cert {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no PEM certificate", path.display())]
    NoCert { path: PathBuf },
    #[error("cannot read a private key from {}: {source}", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the certificate and key cannot be used together: {0}")]
    Invalid(#[from] rustls::Error),
}

impl TlsFiles {
    /// Reads both files and builds a server configuration (HTTP/1.1 over
    /// TLS 1.2 or 1.3, rustls' safe defaults).
    pub fn load(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|source| TlsError::Cert {
                path: self.cert.clone(),
                source,
            })?;
        if certs.is_empty() {
            return Err(TlsError::NoCert {
                path: self.cert.clone(),
            });
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|source| TlsError::Key {
            path: self.key.clone(),
            source,
        })?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The ingest listener's TLS, reloadable while it serves.
#[derive(Clone)]
pub struct Tls {
    files: Arc<TlsFiles>,
    current: Arc<RwLock<Arc<rustls::ServerConfig>>>,
}

impl Tls {
    pub fn new(files: TlsFiles) -> Result<Tls, TlsError> {
        let config = files.load()?;
        Ok(Tls {
            files: Arc::new(files),
            current: Arc::new(RwLock::new(config)),
        })
    }

    /// Reads the files again. On success new connections get the new
    /// certificate; on failure the one in use stays (and the error says why).
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = self.files.load()?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = config;
        Ok(())
    }

    /// An acceptor with the configuration in use now.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}
