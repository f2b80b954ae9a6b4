//! Traces (`[telemetry]`): a trace per event, from the provider's request
//! to the app's answer, exported over OTLP/HTTP. Owns the SDK's provider
//! (its batch thread sends with a blocking client, off the runtime) and
//! the spans hookinbox records: the receipt of an event (`ingest`, or a
//! reconcile pass's fetch), a span per delivery attempt as its child, the
//! replay that starts a round's trace of its own, the `traceparent` each
//! attempt carries to the app, and the runs of the tasks (sweeps,
//! reconcile passes, checkpoints), each a trace of its own.
//!
//! Without `[telemetry]` the handle is empty: no span is built, no header
//! added, no thread started, no connection made.
//!
//! The receipt's span is recorded once the event is durable, with the
//! times it passed each step: its ids are the event's ([`ids`]), known
//! only once it is stored, and a duplicate's span joins the trace of the
//! event it repeats.

pub mod ids;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    Sampler, SamplingDecision, SdkTracerProvider, ShouldSample, SpanData, SpanExporter, Tracer,
};

use crate::config::TelemetryConfig;
use crate::metrics::Metrics;
pub use ids::EventTrace;

/// `service.name` when neither the config nor `OTEL_SERVICE_NAME` says.
const SERVICE_NAME: &str = "hookinbox";
/// The instrumentation scope every span is recorded under.
const SCOPE: &str = "hookinbox";

/// Why traces cannot be exported as configured; the app does not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("[telemetry]: the OTLP exporter cannot be built: {0}")]
    Exporter(String),
}

/// The app's traces: empty (`[telemetry]` absent) or the SDK's provider.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Telemetry {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    provider: SdkTracerProvider,
    tracer: Tracer,
    /// Decides, from an event's trace id, whether the event is traced.
    ratio: Sampler,
    trace_url: Option<String>,
    metrics: Metrics,
}

impl Telemetry {
    /// No traces: what the app runs with when `[telemetry]` is absent.
    pub fn off() -> Telemetry {
        Telemetry::default()
    }

    /// Starts the SDK's provider and its batch thread when `config` is
    /// given. The exporter reads the `OTEL_EXPORTER_OTLP_*` variables for
    /// what the config leaves out (endpoint, headers, timeout), the
    /// resource `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
    pub fn start(
        config: Option<&TelemetryConfig>,
        metrics: &Metrics,
    ) -> Result<Telemetry, TelemetryError> {
        let Some(config) = config else {
            return Ok(Telemetry::off());
        };
        // The exporter's client speaks TLS through rustls with ring, as
        // every client of hookinbox does.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
        if let Some(endpoint) = &config.endpoint {
            let path = format!("{}/v1/traces", endpoint.path().trim_end_matches('/'));
            let mut url = endpoint.clone();
            url.set_path(&path);
            exporter = exporter.with_endpoint(url.to_string());
        }
        let exporter = exporter
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let service_name = config
            .service_name
            .clone()
            .or_else(|| std::env::var("OTEL_SERVICE_NAME").ok())
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| SERVICE_NAME.to_owned());
        let resource = Resource::builder()
            .with_service_name(service_name)
            .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
            .with_attributes(
                config
                    .resource
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
            )
            .build();
        let ratio = Sampler::TraceIdRatioBased(config.sample_ratio);
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Counted {
                inner: exporter,
                metrics: metrics.clone(),
            })
            .with_sampler(Sampler::ParentBased(Box::new(ratio.clone())))
            .with_id_generator(ids::EventIds::default())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer(SCOPE);
        Ok(Telemetry {
            inner: Some(Arc::new(Inner {
                provider,
                tracer,
                ratio,
                trace_url: config.trace_url.clone(),
                metrics: metrics.clone(),
            })),
        })
    }

    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Exports what is queued and stops the batch thread. Blocks (up to
    /// the exporter's timeout): call it off the runtime, once, at the end.
    pub fn shutdown(&self) {
        if let Some(inner) = &self.inner
            && let Err(e) = inner.provider.shutdown()
        {
            tracing::warn!(error = %e, "traces queued at shutdown were not all exported");
        }
    }

    /// The event's trace id in hex and, with `trace_url`, the link to it;
    /// `None` without `[telemetry]` or when the event is not sampled.
    pub fn trace_of(&self, id: &str) -> Option<TraceLink> {
        let inner = self.inner.as_ref()?;
        let trace = EventTrace::of(id);
        inner.sampled(trace).then(|| {
            let trace_id = trace.trace_id.to_string();
            TraceLink {
                url: inner
                    .trace_url
                    .as_ref()
                    .map(|t| t.replace(crate::config::TRACE_ID_FIELD, &trace_id)),
                trace_id,
            }
        })
    }

    /// Records the receipt of an event: a root span with the event's ids
    /// (a new event), or a span in the trace of the event it repeats (a
    /// duplicate). A `traceparent` the sender sent becomes a link.
    pub fn received(&self, receipt: Receipt<'_>) {
        let Some(inner) = &self.inner else {
            return;
        };
        let trace = EventTrace::of(receipt.id);
        // Decided before anything is built: most events are not traced at
        // a low ratio, and a duplicate's span follows its event's verdict.
        if !inner.sampled(trace) {
            return;
        }
        let sender = TraceContextPropagator::new().extract(&Headers(receipt.headers));
        let links = match sender.span().span_context() {
            sc if sc.is_valid() => vec![Link::with_context(sc.clone())],
            _ => Vec::new(),
        };
        let (name, kind, http) = if receipt.fetched {
            // Fetched by a reconcile pass from the provider's API.
            (
                format!("reconcile {}", receipt.source),
                SpanKind::Internal,
                Vec::new(),
            )
        } else {
            let http = vec![
                KeyValue::new("http.request.method", "POST"),
                KeyValue::new("http.route", "/in/{source}"),
                KeyValue::new("http.response.status_code", 200),
            ];
            (
                format!("POST /in/{}", receipt.source),
                SpanKind::Server,
                http,
            )
        };
        let builder = inner
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(receipt.started)
            .with_links(links)
            .with_attributes(http.into_iter().chain([
                KeyValue::new("hookinbox.source", receipt.source.to_owned()),
                KeyValue::new("hookinbox.id", receipt.id.to_owned()),
                KeyValue::new("hookinbox.event_id", receipt.event_id.to_owned()),
                KeyValue::new(
                    "hookinbox.event_type",
                    receipt.event_type.unwrap_or_default().to_owned(),
                ),
                KeyValue::new("hookinbox.duplicate", receipt.duplicate),
            ]));
        let mut span = if receipt.duplicate {
            // A child of the event's receipt: the provider's retry, seen.
            inner
                .tracer
                .build_with_context(builder, &inner.event_parent(trace))
        } else {
            ids::with_ids(trace, || {
                inner.tracer.build_with_context(builder, &Context::new())
            })
        };
        if !span.is_recording() {
            return;
        }
        span.add_event_with_timestamp("verified", receipt.verified, Vec::new());
        span.add_event_with_timestamp(
            if receipt.duplicate {
                "deduplicated"
            } else {
                "durable"
            },
            receipt.stored,
            Vec::new(),
        );
        finish(span, &inner.metrics, None, Some(receipt.answered));
    }

    /// The span of one delivery attempt of event `id`, started now, a child
    /// of the root of its round's trace: the event's receipt (round 0), or
    /// the replay that began round `round` at `round_started_ms`, whose
    /// span the round's first attempt records (linked to the receipt). Its
    /// `traceparent` goes on the request. Empty without `[telemetry]`.
    pub fn attempt(&self, at: AttemptOf<'_>) -> AttemptSpan {
        let Some(inner) = &self.inner else {
            return AttemptSpan { span: None };
        };
        let AttemptOf {
            id,
            route,
            attempt,
            round,
            round_started_ms,
        } = at;
        let trace = EventTrace::of_round(id, route, round);
        if round > 0 && attempt == 1 {
            inner.replayed(id, route, round, round_started_ms, trace);
        }
        let parent = inner.event_parent(trace);
        let builder = inner
            .tracer
            .span_builder(format!("deliver {route}"))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("hookinbox.route", route.to_owned()),
                KeyValue::new("hookinbox.id", id.to_owned()),
                KeyValue::new("hookinbox.attempt", i64::from(attempt)),
                KeyValue::new("hookinbox.round", i64::from(round)),
            ]);
        let span = inner.tracer.build_with_context(builder, &parent);
        let sampled = span.span_context().is_sampled();
        AttemptSpan {
            span: sampled.then(|| (span, inner.metrics.clone())),
        }
    }
}

impl Telemetry {
    /// The span of a task's run (a sweep, a reconcile pass), started now:
    /// a trace of its own, sampled at the ratio. `attributes` are text.
    pub fn task(&self, name: &'static str, attributes: &[(&'static str, &str)]) -> TaskSpan {
        let Some(inner) = &self.inner else {
            return TaskSpan { span: None };
        };
        let builder = inner
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(
                attributes
                    .iter()
                    .map(|(k, v)| KeyValue::new(*k, (*v).to_owned())),
            );
        let span = inner.tracer.build_with_context(builder, &Context::new());
        TaskSpan {
            span: span.is_recording().then(|| (span, inner.metrics.clone())),
        }
    }
}

impl Telemetry {
    /// Records a checkpoint that just ended (`checkpointed.took` ago to
    /// now) as a span of its own. Called from the store's threads.
    pub fn checkpoint(&self, checkpointed: &crate::store::Checkpointed) {
        let Some(inner) = &self.inner else {
            return;
        };
        let ended = SystemTime::now();
        let builder = inner
            .tracer
            .span_builder("checkpoint")
            .with_kind(SpanKind::Internal)
            .with_start_time(ended - checkpointed.took)
            .with_attributes([
                KeyValue::new("hookinbox.lsn", checkpointed.lsn as i64),
                KeyValue::new("hookinbox.checkpoint.beside", checkpointed.beside),
            ]);
        let span = inner.tracer.build_with_context(builder, &Context::new());
        if !span.is_recording() {
            return;
        }
        finish(
            span,
            &inner.metrics,
            checkpointed.failure.as_deref(),
            Some(ended),
        );
    }
}

/// A task's run as a span; empty when not traced.
pub struct TaskSpan {
    span: Option<(opentelemetry_sdk::trace::Span, Metrics)>,
}

impl TaskSpan {
    /// A count the run came to (`hookinbox.swept.delivered`, …).
    pub fn count(&mut self, key: &'static str, value: u64) {
        if let Some((span, _)) = &mut self.span {
            span.set_attribute(KeyValue::new(key, value as i64));
        }
    }

    /// Ends the span now, with an error status when the run failed.
    pub fn end(self, failure: Option<&str>) {
        if let Some((span, metrics)) = self.span {
            finish(span, &metrics, failure, None);
        }
    }
}

/// Ends a recording `span` (at `at`, else now), with an error status
/// saying `failure` if there is one, and counts it.
fn finish(
    mut span: opentelemetry_sdk::trace::Span,
    metrics: &Metrics,
    failure: Option<&str>,
    at: Option<SystemTime>,
) {
    if let Some(failure) = failure {
        span.set_status(Status::error(failure.to_owned()));
    }
    match at {
        Some(at) => span.end_with_timestamp(at),
        None => span.end(),
    }
    metrics.span_ended();
}

impl Inner {
    /// Records the span of the replay that began round `round` of `id`'s
    /// delivery to `route` at `started_ms`: the root of the round's trace,
    /// linked to the event's receipt.
    fn replayed(&self, id: &str, route: &str, round: u32, started_ms: u64, trace: EventTrace) {
        if !self.sampled(trace) {
            return;
        }
        let receipt = EventTrace::of(id);
        let first = SpanContext::new(
            receipt.trace_id,
            receipt.root,
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let builder = self
            .tracer
            .span_builder(format!("replay {route}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(crate::clock::from_unix_ms(started_ms))
            .with_links(vec![Link::with_context(first)])
            .with_attributes([
                KeyValue::new("hookinbox.id", id.to_owned()),
                KeyValue::new("hookinbox.route", route.to_owned()),
                KeyValue::new("hookinbox.round", i64::from(round)),
            ]);
        let span = ids::with_ids(trace, || {
            self.tracer.build_with_context(builder, &Context::new())
        });
        if span.is_recording() {
            finish(span, &self.metrics, None, None);
        }
    }

    /// Whether the event of `trace` is traced: the ratio sampler's verdict
    /// on its trace id, the same every time it is asked.
    fn sampled(&self, trace: EventTrace) -> bool {
        let verdict =
            self.ratio
                .should_sample(None, trace.trace_id, "", &SpanKind::Internal, &[], &[]);
        verdict.decision == SamplingDecision::RecordAndSample
    }

    /// The receipt of the event of `trace`, as a remote parent: sampled as
    /// the ratio says of its trace id.
    fn event_parent(&self, trace: EventTrace) -> Context {
        let flags = if self.sampled(trace) {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let parent = SpanContext::new(
            trace.trace_id,
            trace.root,
            flags,
            true,
            TraceState::default(),
        );
        Context::new().with_remote_span_context(parent)
    }
}

/// An event's trace, as the event page and `events show` give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLink {
    /// 32 hex digits.
    pub trace_id: String,
    /// `trace_url` with the id in it.
    pub url: Option<String>,
}

/// Which attempt of which event an attempt span is.
pub struct AttemptOf<'a> {
    /// The event's public id.
    pub id: &'a str,
    pub route: &'a str,
    /// 1 for the round's first.
    pub attempt: u32,
    /// 0 until the delivery is replayed.
    pub round: u32,
    /// When the round began (the replay's time for a replayed round).
    pub round_started_ms: u64,
}

/// What the receipt of one event was, for its span.
pub struct Receipt<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub duplicate: bool,
    /// Fetched from the provider's API by a reconcile pass, not received.
    pub fetched: bool,
    /// The request's headers: a sender's `traceparent` is linked.
    pub headers: &'a http::HeaderMap,
    pub started: SystemTime,
    pub verified: SystemTime,
    pub stored: SystemTime,
    pub answered: SystemTime,
}

/// The span of one attempt; empty when the event is not traced.
pub struct AttemptSpan {
    span: Option<(opentelemetry_sdk::trace::Span, Metrics)>,
}

impl AttemptSpan {
    /// The span's trace id and span id in hex, for the attempt's log lines;
    /// `None` when empty.
    pub fn ids(&self) -> Option<(String, String)> {
        self.span.as_ref().map(|(span, _)| {
            let sc = span.span_context();
            (sc.trace_id().to_string(), sc.span_id().to_string())
        })
    }

    /// The trace context headers for the attempt's request or message
    /// (`traceparent`, and `tracestate` when there is one); none when empty.
    pub fn headers(&self) -> Vec<(String, String)> {
        let mut headers = Pairs(Vec::new());
        if let Some((span, _)) = &self.span {
            let cx = Context::new().with_remote_span_context(span.span_context().clone());
            TraceContextPropagator::new().inject_context(&cx, &mut headers);
        }
        headers.0
    }

    /// Ends the span with how the attempt went: `status` (an HTTP answer's),
    /// the outcome's name, and an error with `failure` when it failed.
    pub fn end(self, status: Option<u16>, outcome: &str, failure: Option<&str>) {
        let Some((mut span, metrics)) = self.span else {
            return;
        };
        if let Some(status) = status {
            span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        span.set_attribute(KeyValue::new("hookinbox.outcome", outcome.to_owned()));
        finish(span, &metrics, failure, None);
    }
}

/// A request's headers, for the propagator to read a sender's context.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Headers being made, for the propagator to write a context into.
struct Pairs(Vec<(String, String)>);

impl Injector for Pairs {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

/// The OTLP exporter, each export counted: spans the receiver took, and
/// spans lost (it could not be reached, or refused them).
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    metrics: Metrics,
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("inner", &self.inner)
            .finish()
    }
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        self.metrics.spans_exported(spans, result.is_ok());
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
