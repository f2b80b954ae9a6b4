//! Real `nats-server` processes on loopback for the integration tests: one
//! JetStream node (`NatsServer`), or a three-node JetStream cluster
//! (`NatsCluster`) whose nodes a test can kill, restart, pause and resume
//! one by one. Each owns its processes and kills them when dropped, also
//! when a test panics. Needs Debian's `nats-server` (2.9) on the PATH.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream::{self, stream};

use crate::support::{eventually_sync, free_port};

/// `nats-server -js` on a loopback port with its store in `dir`: one node,
/// stopped and started again on the same port and store.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl NatsServer {
    /// Starts it on a free port; returns once it accepts connections.
    pub fn start(dir: &Path) -> NatsServer {
        let mut server = NatsServer {
            child: None,
            port: free_port(),
            dir: dir.to_owned(),
        };
        server.restart();
        server
    }

    /// Starts it (again) on the same port and store; returns once it
    /// accepts connections.
    pub fn restart(&mut self) {
        let child = Command::new("nats-server")
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server runs (Debian: apt-get install nats-server)");
        self.child = Some(child);
        let port = self.port;
        eventually_sync(
            "nats-server listens",
            Duration::from_secs(20),
            Duration::from_millis(20),
            || {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(drop)
                    .map_err(|e| format!("connect to port {port}: {e}"))
            },
        );
    }

    /// Kills it (SIGKILL) and waits for it to exit; nothing if it is down.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its client URL, `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// A JetStream context, and the stream `HOOKS` on `webhooks.>` (file
    /// storage, the default two-minute duplicate window).
    pub async fn stream(&self) -> (jetstream::Context, stream::Stream) {
        let client = async_nats::connect(self.url()).await.unwrap();
        let js = jetstream::new(client);
        let stream = js
            .get_or_create_stream(stream::Config {
                name: "HOOKS".into(),
                subjects: vec!["webhooks.>".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        (js, stream)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
