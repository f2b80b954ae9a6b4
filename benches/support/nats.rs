//! `nats-server -js` nodes on loopback for the replication bench: one, or a
//! cluster of three (a stream replicated three times, R3). Killed when
//! dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};

use crate::support::free_port;

pub struct Nats {
    children: Vec<Child>,
    /// Every node's client URL, comma-separated.
    pub urls: String,
    _dir: tempfile::TempDir,
}

impl Nats {
    /// Starts `nodes` (1 or 3) and returns once JetStream takes an R`nodes`
    /// stream with a leader; panics after 30 s.
    pub async fn start(nodes: usize) -> Nats {
        let dir = tempfile::tempdir().unwrap();
        let clients: Vec<u16> = (0..nodes).map(|_| free_port().port()).collect();
        let routes: Vec<u16> = (0..nodes).map(|_| free_port().port()).collect();
        let mut children = Vec::new();
        for i in 0..nodes {
            let home = dir.path().join(format!("n{i}"));
            std::fs::create_dir_all(&home).unwrap();
            let cluster = if nodes > 1 {
                let others: String = routes
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .map(|(_, port)| format!("    nats-route://127.0.0.1:{port}\n"))
                    .collect();
                format!(
                    "cluster {{\n  name: bench\n  listen: 127.0.0.1:{}\n  routes: [\n{others}  ]\n}}\n",
                    routes[i]
                )
            } else {
                String::new()
            };
            let config = home.join("nats.conf");
            std::fs::write(
                &config,
                format!(
                    "server_name: n{i}\nlisten: 127.0.0.1:{}\njetstream {{\n  store_dir: \"{}\"\n}}\n{cluster}",
                    clients[i],
                    home.join("store").display()
                ),
            )
            .unwrap();
            children.push(
                Command::new("nats-server")
                    .arg("-c")
                    .arg(&config)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("nats-server (apt install nats-server)"),
            );
        }
        let urls = clients
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let nats = Nats {
            children,
            urls,
            _dir: dir,
        };
        nats.wait_ready(nodes).await;
        nats
    }

    async fn wait_ready(&self, nodes: usize) {
        let started = Instant::now();
        let ready = async || -> Result<(), String> {
            let servers: Vec<&str> = self.urls.split(',').collect();
            let client = async_nats::connect(servers.as_slice())
                .await
                .map_err(|e| e.to_string())?;
            let mut js = jetstream::new(client);
            js.set_timeout(Duration::from_secs(1));
            let mut s = js
                .get_or_create_stream(stream::Config {
                    name: "BENCH_READY".into(),
                    subjects: vec!["bench.ready".into()],
                    num_replicas: nodes,
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            let info = s.info().await.map_err(|e| e.to_string())?;
            if nodes > 1
                && info
                    .cluster
                    .as_ref()
                    .and_then(|c| c.leader.as_ref())
                    .is_none()
            {
                return Err("no leader yet".into());
            }
            js.delete_stream("BENCH_READY")
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        };
        loop {
            match ready().await {
                Ok(()) => return,
                Err(e) => assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "NATS not ready: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
