//! The keys bench over HTTP, as an app meets them: the release binary as a
//! child process with one `[[keys.client]]`, and `clients` keep-alive
//! connections on loopback TCP or on its `admin_socket` (a Unix domain
//! socket), each sending `POST /api/keys/{key}/claim` then `…/complete`
//! with the client's token, one request at a time (raw HTTP/1.1, as the
//! Redis side speaks raw RESP).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::drive::Cost;
use super::support::free_port;
use super::{Args, Measured, result, run_clients};

pub const TOKEN: &str = "bench-keys-client-token-0123456789";
const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";

pub struct Server {
    child: Child,
    admin: SocketAddr,
    socket: std::path::PathBuf,
    pid: String,
}

/// How the bench's clients reach the admin API.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `admin_listen`, loopback TCP.
    Tcp,
    /// `admin_socket`.
    Unix,
}

impl Server {
    /// Starts `bin` on `data` (configs in `dir`) and waits for `/readyz`.
    pub fn start(bin: &Path, dir: &Path, data: &Path) -> Server {
        let (ingest, admin) = (free_port(), free_port());
        let socket = dir.join("admin.sock");
        std::fs::write(dir.join("keys.token"), TOKEN).unwrap();
        std::fs::write(dir.join("admin.token"), ADMIN_TOKEN).unwrap();
        let config = dir.join("hookinbox.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"{ingest}\"\nadmin_listen = \"{admin}\"\ndata_dir = \"{}\"\n\
                 admin_socket = \"{}\"\n[log]\nlevel = \"warn\"\n[admin]\ntoken_file = \"{}\"\n\
                 [[keys.client]]\nname = \"{}\"\ntoken_file = \"{}\"\n",
                data.display(),
                socket.display(),
                dir.join("admin.token").display(),
                super::NAMESPACE,
                dir.join("keys.token").display(),
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hookinbox");
        let server = Server {
            pid: child.id().to_string(),
            child,
            admin,
            socket,
        };
        let started = Instant::now();
        while !ready(admin) {
            assert!(started.elapsed() < Duration::from_secs(600), "not ready");
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }

    /// Seconds of CPU the whole process has used (user + system).
    fn cpu_s(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap();
        // After the command's closing parenthesis: fields 3.., utime and
        // stime are the 14th and 15th of the line.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / 100.0
    }

    /// The admin listener's base URL, as an app's keys helper is given it.
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }

    pub fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap();
    }
}

/// Whether `/readyz` answers 200.
fn ready(admin: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(admin) else {
        return false;
    };
    let mut answer = String::new();
    write!(
        s,
        "GET /readyz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

/// A connection's byte stream: TCP or Unix.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One keep-alive connection to the admin API.
struct Conn {
    stream: BufReader<Box<dyn Io>>,
    host: String,
}

impl Conn {
    async fn open(server: &Server, transport: Transport) -> Conn {
        let stream: Box<dyn Io> = match transport {
            Transport::Tcp => {
                let stream = TcpStream::connect(server.admin).await.unwrap();
                stream.set_nodelay(true).unwrap();
                Box::new(stream)
            }
            Transport::Unix => Box::new(
                tokio::net::UnixStream::connect(&server.socket)
                    .await
                    .unwrap(),
            ),
        };
        Conn {
            stream: BufReader::new(stream),
            host: server.admin.to_string(),
        }
    }

    /// POSTs `body` to `path`; returns the status and the answer's body.
    async fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.exchange(&request).await
    }

    /// GETs `path` with `token`; returns the status and the answer's body.
    async fn get(&mut self, path: &str, token: &str) -> (u16, String) {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
            self.host,
        );
        self.exchange(&request).await
    }

    /// Sends one request; reads its answer's status and body.
    async fn exchange(&mut self, request: &str) -> (u16, String) {
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .unwrap();
        let mut line = String::new();
        self.stream.read_line(&mut line).await.unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut length = 0;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await.unwrap();
        (status, String::from_utf8(body).unwrap())
    }
}

/// Claim then complete `key` over `conn`, as an app does.
async fn claim_complete(conn: &mut Conn, key: &str, i: u64) {
    let (status, body) = conn
        .post(
            &format!("/api/keys/{key}/claim"),
            r#"{"lease":"30s","ttl":"30d"}"#,
        )
        .await;
    assert_eq!(status, 201, "claim of a fresh key {key}: {body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let token = answer["token"].as_u64().expect("a token");
    let (status, body) = conn
        .post(
            &format!("/api/keys/{key}/complete"),
            &format!(r#"{{"token":{token},"result":{}}}"#, result(i)),
        )
        .await;
    assert_eq!(status, 200, "complete of {key}: {body}");
}

/// Two reads of `key` (`GET /api/keys/{key}`), a key a run before wrote:
/// the same path as a claim and a complete (HTTP, the token, JSON, the
/// key's index and row), without the writer.
async fn read_twice(conn: &mut Conn, key: &str) {
    for _ in 0..2 {
        let (status, body) = conn.get(&format!("/api/keys/{key}"), TOKEN).await;
        assert_eq!(status, 200, "read of {key}: {body}");
    }
}

/// Two `GET /api/whoami` with the admin token: the admin listener's path
/// (HTTP, the token check, a JSON answer) with nothing behind it.
async fn whoami_twice(conn: &mut Conn) {
    for _ in 0..2 {
        let (status, body) = conn.get("/api/whoami", ADMIN_TOKEN).await;
        assert_eq!(status, 200, "whoami: {body}");
    }
}

/// What each client does for one "pair" of a run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Claim then complete a fresh key: two durable changes.
    ClaimComplete,
    /// Read a key twice: two requests that reach no writer.
    ReadTwice,
    /// Ask who the token is, twice: two requests that reach no store.
    WhoamiTwice,
}

/// `clients` connections over `transport`, each doing `work` on its own
/// keys of `run`, against `server`.
pub async fn pairs(
    server: &Server,
    args: &Args,
    run: u64,
    transport: Transport,
    work: Work,
) -> Measured {
    let (cpu_before, disk_before) = (server.cpu_s(), Cost::of(&server.pid).disk_bytes);
    let mut conns = Vec::new();
    for _ in 0..args.clients {
        conns.push(Conn::open(server, transport).await);
    }
    let run = run_clients(
        args,
        run,
        conns,
        move |mut conn: Conn, key: String, i| async move {
            match work {
                Work::ClaimComplete => claim_complete(&mut conn, &key, i).await,
                Work::ReadTwice => read_twice(&mut conn, &key).await,
                Work::WhoamiTwice => whoami_twice(&mut conn).await,
            }
            conn
        },
    )
    .await;
    let n = run.pairs.max(1) as f64;
    Measured {
        cpu_us: (server.cpu_s() - cpu_before) * 1e6 / n,
        disk_b: Cost::of(&server.pid).disk_bytes.saturating_sub(disk_before) as f64 / n,
        run,
    }
}
