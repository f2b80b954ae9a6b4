//! What the listeners record: connections open, evicted, left waiting at
//! the cap, and failed TLS handshakes, per listener.

use super::Metrics;
use crate::metrics::labels::ListenerLabel;
use crate::words::Listener;

impl Metrics {
    /// A connection opened (`+1`) or closed (`-1`) on `listener`.
    pub fn connection(&self, listener: Listener, delta: i64) {
        self.inner
            .open_connections
            .get_or_create(&ListenerLabel { listener })
            .inc_by(delta);
    }

    pub fn tls_handshake_failed(&self, listener: Listener) {
        self.inner
            .tls_handshake_failures
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }

    /// A waiting connection was closed to admit a new one.
    pub fn connection_evicted(&self, listener: Listener) {
        self.inner
            .connections_evicted
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }

    pub fn connection_limit_wait(&self, listener: Listener) {
        self.inner
            .connection_limit_waits
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }
}
