//! TLS on the ingest listener, on the real binary: signed events over
//! HTTPS, and a renewed certificate picked up on SIGHUP while a connection
//! made with the old one keeps working.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

use crate::support::{
    BinaryServer, certificate, eventually, server_section, standard_headers, standard_source,
    write_config,
};

fn write_certificate(dir: &Path, leaf: &str, key: &str) {
    std::fs::write(dir.join("cert.pem"), leaf).unwrap();
    std::fs::write(dir.join("key.pem"), key).unwrap();
}

/// A TLS client that trusts only `ca_pem`.
fn connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile(ca_pem) {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

fn rustls_pemfile(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(addr: &str, ca_pem: &str) -> std::io::Result<Stream> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector(ca_pem).connect(name, tcp).await
}

/// Sends one signed event on `stream` (keep-alive) and returns the status.
async fn send_event(stream: &mut Stream, event_id: &str) -> u16 {
    let body = format!("{{\"type\":\"tls\",\"id\":\"{event_id}\"}}");
    let mut request = String::from("POST /in/demo HTTP/1.1\r\nhost: localhost\r\n");
    for (k, v) in standard_headers(event_id, body.as_bytes()) {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    // Read the head, then exactly the body, so the connection stays usable.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "connection closed"
        );
        answer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&answer).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    head[9..12].parse().unwrap()
}

#[tokio::test]
async fn ingest_over_tls_and_a_renewed_certificate_on_sighup_keeps_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let a = certificate();
    write_certificate(dir.path(), &a.leaf, &a.key);
    let config = write_config(
        dir.path(),
        &format!(
            "{}tls_cert_file = \"cert.pem\"\ntls_key_file = \"key.pem\"\n\n{}",
            server_section(&dir.path().join("data")),
            standard_source("demo")
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let addr = server.base.trim_start_matches("http://").to_owned();

    let mut old = connect(&addr, &a.ca).await.unwrap();
    assert_eq!(send_event(&mut old, "tls_1").await, 200);
    // Plain HTTP to a TLS port gets no answer that looks like success.
    let plain = crate::support::client()
        .post(format!("http://{addr}/in/demo"))
        .body("{}")
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // Renew: a new certificate from another CA, then SIGHUP.
    let b = certificate();
    write_certificate(dir.path(), &b.leaf, &b.key);
    server.signal(libc::SIGHUP);
    eventually(
        "the log says the certificate was reloaded",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || match server.log_text() {
            log if log.contains("reloaded the ingest TLS certificate") => Ok(()),
            log => Err(log),
        },
    )
    .await;
    // The connection made before the reload keeps working.
    assert_eq!(send_event(&mut old, "tls_2").await, 200);
    // New connections get the new certificate.
    assert!(
        connect(&addr, &a.ca).await.is_err(),
        "still the old certificate"
    );
    let mut new = connect(&addr, &b.ca).await.unwrap();
    assert_eq!(send_event(&mut new, "tls_3").await, 200);

    // A broken renewal fails the config's checks: the reload is refused
    // whole and the certificate in use stays.
    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    server.signal(libc::SIGHUP);
    eventually(
        "the log says the broken renewal cannot be loaded",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || match server.log_text() {
            log if log.contains("reload refused") && log.contains("key.pem") => Ok(()),
            log => Err(log),
        },
    )
    .await;
    let mut after = connect(&addr, &b.ca).await.unwrap();
    assert_eq!(send_event(&mut after, "tls_4").await, 200);
    assert_eq!(server.terminate().code(), Some(0), "{}", server.log_text());
}

#[test]
fn a_certificate_without_its_key_or_a_bad_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = certificate();
    write_certificate(dir.path(), &c.leaf, &c.key);
    let check = |server_lines: &str| {
        let config = write_config(
            dir.path(),
            &format!(
                "[server]\ndata_dir = \"data\"\n{server_lines}\n{}",
                standard_source("demo")
            ),
        );
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(["config", "check", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = check("tls_cert_file = \"cert.pem\"");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("server.tls_key_file"), "{err}");
    let (code, err) = check("tls_cert_file = \"cert.pem\"\ntls_key_file = \"missing.pem\"");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("missing.pem"), "{err}");
    let (code, err) = check("tls_cert_file = \"cert.pem\"\ntls_key_file = \"key.pem\"");
    assert_eq!(code, Some(0), "{err}");
}
