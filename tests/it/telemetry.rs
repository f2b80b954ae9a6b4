//! Traces (`[telemetry]`) against a loopback OTLP/HTTP receiver that
//! decodes what the exporter sends (protobuf, `opentelemetry-proto`): one
//! trace per event, from the provider's request to the app's answer, the
//! app's requests carrying it; nothing traced, sent or added without the
//! section; and a receiver that is down costs ingest nothing and is counted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, client, eventually, free_port, post, sample, server_section, standard_headers,
    standard_source, write_config,
};

/// The batch thread's wait between exports, shortened so spans arrive in
/// the test's time.
const BATCH_DELAY: (&str, &str) = ("OTEL_BSP_SCHEDULE_DELAY", "100");
/// What a sender's own trace context says, to be linked.
const SENDER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN: &str = "00f067aa0ba902b7";
const ADMIN_TOKEN: &str = "telemetry-admin-token-0123456789";
/// The spans of hookinbox's own tasks, each a trace of its own.
const TASKS: [&str; 3] = ["checkpoint", "sweep", "reconcile pass"];

/// A span as received, with its resource's `service.name`.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    span: Span,
}

impl Got {
    fn trace_id(&self) -> String {
        hex::encode(&self.span.trace_id)
    }

    fn span_id(&self) -> String {
        hex::encode(&self.span.span_id)
    }

    fn parent(&self) -> String {
        hex::encode(&self.span.parent_span_id)
    }

    /// An attribute's value as text (ints and bools printed).
    fn attr(&self, key: &str) -> Option<String> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                Value::StringValue(s) => s.clone(),
                Value::IntValue(i) => i.to_string(),
                Value::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            })
    }
}

/// The loopback OTLP/HTTP receiver: every span of every export, and how
/// many requests came.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<Mutex<usize>>,
}

impl Receiver {
    async fn start() -> (Receiver, SocketAddr) {
        let receiver = Receiver::default();
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(take))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, addr)
    }

    /// The spans of events (receipts, replays, attempts, an app's), in the
    /// order they came: not those of the tasks (checkpoints, every second
    /// while events arrive; sweeps; reconcile passes).
    fn spans(&self) -> Vec<Got> {
        self.all()
            .into_iter()
            .filter(|s| !TASKS.contains(&s.span.name.as_str()))
            .collect()
    }

    fn all(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    /// Every span received, tasks' too, once there is one of each of
    /// `names`, within 20 s.
    async fn wait_for_named(&self, names: &[&str]) -> Vec<Got> {
        eventually(
            &format!("spans named {names:?} are exported"),
            Duration::from_secs(20),
            Duration::from_millis(50),
            async || {
                let all = self.all();
                let has = |name: &&str| all.iter().any(|s| s.span.name == *name);
                if names.iter().all(has) {
                    Ok(all)
                } else {
                    Err(format!("{all:#?}"))
                }
            },
        )
        .await
    }

    /// Every span received once there are at least `n`, within 20 s.
    async fn wait_for(&self, n: usize) -> Vec<Got> {
        eventually(
            &format!("{n} spans are exported"),
            Duration::from_secs(20),
            Duration::from_millis(50),
            async || match self.spans() {
                spans if spans.len() >= n => Ok(spans),
                spans => Err(format!("{spans:#?}")),
            },
        )
        .await
    }
}

async fn take(State(receiver): State<Receiver>, body: Bytes) -> &'static str {
    *receiver.requests.lock().unwrap() += 1;
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
    let mut spans = receiver.spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Got {
                    service: service.clone(),
                    span,
                });
            }
        }
    }
    ""
}

/// The spans of one trace as a tree, children under their parent in the
/// order they started: name, start after the root's (ms), duration (ms).
/// Printed by the tests (`--nocapture`); docs/operating.md shows one.
fn render(spans: &[Got]) -> String {
    fn walk(spans: &[Got], parent: &str, root_start: u64, depth: usize, out: &mut String) {
        let mut children: Vec<&Got> = spans.iter().filter(|s| s.parent() == parent).collect();
        children.sort_by_key(|s| s.span.start_time_unix_nano);
        for s in children {
            let at = (s.span.start_time_unix_nano - root_start) as f64 / 1e6;
            let took = (s.span.end_time_unix_nano - s.span.start_time_unix_nano) as f64 / 1e6;
            let status = s.attr("http.response.status_code").unwrap_or_default();
            out.push_str(&format!(
                "{:indent$}{} [{}] +{at:.1} ms, {took:.1} ms {status}\n",
                "",
                s.span.name,
                s.service,
                indent = depth * 2
            ));
            walk(spans, &s.span_id(), root_start, depth + 1, out);
        }
    }
    let start = spans
        .iter()
        .map(|s| s.span.start_time_unix_nano)
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    walk(spans, "", start, 0, &mut out);
    out
}

fn config(dir: &std::path::Path, telemetry: &str, app: &str) -> String {
    format!(
        "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n{telemetry}{}destination = \"{app}\"\n\
         initial_interval = \"50ms\"\nmax_interval = \"100ms\"\n",
        server_section(dir),
        standard_source("shop"),
    )
}

/// Sends one signed event with the sender's trace context; its public id.
async fn send(server: &BinaryServer, event_id: &str) -> String {
    let body = format!(r#"{{"type":"order.paid","id":"{event_id}"}}"#).into_bytes();
    let mut headers = standard_headers(event_id, &body);
    headers.push((
        "traceparent".into(),
        format!("00-{SENDER_TRACE}-{SENDER_SPAN}-01"),
    ));
    let answer = post(&client(), &server.url("/in/shop"), &headers, body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    answer.id().to_owned()
}

async fn scrape(server: &BinaryServer) -> String {
    let answer = server.admin_ok(ADMIN_TOKEN, "GET", "/metrics", None).await;
    answer.json.as_str().expect("the text format").to_owned()
}

#[tokio::test]
async fn an_event_delivered_after_two_failures_is_one_trace_that_reaches_the_app() {
    let (receiver, otlp) = Receiver::start().await;
    let app = Destination::start(Mode::Status(500, "boom")).await;
    let dir = tempfile::tempdir().unwrap();
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://{otlp}\"\nservice_name = \"hookinbox-test\"\n\
         trace_url = \"http://tempo.example/trace/{{trace_id}}\"\n\n"
    );
    let path = write_config(dir.path(), &config(dir.path(), &telemetry, &app.url()));
    // At debug, each event's own lines are logged: they name their spans.
    let server = BinaryServer::start(
        &path,
        &[BATCH_DELAY, ("HOOKINBOX_LOG_LEVEL", "debug")],
        None,
    );
    let id = send(&server, "ord_traced").await;
    app.wait_for(2, Duration::from_secs(10)).await;
    app.set(Mode::Ok);
    let requests = app.wait_for(3, Duration::from_secs(10)).await;

    // The receipt and three attempts.
    let spans = receiver.wait_for(4).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    println!("{}", render(&spans));
    assert!(spans.iter().all(|s| s.service == "hookinbox-test"));
    let trace = spans[0].trace_id();
    assert!(spans.iter().all(|s| s.trace_id() == trace), "{spans:#?}");

    // The receipt: the trace's root, linked to the sender's context.
    let receipt: Vec<&Got> = spans
        .iter()
        .filter(|s| s.span.kind == SpanKind::Server as i32)
        .collect();
    assert_eq!(receipt.len(), 1, "{spans:#?}");
    let receipt = receipt[0];
    assert_eq!(receipt.span.name, "POST /in/shop");
    assert!(receipt.span.parent_span_id.is_empty(), "{receipt:#?}");
    assert_eq!(receipt.attr("hookinbox.id").as_deref(), Some(id.as_str()));
    assert_eq!(
        receipt.attr("hookinbox.event_id").as_deref(),
        Some("ord_traced")
    );
    assert_eq!(
        receipt.attr("hookinbox.duplicate").as_deref(),
        Some("false")
    );
    let events: Vec<&str> = receipt
        .span
        .events
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(events, ["verified", "durable"]);
    assert_eq!(receipt.span.links.len(), 1, "{receipt:#?}");
    assert_eq!(hex::encode(&receipt.span.links[0].trace_id), SENDER_TRACE);
    assert_eq!(hex::encode(&receipt.span.links[0].span_id), SENDER_SPAN);

    // Three attempts, each a child of the receipt, the app's requests each
    // carrying its attempt's context.
    let mut attempts: Vec<&Got> = spans
        .iter()
        .filter(|s| s.span.kind == SpanKind::Client as i32)
        .collect();
    attempts.sort_by_key(|s| s.attr("hookinbox.attempt"));
    assert_eq!(attempts.len(), 3, "{spans:#?}");
    for (n, (span, request)) in attempts.iter().zip(&requests).enumerate() {
        assert_eq!(span.parent(), receipt.span_id(), "{span:#?}");
        assert_eq!(span.attr("hookinbox.attempt"), Some((n + 1).to_string()));
        assert_eq!(
            request.header("traceparent"),
            format!("00-{trace}-{}-01", span.span_id()),
            "attempt {}",
            n + 1
        );
        let status = if n < 2 { "500" } else { "200" };
        assert_eq!(
            span.attr("http.response.status_code").as_deref(),
            Some(status)
        );
        // An error status for the failures (code 2), unset for the delivery.
        let code = span.span.status.as_ref().map_or(0, |s| s.code);
        assert_eq!(code, if n < 2 { 2 } else { 0 }, "{span:#?}");
    }

    // The event's page gives the trace and its link.
    let token = ADMIN_TOKEN;
    let event = server
        .admin_ok(token, "GET", &format!("/api/events/{id}"), None)
        .await;
    assert_eq!(event.json["trace_id"], trace.as_str(), "{:?}", event.json);
    assert_eq!(
        event.json["trace_url"],
        format!("http://tempo.example/trace/{trace}").as_str()
    );

    // `events show` prints them.
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["events", "show", &id, "--admin", &server.admin])
        .env("HOOKINBOX_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains(&format!("trace_id        {trace}\n")),
        "{shown}"
    );
    assert!(shown.contains(&format!(
        "trace_url       http://tempo.example/trace/{trace}\n"
    )));

    // The log lines of the event and of its attempts name their spans.
    let stored = server.log_record("stored").expect("the stored line");
    assert_eq!(stored["trace_id"], trace.as_str(), "{stored}");
    let failed = server
        .log_record("attempt failed; will retry")
        .expect("a retry line");
    assert_eq!(failed["trace_id"], trace.as_str(), "{failed}");
    assert_eq!(
        failed["span_id"],
        attempts[0].span_id().as_str(),
        "{failed}"
    );
    let delivered = server.log_record("delivered").expect("the delivered line");
    assert_eq!(
        delivered["span_id"],
        attempts[2].span_id().as_str(),
        "{delivered}"
    );

    let metrics = scrape(&server).await;
    assert!(sample(&metrics, "hookinbox_telemetry_spans_exported_total") >= 4.0);
    assert_eq!(
        sample(&metrics, "hookinbox_telemetry_spans_failed_total"),
        0.0
    );
}

#[tokio::test]
async fn without_telemetry_nothing_is_traced_sent_or_added() {
    let (receiver, otlp) = Receiver::start().await;
    let app = Destination::start(Mode::Ok).await;
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &config(dir.path(), "", &app.url()));
    // The variables alone do not turn traces on.
    let endpoint = format!("http://{otlp}");
    let server = BinaryServer::start(
        &path,
        &[BATCH_DELAY, ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
        None,
    );
    let id = send(&server, "ord_plain").await;
    let got = app.wait_for(1, Duration::from_secs(10)).await;
    assert!(
        got[0].headers.get("traceparent").is_none(),
        "{:?}",
        got[0].headers
    );
    let token = ADMIN_TOKEN;
    let event = server
        .admin_ok(token, "GET", &format!("/api/events/{id}"), None)
        .await;
    assert!(event.json.get("trace_id").is_none(), "{:?}", event.json);
    // Ten batch delays: anything queued would have gone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.requests(), 0);
}

#[tokio::test]
async fn a_receiver_that_is_down_costs_ingest_nothing_and_its_losses_are_counted() {
    let app = Destination::start(Mode::Ok).await;
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: every export is refused at once.
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://127.0.0.1:{}\"\n\n",
        free_port()
    );
    let path = write_config(dir.path(), &config(dir.path(), &telemetry, &app.url()));
    let server = BinaryServer::start(&path, &[BATCH_DELAY], None);
    for n in 0..20 {
        send(&server, &format!("ord_{n}")).await;
    }
    app.wait_for(20, Duration::from_secs(10)).await;
    let got = app.received();
    assert!(
        got.iter()
            .all(|r| r.header("traceparent").starts_with("00-"))
    );
    eventually(
        "the lost spans are counted",
        Duration::from_secs(20),
        Duration::from_millis(100),
        async || {
            let metrics = scrape(&server).await;
            let failed = sample(&metrics, "hookinbox_telemetry_spans_failed_total");
            let ended = sample(&metrics, "hookinbox_telemetry_spans_ended_total");
            // 20 receipts and 20 attempts, and the checkpoints' spans.
            if ended >= 40.0 && failed == ended {
                Ok(())
            } else {
                Err(format!("ended {ended}, failed {failed}"))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_jetstream_message_carries_its_attempt_s_trace_context() {
    use futures_util::StreamExt;
    let (receiver, otlp) = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let nats = crate::nats::NatsServer::start(&dir.path().join("nats"));
    let (js, _) = nats.stream().await;
    let telemetry = format!("[telemetry]\nendpoint = \"http://{otlp}\"\n\n");
    let path = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n{telemetry}{}destination = \"{}\"\n",
            server_section(&dir.path().join("data")),
            standard_source("shop"),
            nats.url()
        ),
    );
    let server = BinaryServer::start(&path, &[BATCH_DELAY], None);
    let id = send(&server, "ord_streamed").await;
    let consumer = js
        .get_stream("HOOKS")
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut messages = consumer.messages().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .expect("a message within 10 s")
        .unwrap()
        .unwrap();
    let headers = message.headers.as_ref().unwrap();
    assert_eq!(headers.get("webhook-id").unwrap().as_str(), id);
    let traceparent = headers.get("traceparent").unwrap().as_str().to_owned();
    // The receipt and the attempt.
    let spans = receiver.wait_for(2).await;
    let attempt = spans
        .iter()
        .find(|s| s.span.kind == SpanKind::Client as i32)
        .expect("an attempt span");
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", attempt.trace_id(), attempt.span_id())
    );
    assert_eq!(
        attempt.trace_id(),
        hookinbox::telemetry::EventTrace::of(&id)
            .trace_id
            .to_string()
    );
}

#[tokio::test]
async fn a_replay_is_a_new_trace_linked_to_the_first_and_sweeps_and_checkpoints_have_their_own() {
    let (receiver, otlp) = Receiver::start().await;
    let app = Destination::start(Mode::Ok).await;
    let dir = tempfile::tempdir().unwrap();
    let telemetry = format!("[telemetry]\nendpoint = \"http://{otlp}\"\n\n");
    let path = write_config(dir.path(), &config(dir.path(), &telemetry, &app.url()));
    let server = BinaryServer::start(&path, &[BATCH_DELAY], None);
    let id = send(&server, "ord_replayed").await;
    server
        .delivered(ADMIN_TOKEN, "shop", "ord_replayed", Duration::from_secs(10))
        .await;
    server
        .admin_ok(
            ADMIN_TOKEN,
            "POST",
            &format!("/api/events/{id}/replay"),
            None,
        )
        .await;
    let requests = app.wait_for(2, Duration::from_secs(10)).await;
    server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/sweep", None)
        .await;

    // The receipt and its attempt, the replay and its attempt.
    receiver.wait_for(4).await;
    let spans = receiver.wait_for_named(&["sweep", "checkpoint"]).await;
    let named =
        |name: &str| -> Vec<&Got> { spans.iter().filter(|s| s.span.name == name).collect() };
    let receipt = named("POST /in/shop")[0];
    let replay = named("replay shop");
    assert_eq!(replay.len(), 1, "{spans:#?}");
    let replay = replay[0];
    assert_ne!(replay.trace_id(), receipt.trace_id(), "a trace of its own");
    assert!(
        replay.span.parent_span_id.is_empty(),
        "the root of its trace"
    );
    assert_eq!(replay.span.links.len(), 1, "{replay:#?}");
    assert_eq!(
        hex::encode(&replay.span.links[0].trace_id),
        receipt.trace_id()
    );
    assert_eq!(
        hex::encode(&replay.span.links[0].span_id),
        receipt.span_id()
    );
    assert_eq!(replay.attr("hookinbox.round").as_deref(), Some("1"));

    let attempts = named("deliver shop");
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    let first = attempts
        .iter()
        .find(|s| s.trace_id() == receipt.trace_id())
        .unwrap();
    let again = attempts
        .iter()
        .find(|s| s.trace_id() == replay.trace_id())
        .unwrap();
    assert_eq!(first.parent(), receipt.span_id());
    assert_eq!(again.parent(), replay.span_id());
    assert_eq!(
        requests[1].header("traceparent"),
        format!("00-{}-{}-01", again.trace_id(), again.span_id())
    );
    // Same webhook-id: the app dedupes the replay as ever.
    assert_eq!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id")
    );

    let sweep = named("sweep");
    assert_eq!(sweep.len(), 1, "{spans:#?}");
    assert_eq!(sweep[0].attr("hookinbox.sweep.steps").as_deref(), Some("1"));
    let checkpoint = named("checkpoint")[0];
    assert!(
        checkpoint.span.parent_span_id.is_empty(),
        "a trace of its own"
    );
    assert!(
        checkpoint.attr("hookinbox.lsn").is_some(),
        "{checkpoint:#?}"
    );
}

/// The app of `docs/verify/python/traced.py`, with the official
/// OpenTelemetry SDK, exporting to the same receiver: its span is a child of
/// the attempt that delivered to it, in the event's trace.
#[tokio::test]
async fn the_python_example_app_continues_the_trace_with_the_official_sdk() {
    const DEST_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let (receiver, otlp) = Receiver::start().await;
    let port = free_port();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut app = std::process::Command::new(crate::support::python3())
        .arg(root.join("docs/verify/python/traced.py"))
        .env("HOOKINBOX_DESTINATION_SECRET", DEST_SECRET)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp}"))
        .env("OTEL_SERVICE_NAME", "shop-app")
        .env(BATCH_DELAY.0, BATCH_DELAY.1)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("python3 runs docs/verify/python/traced.py");
    crate::support::eventually_sync(
        "traced.py listens",
        Duration::from_secs(15),
        Duration::from_millis(50),
        || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map(|_| ())
                .map_err(|e| format!("{e} (its libraries: {})", crate::support::PYTHON_SETUP))
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let telemetry = format!("[telemetry]\nendpoint = \"http://{otlp}\"\n\n");
    let text = config(dir.path(), &telemetry, &format!("http://127.0.0.1:{port}/"))
        + &format!("destination_secret = \"{DEST_SECRET}\"\n");
    let server = BinaryServer::start(&write_config(dir.path(), &text), &[BATCH_DELAY], None);
    send(&server, "ord_app").await;
    server
        .delivered(ADMIN_TOKEN, "shop", "ord_app", Duration::from_secs(10))
        .await;

    // The receipt, the attempt and the app's span.
    let spans = receiver.wait_for(3).await;
    let _ = app.kill();
    let _ = app.wait();
    println!("{}", render(&spans));
    let theirs: Vec<&Got> = spans.iter().filter(|s| s.service == "shop-app").collect();
    assert_eq!(theirs.len(), 1, "{spans:#?}");
    let attempt = spans
        .iter()
        .find(|s| s.span.kind == SpanKind::Client as i32)
        .expect("the attempt's span");
    assert_eq!(theirs[0].span.name, "handle webhook");
    assert_eq!(theirs[0].trace_id(), attempt.trace_id());
    assert_eq!(theirs[0].parent(), attempt.span_id());
    assert_eq!(theirs[0].attr("order.id").as_deref(), Some("ord_app"));
}

/// A pass that fetches an event Stripe could not deliver is a span, and
/// the fetched event's trace starts at `reconcile stripe`, its attempt a
/// child of that.
#[tokio::test]
async fn a_reconcile_pass_is_a_span_and_a_fetched_event_s_trace_starts_at_it() {
    const KEY: &str = "rk_test_fake_0123456789";
    let (receiver, otlp) = Receiver::start().await;
    let stripe = crate::providers::FakeStripe::start(KEY);
    let app = Destination::start(Mode::Ok).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let lost = stripe.event(0, now - 60, false);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n[telemetry]\nendpoint = \"http://{otlp}\"\n\n\
         [[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecret = \"whsec_stripe_endpoint_secret\"\n\
         destination = \"{}\"\n\n[source.reconcile]\ntoken = \"{KEY}\"\nendpoint = \"we_1Fake\"\n\
         interval = \"1h\"\napi_base = \"{}\"\n",
        server_section(dir.path()),
        app.url(),
        stripe.url()
    );
    let server = BinaryServer::start(&write_config(dir.path(), &text), &[BATCH_DELAY], None);
    let report = server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reconcile/stripe", None)
        .await;
    assert_eq!(report.json["fetched"], 1, "{:?}", report.json);
    app.wait_for(1, Duration::from_secs(10)).await;

    let spans = receiver.wait_for(2).await;
    let fetched = spans
        .iter()
        .find(|s| s.span.name == "reconcile stripe")
        .expect("the fetched event's root");
    assert!(fetched.span.parent_span_id.is_empty());
    assert_eq!(
        fetched.attr("hookinbox.event_id").as_deref(),
        Some(lost.id.as_str())
    );
    let attempt = spans
        .iter()
        .find(|s| s.span.name == "deliver stripe")
        .expect("its attempt");
    assert_eq!(attempt.parent(), fetched.span_id());
    assert_eq!(attempt.trace_id(), fetched.trace_id());
    let spans = receiver.wait_for_named(&["reconcile pass"]).await;
    let pass = spans
        .iter()
        .find(|s| s.span.name == "reconcile pass")
        .unwrap();
    assert_eq!(pass.attr("hookinbox.source").as_deref(), Some("stripe"));
    assert_eq!(
        pass.attr("hookinbox.reconcile.fetched").as_deref(),
        Some("1")
    );
}
