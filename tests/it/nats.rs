//! Real `nats-server` processes on loopback for the integration tests: one
//! JetStream node (`NatsServer`), or a three-node JetStream cluster
//! (`NatsCluster`) whose nodes a test can kill, restart, pause and resume
//! one by one. Each owns its processes and kills them when dropped, also
//! when a test panics. Needs Debian's `nats-server` (2.9) on the PATH.
//! The tests at the bottom check that the cluster does what the harness
//! promises to the tests that use it: an R3 stream acks with one node down,
//! refuses without a quorum and loses nothing, and a client leaves a frozen
//! node.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::{self, ErrorCode, consumer, stream};
use futures_util::StreamExt;

use crate::support::{eventually, eventually_sync, free_port};

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

/// How many nodes a [`NatsCluster`] runs: three, the smallest cluster that
/// keeps a quorum (two) with one node down.
const NODES: usize = 3;

/// How long [`NatsCluster::start`] waits for JetStream to accept an R3
/// stream. 20 s: NATS.md measured a meta leader 0.1–0.5 s after the nodes
/// listen, and the tests here see the cluster ready 1.2–2.7 s after the
/// spawn; the rest is headroom for a loaded two-core machine.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// Three `nats-server -js` nodes clustered by routes on loopback, each with
/// its own name, client port, cluster port and JetStream store, written to a
/// config file so that a node restarts as itself. A test kills, restarts,
/// pauses and resumes nodes by index (0, 1, 2); dropping the cluster kills
/// every node still running and removes their stores.
pub struct NatsCluster {
    nodes: Vec<Node>,
    /// Every node's config file and store. Removed after the nodes are
    /// killed: fields drop after [`Drop::drop`] has run.
    _dir: tempfile::TempDir,
}

/// One node of a [`NatsCluster`]; `child` is `None` while it is down.
struct Node {
    name: String,
    port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl NatsCluster {
    /// Starts three nodes in a new temp dir under `dir` and returns once
    /// JetStream accepts an R3 stream and elects its leader (a throwaway
    /// stream, deleted again). Panics if that takes longer than 20 s.
    pub async fn start(dir: &Path) -> NatsCluster {
        let root = tempfile::Builder::new()
            .prefix("nats-cluster-")
            .tempdir_in(dir)
            .unwrap();
        let ports = free_ports(2 * NODES);
        let (client_ports, cluster_ports) = ports.split_at(NODES);
        let nodes = (0..NODES)
            .map(|i| {
                let name = format!("n{i}");
                let home = root.path().join(&name);
                std::fs::create_dir_all(&home).unwrap();
                let routes: String = cluster_ports
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .map(|(_, port)| format!("    nats-route://127.0.0.1:{port}\n"))
                    .collect();
                let text = format!(
                    "server_name: {name}\n\
                     listen: 127.0.0.1:{client}\n\
                     jetstream {{\n  store_dir: \"{store}\"\n}}\n\
                     cluster {{\n  name: hookinbox-test\n  listen: 127.0.0.1:{cluster}\n  \
                     routes: [\n{routes}  ]\n}}\n",
                    client = client_ports[i],
                    cluster = cluster_ports[i],
                    store = home.join("store").display(),
                );
                let config = home.join("nats.conf");
                std::fs::write(&config, text).unwrap();
                Node {
                    name,
                    port: client_ports[i],
                    config,
                    log: home.join("nats.log"),
                    child: None,
                }
            })
            .collect();
        // Owned by the cluster before the first spawn, so that a panic from
        // here on kills what was started.
        let mut cluster = NatsCluster { nodes, _dir: root };
        for node in &mut cluster.nodes {
            node.spawn();
        }
        for node in &mut cluster.nodes {
            node.wait_until_listening();
        }
        cluster.wait_for_jetstream().await;
        cluster
    }

    /// Creates a throwaway R3 stream until JetStream accepts it and the
    /// stream has a leader (a publish to it can be acked), then deletes it.
    async fn wait_for_jetstream(&self) {
        let mut js = jetstream::new(connect(&self.urls()).await);
        // 1 s: the first requests go unanswered until the meta leader is
        // elected; a short timeout sends the next one sooner.
        js.set_timeout(Duration::from_secs(1));
        let window = crate::support::Window::of(READY_WITHIN);
        eventually(
            "JetStream accepts an R3 stream and elects its leader",
            READY_WITHIN,
            Duration::from_millis(50),
            async || {
                // An earlier attempt that timed out may have created it:
                // then its info answers, perhaps before it has a leader.
                let mut stream = js
                    .get_or_create_stream(stream::Config {
                        name: "HARNESS_READY".into(),
                        subjects: vec!["harness.ready".into()],
                        num_replicas: NODES,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                let info = stream.info().await.map_err(|e| e.to_string())?;
                match info.cluster.as_ref().and_then(|c| c.leader.as_ref()) {
                    Some(_) => Ok(()),
                    None => Err(format!("no leader yet: {:?}", info.cluster)),
                }
            },
        )
        .await;
        eventually(
            "the throwaway stream is deleted",
            window.left(),
            Duration::from_millis(50),
            async || match js.delete_stream("HARNESS_READY").await {
                Ok(_) => Ok(()),
                // An earlier attempt that timed out deleted it.
                Err(e)
                    if matches!(e.kind(), GetStreamErrorKind::JetStream(ref j)
                        if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
                {
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
        )
        .await;
    }

    /// Every node's client URL, comma-separated (`nats://127.0.0.1:P1,…`):
    /// what [`connect`] takes to fail over between them.
    pub fn urls(&self) -> String {
        let urls: Vec<String> = (0..NODES).map(|i| self.url(i)).collect();
        urls.join(",")
    }

    /// Node `i`'s client URL, `nats://127.0.0.1:PORT`.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// Node `i`'s `server_name`, as JetStream reports it (a stream's
    /// `cluster.leader`, for one).
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// The index of the node named `server_name`.
    pub fn index_of(&self, server_name: &str) -> usize {
        self.nodes
            .iter()
            .position(|node| node.name == server_name)
            .unwrap_or_else(|| panic!("no node is named {server_name:?}"))
    }

    /// Node `i`'s process id. Panics if it is down.
    pub fn pid(&self, i: usize) -> u32 {
        self.nodes[i]
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("node {i} is down"))
            .id()
    }

    /// Kills node `i` with SIGKILL (a crash: nothing flushed, no goodbye to
    /// its peers) and returns once it has exited. Panics if it is down.
    pub fn kill(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_some(), "node {i} is already down");
        self.nodes[i].stop();
    }

    /// Starts node `i` again as itself (same config, name, ports and store)
    /// and returns once it accepts connections; it may still be catching
    /// up with its peers. Panics if it is running.
    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {i} is still running");
        self.nodes[i].spawn();
        self.nodes[i].wait_until_listening();
    }

    /// Freezes node `i` with SIGSTOP and returns once it is stopped: its
    /// sockets stay open but it answers nothing (a hung or partitioned
    /// node, unlike a killed one, whose peers see the connection close).
    pub fn pause(&self, i: usize) {
        let pid = self.pid(i);
        signal(pid, libc::SIGSTOP);
        eventually_sync(
            &format!("node {i} is stopped"),
            Duration::from_secs(5),
            Duration::from_millis(5),
            || match process_state(pid) {
                'T' => Ok(()),
                state => Err(format!("state {state}")),
            },
        );
    }

    /// Wakes node `i` with SIGCONT and returns once it runs again.
    pub fn resume(&self, i: usize) {
        let pid = self.pid(i);
        signal(pid, libc::SIGCONT);
        eventually_sync(
            &format!("node {i} runs again"),
            Duration::from_secs(5),
            Duration::from_millis(5),
            || match process_state(pid) {
                'T' => Err("still stopped".to_owned()),
                _ => Ok(()),
            },
        );
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
    }
}

impl Node {
    /// Runs `nats-server -c CONFIG`, its log (stderr) appended to `log`:
    /// read back if it exits before it listens.
    fn spawn(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server runs (Debian: apt-get install nats-server)");
        self.child = Some(child);
    }

    /// Returns once the node accepts connections; panics with its log if
    /// it exits first (a bad config, a port taken in between).
    fn wait_until_listening(&mut self) {
        let port = self.port;
        let child = self.child.as_mut().expect("the node was spawned");
        let log = &self.log;
        eventually_sync(
            &format!("{} listens", self.name),
            Duration::from_secs(20),
            Duration::from_millis(20),
            || {
                if let Some(status) = child.try_wait().unwrap() {
                    let text = std::fs::read_to_string(log).unwrap_or_default();
                    panic!("nats-server exited ({status}) before it listened:\n{text}");
                }
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(drop)
                    .map_err(|e| format!("connect to port {port}: {e}"))
            },
        );
    }

    /// SIGKILL, then waits for the exit; nothing if it is down. SIGKILL
    /// also ends a paused (SIGSTOPped) process.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `n` distinct loopback ports, free a moment ago (as [`free_port`]): all
/// are bound at once, so that no two are the same.
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we have not yet waited for, so
    // the pid cannot have been reused.
    let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(sent, 0, "kill({pid}, {signal}) failed");
}

/// The state letter in `/proc/PID/stat`: `T` while stopped by a signal.
fn process_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name, in parentheses, may itself hold spaces and `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .unwrap_or_else(|| panic!("no state in {stat:?}"))
}

/// A client for `urls` (one URL or several, comma-separated) that leaves a
/// dead or frozen server quickly and never gives up reconnecting.
/// 1 s pings: a client stays on a paused server until a ping goes
/// unanswered, two minutes with the default interval (NATS.md). 2 s to
/// connect: a frozen server accepts TCP connections but never answers.
pub async fn connect(urls: &str) -> async_nats::Client {
    let servers: Vec<&str> = urls.split(',').collect();
    async_nats::ConnectOptions::new()
        .ping_interval(Duration::from_secs(1))
        .connection_timeout(Duration::from_secs(2))
        .max_reconnects(None)
        .connect(servers.as_slice())
        .await
        .unwrap_or_else(|e| panic!("connect to {urls}: {e}"))
}

/// A JetStream context on `cluster` through [`connect`]. 2 s for an API
/// answer or a publish ack: a publish that goes unanswered (no quorum, a
/// frozen leader) fails in 2 s and is tried again, rather than after the
/// default 5 s.
async fn jetstream_on(cluster: &NatsCluster) -> jetstream::Context {
    let mut js = jetstream::new(connect(&cluster.urls()).await);
    js.set_timeout(Duration::from_secs(2));
    js
}

/// Creates the R3 stream `name` on `subject`, retried for 10 s: JetStream
/// can answer 503 (code 10008) for a while after a node comes back.
async fn create_r3_stream(js: &jetstream::Context, name: &str, subject: &str) {
    eventually(
        &format!("the R3 stream {name} is created"),
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || {
            js.get_or_create_stream(stream::Config {
                name: name.into(),
                subjects: vec![subject.into()],
                num_replicas: NODES,
                ..Default::default()
            })
            .await
            .map(drop)
            .map_err(|e| e.to_string())
        },
    )
    .await
}

/// One publish of the message `id` (its `Nats-Msg-Id` and its payload):
/// the stream's ack, or why there is none (an error, or no ack within the
/// context's timeout).
async fn publish_once(
    js: &jetstream::Context,
    subject: &str,
    id: &str,
) -> Result<jetstream::publish::PublishAck, String> {
    let message = jetstream::message::PublishMessage::build()
        .payload(id.to_owned().into())
        .message_id(id);
    let publish = async {
        let ack = js.send_publish(subject.to_owned(), message).await?;
        Ok::<_, async_nats::Error>(ack.await?)
    };
    // The context's 2 s bounds the ack; this bounds the rest.
    match tokio::time::timeout(Duration::from_secs(5), publish).await {
        Ok(Ok(ack)) => Ok(ack),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 5 s".to_owned()),
    }
}

/// Publishes the message `id` until the stream acks it, within `within`,
/// and returns how long that took. A publish that timed out may still have
/// landed: its retry, under the same `Nats-Msg-Id`, is then answered as a
/// duplicate, so the stream holds the message once either way.
async fn publish_until_acked(
    js: &jetstream::Context,
    subject: &str,
    id: &str,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    eventually(
        &format!("the stream acks {id}"),
        within,
        Duration::from_millis(50),
        async || publish_once(js, subject, id).await,
    )
    .await;
    started.elapsed()
}

/// The server name of the stream's leader.
async fn stream_leader(js: &jetstream::Context, name: &str) -> String {
    eventually(
        &format!("{name} has a leader"),
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || {
            let mut stream = js.get_stream(name).await.map_err(|e| e.to_string())?;
            let info = stream.info().await.map_err(|e| e.to_string())?;
            info.cluster
                .as_ref()
                .and_then(|c| c.leader.clone())
                .ok_or_else(|| format!("no leader: {:?}", info.cluster))
        },
    )
    .await
}

/// The `Nats-Msg-Id` of every message in the stream, sorted, read through
/// an ephemeral consumer; retried for 15 s until `expected` are read.
async fn message_ids(js: &jetstream::Context, name: &str, expected: usize) -> Vec<String> {
    eventually(
        &format!("{expected} messages are read back from {name}"),
        Duration::from_secs(15),
        Duration::from_millis(100),
        async || {
            let stream = js.get_stream(name).await.map_err(|e| e.to_string())?;
            let consumer: consumer::PullConsumer = stream
                .create_consumer(consumer::pull::Config {
                    ack_policy: consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            let mut messages = consumer
                .fetch()
                .max_messages(expected + 1)
                .expires(Duration::from_secs(1))
                .messages()
                .await
                .map_err(|e| e.to_string())?;
            let mut ids = Vec::new();
            while let Some(message) = messages.next().await {
                let message = message.map_err(|e| e.to_string())?;
                ids.push(String::from_utf8(message.payload.to_vec()).unwrap());
            }
            if ids.len() < expected {
                return Err(format!("{} of {expected}", ids.len()));
            }
            ids.sort();
            Ok(ids)
        },
    )
    .await
}

/// Whether the stream's group counts `server_name` as up to date: its
/// leader, or a replica marked current.
async fn is_current(
    js: &jetstream::Context,
    name: &str,
    server_name: &str,
) -> Result<bool, String> {
    let mut stream = js.get_stream(name).await.map_err(|e| e.to_string())?;
    let info = stream.info().await.map_err(|e| e.to_string())?;
    let group = info.cluster.as_ref().ok_or("no cluster info")?;
    Ok(group.leader.as_deref() == Some(server_name)
        || group
            .replicas
            .iter()
            .any(|peer| peer.name == server_name && peer.current))
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[tokio::test]
async fn a_three_node_cluster_keeps_an_r3_stream_acking_with_one_node_down() {
    const BEFORE: usize = 50;
    const AFTER: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut cluster = NatsCluster::start(dir.path()).await;
    let ready = started.elapsed();
    let js = jetstream_on(&cluster).await;
    create_r3_stream(&js, "ONE_DOWN", "one_down").await;
    let mut acked = Vec::new();
    for i in 0..BEFORE {
        let id = format!("before-{i:03}");
        publish_until_acked(&js, "one_down", &id, Duration::from_secs(5)).await;
        acked.push(id);
    }

    // The stream leader, the worst node to lose: its group must elect
    // another before anything is acked.
    let leader = stream_leader(&js, "ONE_DOWN").await;
    cluster.kill(cluster.index_of(&leader));
    let failover = publish_until_acked(&js, "one_down", "after-000", Duration::from_secs(15)).await;
    acked.push("after-000".to_owned());
    for i in 1..AFTER {
        let id = format!("after-{i:03}");
        publish_until_acked(&js, "one_down", &id, Duration::from_secs(5)).await;
        acked.push(id);
    }
    assert_ne!(stream_leader(&js, "ONE_DOWN").await, leader);
    assert_eq!(
        message_ids(&js, "ONE_DOWN", acked.len()).await,
        sorted(acked),
        "the stream holds every acked message, once"
    );
    eprintln!(
        "nats: cluster ready {ready:?} after spawn; acked again {failover:?} after \
         killing the stream leader {leader}"
    );
}

#[tokio::test]
async fn without_quorum_publishes_fail_and_acked_messages_survive_the_return() {
    const BEFORE: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = NatsCluster::start(dir.path()).await;
    let js = jetstream_on(&cluster).await;
    create_r3_stream(&js, "NO_QUORUM", "no_quorum").await;
    let mut acked = Vec::new();
    for i in 0..BEFORE {
        let id = format!("before-{i:03}");
        publish_until_acked(&js, "no_quorum", &id, Duration::from_secs(5)).await;
        acked.push(id);
    }

    // The leader and one more: the one node left is a follower alone.
    let leader = cluster.index_of(&stream_leader(&js, "NO_QUORUM").await);
    let other = (leader + 1) % NODES;
    cluster.kill(leader);
    cluster.kill(other);
    let refused = publish_once(&js, "no_quorum", "during").await;
    assert!(refused.is_err(), "acked without a quorum: {refused:?}");

    let returning = Instant::now();
    cluster.restart(leader);
    cluster.restart(other);
    // The same message again: it lands once, whether or not the refused
    // attempt was kept somewhere and committed later.
    publish_until_acked(&js, "no_quorum", "during", Duration::from_secs(30)).await;
    let recovery = returning.elapsed();
    acked.push("during".to_owned());
    assert_eq!(
        message_ids(&js, "NO_QUORUM", acked.len()).await,
        sorted(acked),
        "the stream holds every acked message, once"
    );
    eprintln!(
        "nats: without quorum the publish failed with {:?}; acked again {recovery:?} \
         after the two nodes were restarted",
        refused.unwrap_err()
    );
}

#[tokio::test]
async fn a_client_leaves_a_paused_node_and_the_node_catches_up_when_resumed() {
    const BEFORE: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let cluster = NatsCluster::start(dir.path()).await;
    let client = connect(&cluster.urls()).await;
    let mut js = jetstream::new(client.clone());
    js.set_timeout(Duration::from_secs(2));
    create_r3_stream(&js, "PAUSED", "paused").await;
    let mut acked = Vec::new();
    for i in 0..BEFORE {
        let id = format!("before-{i:03}");
        publish_until_acked(&js, "paused", &id, Duration::from_secs(5)).await;
        acked.push(id);
    }

    // The node this client talks to freezes: its socket stays open, so
    // only the unanswered pings tell the client to go elsewhere.
    let frozen = cluster.index_of(&client.server_info().server_name);
    let was_leader = stream_leader(&js, "PAUSED").await == cluster.name(frozen);
    cluster.pause(frozen);
    let moved = publish_until_acked(&js, "paused", "during", Duration::from_secs(20)).await;
    acked.push("during".to_owned());
    assert_ne!(client.server_info().server_name, cluster.name(frozen));
    // The stream's group sees the frozen node fall behind.
    eventually(
        &format!("{} is no longer a current replica", cluster.name(frozen)),
        Duration::from_secs(10),
        Duration::from_millis(100),
        async || match is_current(&js, "PAUSED", cluster.name(frozen)).await? {
            true => Err("current".to_owned()),
            false => Ok(()),
        },
    )
    .await;

    cluster.resume(frozen);
    let resumed = Instant::now();
    eventually(
        &format!("{} is a current replica again", cluster.name(frozen)),
        Duration::from_secs(20),
        Duration::from_millis(100),
        async || match is_current(&js, "PAUSED", cluster.name(frozen)).await? {
            true => Ok(()),
            false => Err("not current".to_owned()),
        },
    )
    .await;
    let caught_up = resumed.elapsed();
    assert_eq!(
        message_ids(&js, "PAUSED", acked.len()).await,
        sorted(acked),
        "the stream holds every acked message, once"
    );
    eprintln!(
        "nats: acked again {moved:?} after pausing the client's node (the stream \
         leader: {was_leader}); the node was current again {caught_up:?} after it resumed"
    );
}
