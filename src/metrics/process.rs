//! `process_*`: the process's CPU, memory, file descriptors and start time,
//! read from `/proc` at each scrape.
//!
//! Owns only these families, under the names Prometheus's own clients give
//! them (no `hookinbox_` prefix). Refuses to fail a scrape: where `/proc`
//! cannot be read (not Linux, or hidden), the families are left out and the
//! rest of the exposition stays.

/// `process_*`, the names Prometheus's own clients use, read from `/proc`
/// at each scrape: CPU, memory, file descriptors, start time.
#[derive(Debug)]
pub(super) struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        fn emit(
            encoder: &mut prometheus_client::encoding::DescriptorEncoder,
            name: &str,
            help: &str,
            metric: impl EncodeMetric,
        ) -> Result<(), std::fmt::Error> {
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
        }
        // Not on Linux, or /proc hidden: no process metrics, the rest stays.
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            emit(
                &mut encoder,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                ConstCounter::new(cpu),
            )?;
            emit(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                ConstGauge::new((stat.rss * procfs::page_size()) as i64),
            )?;
            emit(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                ConstGauge::new(stat.vsize as i64),
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                emit(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    ConstGauge::new(boot as f64 + stat.starttime as f64 / ticks),
                )?;
            }
        }
        if let Ok(open) = me.fd_count() {
            emit(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                ConstGauge::new(open as i64),
            )?;
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            emit(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                ConstGauge::new(max as i64),
            )?;
        }
        Ok(())
    }
}
