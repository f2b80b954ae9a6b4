//! Replication drills against real `nats-server` processes and the real
//! binary: NATS nodes killed under load (one, then a quorum), a split brain
//! (the primary frozen past its lease, then woken), an R1 stream whose
//! primary is lost before its standby exists, and nodes refused at start.
//! Each prints the figures it measured (takeover time, 503 window, counts).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookinbox::clock::Clock;
use tokio_util::sync::CancellationToken;

use crate::nats::{NatsCluster, NatsServer};
use crate::support::{
    BinaryServer, REPLICATION_ADMIN, TestServer, eventually, read_all, server_section,
    standard_headers, standard_source, write_config,
};

const STREAM: &str = "INBOX";

/// A full config: `[server]` on `dir/data`, `[replication]` and the
/// source `shop`.
fn node_config(
    dir: &Path,
    data: &str,
    urls: &str,
    replicas: usize,
    role: &str,
    node: &str,
    lease: &str,
) -> String {
    format!(
        "{}{REPLICATION_ADMIN}[replication]\nurl = \"{urls}\"\nstream = \"{STREAM}\"\nreplicas = {replicas}\n\
         role = \"{role}\"\nnode = \"{node}\"\nlease = \"{lease}\"\n\n{}",
        server_section(&dir.join(data)),
        standard_source("shop")
    )
}

/// The plain body of event `id`.
fn plain_body(id: &str, _n: usize) -> Vec<u8> {
    format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes()
}

/// One request of a sender and what came of it.
#[derive(Clone, Debug)]
struct Sent {
    event_id: String,
    body: Vec<u8>,
    sent: Instant,
    done: Instant,
    /// `None`: no answer (connection refused or broken, timed out).
    status: Option<u16>,
    /// The stored id of a 2xx.
    stored: Option<String>,
}

impl Sent {
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Signed events from a few senders to one URL, each sender bounded in
/// count and time, every request recorded.
struct Load {
    url: Arc<Mutex<String>>,
    stop: CancellationToken,
    log: Arc<Mutex<Vec<Sent>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(
        url: String,
        senders: usize,
        prefix: &str,
        max_each: usize,
        within: Duration,
        timeout: Duration,
        body: fn(&str, usize) -> Vec<u8>,
    ) -> Load {
        let stop = CancellationToken::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let url = Arc::new(Mutex::new(url));
        let sending = crate::support::Window::of(within);
        let tasks = (0..senders)
            .map(|s| {
                let (stop, log, url) = (stop.clone(), log.clone(), url.clone());
                let prefix = prefix.to_owned();
                tokio::spawn(async move {
                    let http = hookinbox::send::http_client(timeout).unwrap();
                    for i in 0..max_each {
                        if stop.is_cancelled() || sending.is_over() {
                            break;
                        }
                        let event_id = format!("{prefix}_{s}_{i}");
                        let body = body(&event_id, i);
                        let target = url.lock().unwrap().clone();
                        let record = send_event(&http, &target, &event_id, body).await;
                        let ok = record.ok();
                        log.lock().unwrap().push(record);
                        if !ok {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                })
            })
            .collect();
        Load {
            url,
            stop,
            log,
            tasks,
        }
    }

    /// Sends the next requests to `url` (a restarted server's).
    fn retarget(&self, url: String) {
        *self.url.lock().unwrap() = url;
    }

    fn snapshot(&self) -> Vec<Sent> {
        self.log.lock().unwrap().clone()
    }

    async fn finish(self) -> Vec<Sent> {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        self.log.lock().unwrap().clone()
    }
}

/// One signed event `event_id` with `body` to `url`, and what came of it.
async fn send_event(http: &reqwest::Client, url: &str, event_id: &str, body: Vec<u8>) -> Sent {
    let mut request = http.post(url).body(body.clone());
    for (name, value) in standard_headers(event_id, &body) {
        request = request.header(name, value);
    }
    let sent = Instant::now();
    let (status, stored) = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let json: serde_json::Value = response.json().await.unwrap_or_default();
            (Some(status), json["id"].as_str().map(str::to_owned))
        }
        Err(_) => (None, None),
    };
    Sent {
        event_id: event_id.to_owned(),
        body,
        sent,
        done: Instant::now(),
        status,
        stored,
    }
}

/// `(event id, stored id)` of every 2xx.
fn answered(log: &[Sent]) -> Vec<(String, String)> {
    log.iter()
        .filter(|s| s.ok())
        .map(|s| (s.event_id.clone(), s.stored.clone().unwrap_or_default()))
        .collect()
}

/// Polls the node's readiness until it is `status`; how long that took.
async fn ready_within(server: &TestServer, status: u16, within: Duration) -> Duration {
    let started = Instant::now();
    eventually(
        &format!("/readyz answers {status}"),
        within,
        Duration::from_millis(100),
        async || {
            let ready = server.admin("GET", "/readyz", None, None).await;
            if ready.status == status {
                Ok(started.elapsed())
            } else {
                Err(format!("{} {:?}", ready.status, ready.json))
            }
        },
    )
    .await
}

/// Whether the binary has exited, and if so its status, why (its last
/// error line) and the end of its log.
fn exited(server: &mut BinaryServer) -> Option<String> {
    let status = server.child.try_wait().unwrap()?;
    let log = server.log_text();
    let why = log
        .lines()
        .rev()
        .find(|l| l.starts_with("hookinbox: "))
        .or_else(|| {
            log.lines()
                .rev()
                .find(|l| l.contains("\"level\":\"ERROR\""))
        })
        .unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(12).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Some(format!(
        "{status}: {why}\nits log's tail:\n{}",
        tail.join("\n")
    ))
}

/// Three NATS nodes (stream and lease R3), the primary (the binary) under
/// load from three senders: one node killed (the stream's leader), ingest
/// goes on after an election; a second killed, ingest answers 503 and no
/// 2xx once the budget ran out; both restarted, 2xx again. Every 2xx is in
/// the primary's store and in a standby started afterwards on an empty data
/// dir, which stays a standby.
///
/// The primary must not exit on the way. If it does, the drill restarts it
/// as a service manager would (`Restart=on-failure`), goes on, checks the
/// events all the same, and fails at the end naming each exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_nodes_killed_under_load_one_then_a_quorum_and_restarted() {
    let secs = std::env::var("DRILL_LEASE").map_or(5, |v| v.parse().unwrap());
    nodes_killed(secs).await;
}

/// Restarts the primary's binary if it has exited, as a service manager
/// would, once it starts (NATS may not take it yet: tried for 60 s);
/// returns why it had exited.
async fn supervise(primary: &mut BinaryServer, config: &Path, load: &Load) -> Option<String> {
    let why = exited(primary)?;
    *primary = eventually(
        &format!("the primary starts again (it had exited: {why})"),
        Duration::from_secs(60),
        Duration::from_secs(2),
        async || {
            let config = config.to_owned();
            tokio::task::spawn_blocking(move || {
                std::panic::catch_unwind(|| BinaryServer::start(&config, &[], None))
            })
            .await
            .unwrap()
            .map_err(|_| "it did not start".to_owned())
        },
    )
    .await;
    load.retarget(primary.url("/in/shop"));
    Some(why)
}

async fn nodes_killed(lease_secs: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = NatsCluster::start(dir.path()).await;
    let urls = cluster.urls();
    let lease = Duration::from_secs(lease_secs);
    let lease_text = format!("{lease_secs}s");
    let config = write_config(
        dir.path(),
        &node_config(dir.path(), "a", &urls, 3, "primary", "vm-a", &lease_text),
    );
    let mut primary = BinaryServer::start(&config, &[], None);
    let mut findings = Vec::new();
    let load = Load::start(
        primary.url("/in/shop"),
        3,
        "evt",
        5_000,
        Duration::from_secs(90),
        // A request waits for its batch's budget (a lease), after the
        // batch before it: up to two leases without a quorum.
        3 * lease + Duration::from_secs(5),
        plain_body,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kill = answered(&load.snapshot()).len();
    assert!(before_kill > 20, "load ran: {before_kill}");

    // One node down: the stream's leader if it can be found, the worst one.
    let first = match stream_leader(&urls).await {
        Some(name) => cluster.index_of(&name),
        None => 0,
    };
    let killed_one = Instant::now();
    cluster.kill(first);
    let resumed = eventually(
        "a 2xx with one NATS node down",
        Duration::from_secs(30),
        Duration::from_millis(100),
        async || {
            let first_2xx = load
                .snapshot()
                .iter()
                .filter(|s| s.ok() && s.sent > killed_one)
                .map(|s| s.done - killed_one)
                .min();
            if let Some(t) = first_2xx {
                return Ok(t);
            }
            if let Some(why) = supervise(&mut primary, &config, &load).await {
                findings.push(format!(
                    "the primary exited {:?} after one NATS node ({}) was killed: {why}",
                    killed_one.elapsed(),
                    cluster.name(first)
                ));
            }
            Err("no 2xx yet".to_owned())
        },
    )
    .await;
    // A few seconds more with one node down.
    tokio::time::sleep(Duration::from_secs(3)).await;
    if let Some(why) = supervise(&mut primary, &config, &load).await {
        findings.push(format!(
            "the primary exited {:?} after one NATS node ({}) was killed: {why}",
            killed_one.elapsed(),
            cluster.name(first)
        ));
    }
    let one_down = load.snapshot();
    let one_down: Vec<&Sent> = one_down.iter().filter(|s| s.sent > killed_one).collect();
    let one_down_ok = one_down.iter().filter(|s| s.ok()).count();
    let one_down_503 = one_down.iter().filter(|s| s.status == Some(503)).count();
    let one_down_gap = gap_without_2xx(&load.snapshot(), killed_one);

    // A second node down: no quorum.
    let second = (first + 1) % 3;
    let killed_two = Instant::now();
    cluster.kill(second);
    let first_503 = eventually(
        "503 without a quorum",
        Duration::from_secs(3 * lease_secs + 5),
        Duration::from_millis(100),
        async || {
            load.snapshot()
                .iter()
                .filter(|s| s.status == Some(503) && s.done > killed_two)
                .map(|s| s.done - killed_two)
                .min()
                .ok_or_else(|| "no 503 yet".to_owned())
        },
    )
    .await;
    // Without a quorum a while longer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let restarting = Instant::now();
    if let Some(why) = exited(&mut primary) {
        findings.push(format!(
            "the primary exited without a quorum, {:?} after the second kill: {why}",
            killed_two.elapsed()
        ));
    }
    let no_quorum = load.snapshot();
    let no_quorum: Vec<&Sent> = no_quorum
        .iter()
        .filter(|s| s.done > killed_two && s.done < restarting)
        .collect();
    let no_quorum_2xx: Vec<&&Sent> = no_quorum
        .iter()
        .filter(|s| s.ok() && s.sent > killed_two + Duration::from_millis(500))
        .collect();
    let no_quorum_503 = no_quorum.iter().filter(|s| s.status == Some(503)).count();
    let no_quorum_none = no_quorum.iter().filter(|s| s.status.is_none()).count();
    let slowest_503 = no_quorum
        .iter()
        .filter(|s| s.status == Some(503))
        .map(|s| s.done - s.sent)
        .max();
    println!(
        "drill R3 (lease {lease:?}): {before_kill} 2xx before the first kill; one node down \
         ({}): first 2xx {resumed:?} after the kill, longest gap without a 2xx \
         {one_down_gap:?}, {one_down_ok} 2xx and {one_down_503} 503 in {:?}; two down: first \
         503 {first_503:?} after the second kill, then {} answers in {:?}: {no_quorum_503} \
         503 (slowest {slowest_503:?}), {no_quorum_none} unanswered, {} 2xx",
        cluster.name(first),
        killed_two - killed_one,
        no_quorum.len(),
        restarting - killed_two,
        no_quorum_2xx.len()
    );
    assert!(
        no_quorum_2xx.is_empty(),
        "2xx without a quorum: {:?}",
        no_quorum_2xx
            .iter()
            .map(|s| (&s.event_id, s.sent - killed_two))
            .collect::<Vec<_>>()
    );
    assert!(no_quorum_503 > 0, "no 503 without a quorum");

    // Both back.
    cluster.restart(first);
    cluster.restart(second);
    let back = eventually(
        "a 2xx after the two nodes were restarted",
        Duration::from_secs(60).saturating_sub(restarting.elapsed()),
        Duration::from_millis(100),
        async || {
            let first_2xx = load
                .snapshot()
                .iter()
                .filter(|s| s.ok() && s.sent > restarting)
                .map(|s| s.done - restarting)
                .min();
            if let Some(t) = first_2xx {
                return Ok(t);
            }
            if let Some(why) = supervise(&mut primary, &config, &load).await {
                findings.push(format!(
                    "the primary had exited by {:?} after the two nodes were restarted: {why}",
                    restarting.elapsed()
                ));
            }
            Err(format!(
                "no 2xx yet; the primary's log:\n{}",
                primary.log_text()
            ))
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = load.finish().await;
    if let Some(why) = exited(&mut primary) {
        findings.push(format!("the primary exited at the end: {why}"));
    }
    let answered = answered(&log);
    println!(
        "drill R3: 2xx again {back:?} after the two nodes were restarted; {} requests, {} 2xx \
         in all",
        log.len(),
        answered.len()
    );

    // A standby on an empty data dir follows the stream to its end. Right
    // after the restart JetStream may still answer "temporarily
    // unavailable": a start that fails is tried again 2 s later for 60 s,
    // as the packaged unit's Restart=on-failure would.
    let standby_config = node_config(dir.path(), "b", &urls, 3, "standby", "vm-b", &lease_text);
    let standby = eventually(
        "the standby starts",
        Duration::from_secs(60),
        Duration::from_secs(2),
        async || {
            TestServer::try_start(&standby_config, Clock::system())
                .await
                .map_err(|e| {
                    println!("drill R3: the standby did not start ({e}); again in 2 s");
                    e.to_string()
                })
        },
    )
    .await;
    let following = Instant::now();
    eventually(
        "the standby holds every answered event",
        Duration::from_secs(30),
        Duration::from_millis(200),
        async || {
            let missing: Vec<&String> = answered
                .iter()
                .filter(|(event_id, id)| {
                    standby
                        .store()
                        .find("shop", event_id)
                        .unwrap()
                        .map(|e| e.id)
                        .as_ref()
                        != Some(id)
                })
                .map(|(event_id, _)| event_id)
                .collect();
            match missing.len() {
                0 => Ok(()),
                n => Err(format!(
                    "{n} of {} missing, first {:?}",
                    answered.len(),
                    &missing[..n.min(5)]
                )),
            }
        },
    )
    .await;
    let caught_up = following.elapsed();
    let ready = standby.admin("GET", "/readyz", None, None).await;
    assert_eq!(ready.status, 503, "{:?}", ready.json);
    assert!(
        ready.json["store"].as_str().unwrap().contains("standby"),
        "{:?}",
        ready.json
    );
    println!("drill R3: a new standby held every answered event {caught_up:?} after it started");
    standby.stop().await;

    // The primary's own store, read once it has stopped.
    primary.terminate();
    let stored: std::collections::HashMap<String, String> = read_all(&dir.path().join("a"))
        .await
        .into_iter()
        .map(|e| (e.record.event_id.clone(), e.id))
        .collect();
    for (event_id, id) in &answered {
        assert_eq!(stored.get(event_id), Some(id), "{event_id} in the primary");
    }
    assert!(
        findings.is_empty(),
        "every answered event is kept, but FINDINGS:\n{}",
        findings.join("\n")
    );
}

/// The longest time after `from` during which no request got a 2xx (from
/// `from`, or a 2xx's answer, to the next 2xx's answer).
fn gap_without_2xx(log: &[Sent], from: Instant) -> Duration {
    let mut done: Vec<Instant> = log
        .iter()
        .filter(|s| s.ok() && s.done > from)
        .map(|s| s.done)
        .collect();
    done.sort();
    let mut last = from;
    let mut gap = Duration::ZERO;
    for t in done {
        gap = gap.max(t - last);
        last = t;
    }
    gap
}

/// The server name of the replication stream's leader, if it answers.
async fn stream_leader(urls: &str) -> Option<String> {
    let js = async_nats::jetstream::new(crate::nats::connect(urls).await);
    let mut stream = js.get_stream(STREAM).await.ok()?;
    let info = stream.info().await.ok()?;
    info.cluster.as_ref().and_then(|c| c.leader.clone())
}

/// Split brain: the primary (the binary) is frozen with SIGSTOP under load
/// past its lease; the standby takes over and takes events; the old
/// primary is woken with SIGCONT and must answer no 2xx any more (non-2xx,
/// a refused connection, or an exit). Every event either node answered 2xx
/// is in the new primary's store once, under the id the sender got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_frozen_past_its_lease_is_replaced_and_answers_no_2xx_when_it_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let url = nats.url();
    let config = write_config(
        dir.path(),
        &node_config(dir.path(), "a", &url, 1, "primary", "vm-a", "3s"),
    );
    let mut old = BinaryServer::start(&config, &[], None);
    let http = hookinbox::send::http_client(Duration::from_secs(15)).unwrap();
    // The stream holds a frame before the standby starts.
    let first = send_event(
        &http,
        &old.url("/in/shop"),
        "evt_first",
        plain_body("evt_first", 0),
    )
    .await;
    assert!(first.ok(), "{first:?}");
    let standby = TestServer::start(
        &node_config(dir.path(), "b", &url, 1, "standby", "vm-b", "3s"),
        Clock::system(),
    )
    .await;
    let load = Load::start(
        old.url("/in/shop"),
        3,
        "evt",
        5_000,
        Duration::from_secs(45),
        Duration::from_secs(30),
        plain_body,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    old.signal(libc::SIGSTOP);
    let frozen = Instant::now();
    let before = answered(&load.snapshot()).len();
    assert!(before > 20, "load ran: {before}");
    ready_within(&standby, 200, Duration::from_secs(15)).await;
    let takeover = frozen.elapsed();

    // The new primary takes events, and the old one's answered events
    // sent again are duplicates under the ids the old one gave.
    let mut to_new = Vec::new();
    for i in 0..10 {
        let id = format!("new_{i}");
        let sent = send_event(
            &standby.client,
            &standby.url("/in/shop"),
            &id,
            plain_body(&id, i),
        )
        .await;
        assert!(sent.ok(), "{sent:?}");
        to_new.push(sent);
    }
    let answered_by_old = answered(&load.snapshot());
    for (event_id, id) in answered_by_old.iter().take(10) {
        let again = send_event(
            &standby.client,
            &standby.url("/in/shop"),
            event_id,
            plain_body(event_id, 0),
        )
        .await;
        assert_eq!(again.stored.as_ref(), Some(id), "{event_id}: {again:?}");
        to_new.push(again);
    }

    let woke = Instant::now();
    old.signal(libc::SIGCONT);
    let mut fresh = Vec::new();
    for i in 0..5 {
        let id = format!("fresh_{i}");
        fresh.push(send_event(&http, &old.url("/in/shop"), &id, plain_body(&id, i)).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Time to exit, if it does.
    let mut exit = None;
    let watching =
        crate::support::Window::of(Duration::from_secs(10).saturating_sub(woke.elapsed()));
    while !watching.is_over() {
        if let Some(why) = exited(&mut old) {
            exit = Some((woke.elapsed(), why));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = load.finish().await;
    let in_flight: Vec<&Sent> = log
        .iter()
        .filter(|s| s.sent < woke && s.done > frozen)
        .collect();
    let after_wake: Vec<&Sent> = log.iter().filter(|s| s.sent >= woke).collect();
    let status_counts = |sent: &[&Sent]| {
        let mut counts = std::collections::BTreeMap::new();
        for s in sent {
            *counts
                .entry(s.status.map_or("none".to_owned(), |c| c.to_string()))
                .or_insert(0) += 1;
        }
        counts
    };
    println!(
        "drill split brain (lease 3 s): {before} 2xx before the freeze; the standby ready \
         {takeover:?} after SIGSTOP; in flight at the freeze: {:?}; after SIGCONT: load {:?}, \
         fresh {:?}; the old primary {}",
        status_counts(&in_flight),
        status_counts(&after_wake),
        fresh
            .iter()
            .map(|s| s.status.map_or("none".to_owned(), |c| c.to_string()))
            .collect::<Vec<_>>(),
        match &exit {
            Some((after, why)) => format!("exited {after:?} after SIGCONT: {why}"),
            None => "still runs 10 s after SIGCONT".to_owned(),
        }
    );

    let mut problems = Vec::new();
    for s in fresh.iter().chain(after_wake.iter().copied()) {
        if s.ok() {
            problems.push(format!(
                "the old primary answered {} {:?} after SIGCONT (stored id {:?})",
                s.event_id, s.status, s.stored
            ));
        }
    }
    // Every 2xx, from either node, is in the new primary's store once.
    let all_ok: Vec<&Sent> = std::iter::once(&first)
        .chain(log.iter())
        .chain(to_new.iter())
        .chain(fresh.iter())
        .filter(|s| s.ok())
        .collect();
    let by_id: std::collections::HashMap<String, String> = standby
        .events()
        .into_iter()
        .map(|e| (e.id, e.record.event_id))
        .collect();
    for s in &all_ok {
        let found = standby.store().find("shop", &s.event_id).unwrap();
        if found.as_ref().map(|e| &e.id) != s.stored.as_ref() {
            let at = |t: Instant| match t.checked_duration_since(frozen) {
                Some(after) if t < woke => format!("{after:?} after SIGSTOP"),
                Some(_) => format!("{:?} after SIGCONT", t - woke),
                None => format!("{:?} before SIGSTOP", frozen - t),
            };
            problems.push(format!(
                "{} (sent {}, answered {}) was answered {:?} with id {:?}, but the new primary \
                 holds {:?} for it, and under that id it holds {:?}",
                s.event_id,
                at(s.sent),
                at(s.done),
                s.status,
                s.stored,
                found.map(|e| e.id),
                s.stored.as_ref().and_then(|id| by_id.get(id)),
            ));
        }
    }
    // Each frame number once in the stream, one message each: a 2xx the
    // stream does not hold was acked as a duplicate of another's frame.
    let shipped = crate::replicate::frames(&url).await;
    let mut numbers: Vec<u64> = shipped.iter().map(|(_, lsn)| *lsn).collect();
    let messages = numbers.len();
    numbers.dedup();
    println!(
        "drill split brain: the stream holds {messages} messages, frames {:?}..={:?}, {} \
         frame numbers in more than one message",
        numbers.first(),
        numbers.last(),
        messages - numbers.len()
    );
    let mut copies = std::collections::HashMap::new();
    for e in standby.events() {
        *copies.entry(e.record.event_id).or_insert(0) += 1;
    }
    for (event_id, n) in copies {
        if n > 1 {
            problems.push(format!("{event_id} is stored {n} times"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}\nthe old primary's log:\n{}",
        problems.len(),
        problems.join("\n"),
        old.log_text()
            .lines()
            .filter(|l| !l.contains("\"level\":\"INFO\""))
            .collect::<Vec<_>>()
            .join("\n")
    );
    standby.stop().await;
}

/// Large and unusual bodies: unicode, escapes, odd spacing, a trailing
/// newline; every 40th one about 900 kB (a frame larger than a NATS
/// message, sent in parts).
fn varied_body(id: &str, n: usize) -> Vec<u8> {
    let size = if n % 40 == 39 {
        900_000
    } else {
        (n * 997) % 20_000
    };
    let mut pad = String::with_capacity(size + 32);
    while pad.len() < size {
        pad.push_str("é✓ \\\"\\n\\u0000\t");
        pad.push_str(&n.to_string());
    }
    format!("{{ \"type\" : \"t\",\"id\":\"{id}\",  \"pad\":\"{pad}\"}}\n").into_bytes()
}

/// An R1 stream on one NATS server: the primary (the binary) is killed
/// with SIGKILL under load and its data dir deleted; only then a standby
/// starts, on an empty data dir. It takes over once the lease lapses, holds
/// every answered event byte for byte under the id the sender got, and
/// answers a provider's resend as a duplicate with that id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_started_after_the_r1_primary_was_lost_has_every_answered_event_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let url = nats.url();
    let config = write_config(
        dir.path(),
        &node_config(dir.path(), "a", &url, 1, "primary", "vm-a", "3s"),
    );
    let mut primary = BinaryServer::start(&config, &[], None);
    let load = Load::start(
        primary.url("/in/shop"),
        3,
        "evt",
        5_000,
        Duration::from_secs(30),
        Duration::from_secs(20),
        varied_body,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    primary.kill9();
    let killed = Instant::now();
    let log = load.finish().await;
    std::fs::remove_dir_all(dir.path().join("a")).unwrap();
    let answered: Vec<&Sent> = log.iter().filter(|s| s.ok()).collect();
    let large = answered.iter().filter(|s| s.body.len() > 500_000).count();
    assert!(answered.len() > 50, "load ran: {}", answered.len());
    assert!(large > 0, "no large event was answered");

    let standby = TestServer::start(
        &node_config(dir.path(), "b", &url, 1, "standby", "vm-b", "3s"),
        Clock::system(),
    )
    .await;
    let started = killed.elapsed();
    ready_within(&standby, 200, Duration::from_secs(20)).await;
    let took = killed.elapsed();
    for s in &answered {
        let found = standby
            .store()
            .find("shop", &s.event_id)
            .unwrap()
            .unwrap_or_else(|| panic!("{} is missing", s.event_id));
        assert_eq!(Some(&found.id), s.stored.as_ref(), "{}", s.event_id);
        assert!(
            found.record.body == s.body,
            "{}: the stored body differs ({} bytes stored, {} sent)",
            s.event_id,
            found.record.body.len(),
            s.body.len()
        );
    }
    for s in answered.iter().take(20) {
        let again = send_event(
            &standby.client,
            &standby.url("/in/shop"),
            &s.event_id,
            s.body.clone(),
        )
        .await;
        assert_eq!(again.status, Some(200), "{again:?}");
        assert_eq!(again.stored, s.stored, "{}", s.event_id);
    }
    let resent = answered[0];
    let again = standby
        .post(
            "/in/shop",
            &standard_headers(&resent.event_id, &resent.body),
            resent.body.clone(),
        )
        .await;
    assert!(again.is_duplicate(), "{:?}", again.json);
    println!(
        "drill R1: {} events answered ({large} of about 900 kB), {} requests; the primary \
         killed and its data dir deleted; the standby started {started:?} after the kill and \
         was ready {took:?} after it (lease 3 s); every answered event byte for byte",
        answered.len(),
        log.len()
    );
    standby.stop().await;
}

/// `hookinbox serve --config CONFIG` expected to refuse to start: its exit
/// status and what it printed on stderr (within 30 s).
fn refused_at_start(config: &Path) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["serve", "--config"])
        .arg(config)
        .env("HOOKINBOX_LOG_LEVEL", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = crate::support::exit_within(
        &mut child,
        &format!("hookinbox refuses to start with {}", config.display()),
        Duration::from_secs(30),
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

/// The binary refuses to start, exiting non-zero with the reason: a second
/// primary while another node holds the lease (naming that node), and a
/// primary whose data dir is not the database the stream continues
/// (another inbox's stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_primary_and_a_primary_on_another_inbox_s_stream_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let url = nats.url();
    let config_of = |data: &str, node: &str| {
        let home = dir.path().join(format!("config-{node}"));
        std::fs::create_dir_all(&home).unwrap();
        write_config(
            &home,
            &node_config(dir.path(), data, &url, 1, "primary", node, "3s"),
        )
    };
    let mut first = BinaryServer::start(&config_of("a", "vm-a"), &[], None);
    let http = hookinbox::send::http_client(Duration::from_secs(10)).unwrap();
    let sent = send_event(
        &http,
        &first.url("/in/shop"),
        "evt_0",
        plain_body("evt_0", 0),
    )
    .await;
    assert!(sent.ok(), "{sent:?}");

    let (status, text) = refused_at_start(&config_of("b", "vm-b"));
    // 2: only the operator can change this; the unit does not restart it.
    assert_eq!(status.code(), Some(2), "{status}");
    assert!(
        text.contains("node \"vm-a\" holds the lease") && text.contains("vm-b"),
        "{text}"
    );
    let second_primary = format!("{status}: {}", text.lines().last().unwrap_or_default());

    // vm-a stops cleanly (the lease is given up); a primary with another
    // data dir, a new database, on vm-a's stream.
    assert!(first.terminate().success());
    let (status, text) = refused_at_start(&config_of("c", "vm-c"));
    assert!(!status.success(), "{status}");
    assert!(text.contains("another inbox"), "{text}");
    let another_inbox = text.lines().last().unwrap_or_default().to_owned();
    println!(
        "drill refusals: a second primary: {second_primary}\n\
         drill refusals: another inbox's stream: {status}: {another_inbox}"
    );
}
