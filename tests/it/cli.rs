//! The binary's command line: `config check`, `config default`, `serve` with
//! the embedded default, SIGTERM, and `send`.

use std::process::Command;
use std::time::Duration;

use crate::support::{
    BinaryServer, STANDARD_SECRET, eventually, read_all, server_section, standard_source,
    write_config,
};

fn hookinbox(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn config_check_prints_the_effective_config_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"very-secret-value\"\ntolerance = \"1m\"\n",
    );
    let out = hookinbox(&["config", "check", "--config", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("very-secret-value") && !stderr.contains("very-secret-value"));
    assert!(
        stdout.contains("name = \"gh\"") && stdout.contains("[redacted]"),
        "{stdout}"
    );
    assert!(
        stderr.contains("inline"),
        "the inline secret is warned about: {stderr}"
    );
}

/// Regression: `config check` printed a destination URL whole, with the
/// password in its user info and the token in its query.
#[test]
fn config_check_never_prints_url_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        r#"[alerts]
url = "https://bot:alert-pw@hooks.example.com/services/T0/B0/alert-path-key?k=alert-token"

[[source]]
name = "shop"
kind = "github"
secret_env = "SHOP_SECRET"
destination = "http://app-user:dest-pw@127.0.0.1:9000/hooks/in?key=dest-token&x=1#frag-token"

[[source]]
name = "calls"
kind = "twilio"
secret_env = "SHOP_SECRET"
public_url = "https://tw-user:public-pw@inbox.example.com/in/calls"
"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["config", "check", "--config", path.to_str().unwrap()])
        .env("SHOP_SECRET", "shop-secret-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for secret in [
        "dest-pw",
        "dest-token",
        "app-user",
        "frag-token",
        "alert-pw",
        "alert-token",
        "alert-path-key",
        "public-pw",
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} is shown:\n{stdout}{stderr}"
        );
    }
    // Where deliveries go stays readable.
    assert!(
        stdout.contains(
            "destination = \"http://[redacted]@127.0.0.1:9000/hooks/in?[redacted]#[redacted]\""
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("url = \"https://[redacted]@hooks.example.com/[redacted]?[redacted]\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("public_url = \"https://[redacted]@inbox.example.com/in/calls\""),
        "{stdout}"
    );

    // A destination URL that does not parse is not echoed in the error either.
    let path = write_config(
        dir.path(),
        r#"[[source]]
name = "shop"
kind = "github"
secret = "x"
destination = "http://app-user:dest-pw@127.0.0.1:99999/?key=dest-token"
"#,
    );
    let out = hookinbox(&["config", "check", "--config", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("source[0].destination"), "{stderr}");
    assert!(
        !stderr.contains("dest-pw") && !stderr.contains("dest-token"),
        "{stderr}"
    );
}

/// Regression: an absurd duration passed `config check` and then panicked
/// the server; it is now a config error naming the key (exit 2).
#[test]
fn config_check_refuses_an_absurd_duration_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        "[server]\nheader_read_timeout = \"500000000000y\"\n",
    );
    let out = hookinbox(&["config", "check", "--config", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("server.header_read_timeout")
            && stderr.contains("500000000000y")
            && stderr.contains("1h"),
        "{stderr}"
    );
}

#[test]
fn config_check_errors_name_file_key_and_problem_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "[server]\nlisten = \"not-an-address\"\n");
    let out = hookinbox(&["config", "check", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(path.to_str().unwrap())
            && stderr.contains("server.listen")
            && stderr.contains("not-an-address"),
        "{stderr}"
    );
}

#[test]
fn config_default_is_the_embedded_file_and_it_checks() {
    let out = hookinbox(&["config", "default"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        hookinbox::config::DEFAULT_TOML
    );
    let out = hookinbox(&["config", "check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `hookinbox serve` with no file: the embedded default serves (here on an
/// ephemeral port through the environment), generates the demo secret once
/// and names its file, `send --source demo` is accepted, SIGTERM exits 0.
#[tokio::test]
async fn serve_with_the_embedded_default_generates_a_secret_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_text = data.to_str().unwrap().to_owned();
    let env = [
        ("HOOKINBOX_LISTEN", "127.0.0.1:0".to_owned()),
        ("HOOKINBOX_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
        ("HOOKINBOX_DATA_DIR", data_text),
    ];
    // Through the same runner as other tests, but without --config.
    let serve = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookinbox"));
        cmd.arg("serve")
            .envs(env.clone())
            .env("HOOKINBOX_LOG_FORMAT", "json")
            .stdout(std::process::Stdio::piped());
        BinaryServer::start_command(cmd)
    };
    let mut server = serve();
    let secret_file = data.join("secrets/demo.secret");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert!(secret.starts_with("whsec_"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&secret_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    let url = server.url("/in/demo");
    let send_env = env.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args([
                "send",
                "--source",
                "demo",
                "--url",
                &url,
                "--repeat",
                "3",
                "--event-id",
                "same",
            ])
            .envs(send_env)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("\"duplicate\":true").count(), 2, "{stdout}");
    // The generated admin token (0600) opens the admin API.
    let token_file = data.join("secrets/admin.token.secret");
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let admin = server.admin.clone();
    let (code, out, err) = {
        let token = token.clone();
        tokio::task::spawn_blocking(move || ops(&admin, token.trim(), &["stats".to_owned()]))
            .await
            .unwrap()
    };
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("demo")), "{out}");
    assert!(server.terminate().success(), "{}", server.log_text());
    // Output is a pipe here, as under systemd, where it goes to the journal:
    // with JSON logs the announcements are log lines that name the files
    // holding the generated secrets, never the secrets themselves
    // (regression: both were printed in clear), and stdout stays empty of
    // anything a log shipper could not parse.
    let stdout = server.stdout_text();
    let log = server.log_text();
    assert!(stdout.trim().is_empty(), "{stdout}");
    let announced = |path: &std::path::Path| {
        log.lines().any(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["path"] == path.to_str().unwrap()
        })
    };
    assert!(announced(&secret_file), "{log}");
    assert!(log.contains("hookinbox send"), "{log}");
    assert!(
        announced(&token_file),
        "the admin token's file is named: {log}"
    );
    assert!(
        !log.contains(secret.trim()) && !log.contains(token.trim()),
        "a secret reached a pipe: {log}"
    );
    assert_eq!(read_all(&data).await.len(), 1);

    // The second start reuses the secret and announces nothing.
    let mut server = serve();
    assert!(server.terminate().success());
    let stdout = server.stdout_text();
    assert!(
        !stdout.contains(secret.trim()) && !stdout.contains("generated"),
        "{stdout}"
    );
}

#[test]
fn send_reports_refusals_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}",
            server_section(&dir.path().join("data")),
            standard_source("demo")
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let out = hookinbox(&[
        "send",
        "--provider",
        "standard",
        "--secret",
        "whsec_aG9va2luYm94LXdyb25nLXNlY3JldC0wMDAwMDA=",
        "--url",
        &server.url("/in/demo"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(" 401 "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_under_concurrency_stores_each_event_once_and_reports_refused_connections() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(
        dir.path(),
        &format!("{}{}", server_section(&data), standard_source("demo")),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let url = server.url("/in/demo");
    let config_arg = config.to_str().unwrap().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        hookinbox(&[
            "send",
            "--source",
            "demo",
            "--config",
            &config_arg,
            "--url",
            &url,
            "--repeat",
            "300",
            "--concurrency",
            "16",
            "--quiet",
        ])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sent 300 ") && stderr.contains("200×300 (0 duplicates)"),
        "{stderr}"
    );
    assert!(server.terminate().success(), "{}", server.log_text());
    assert_eq!(read_all(&data).await.len(), 300);

    // Nothing listens there: every request is an error, exit 1. The port
    // stays bound (not listening) meanwhile, so no other test's server can
    // take it, as one once took the stopped server's port.
    let closed = crate::destination::Destination::reserve();
    let url = format!("http://{}/in/demo", closed.addr);
    let out = hookinbox(&[
        "send",
        "--provider",
        "standard",
        "--secret",
        "whsec_aG9va2luYm94LXdyb25nLXNlY3JldC0wMDAwMDA=",
        "--url",
        &url,
        "--repeat",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // "<n> <id> error <latency> <cause>"
    let errors = stdout
        .lines()
        .filter(|l| l.split(' ').nth(2) == Some("error"))
        .count();
    assert_eq!(errors, 2, "{stdout}");
    assert!(stdout.contains("cannot connect to 127.0.0.1:"), "{stdout}");
}

/// `hookinbox send --repeat 200 | head -1` stopped at the closed pipe and
/// exited 0 having sent a few: the sends are the job, the lines only its
/// report, so it sends every one and exits by their answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_into_a_closed_pipe_still_sends_every_event() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(
        dir.path(),
        &format!("{}{}", server_section(&data), standard_source("demo")),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let url = server.url("/in/demo");
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(["send", "--source", "demo", "--config"])
            .arg(&config)
            .args(["--url", &url, "--repeat", "200"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // As `head -1` does: one line read, then the pipe closed.
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert!(first.starts_with("0 "), "{first}");
        drop(stdout);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(
        stderr.contains("sent 200 ") && stderr.contains("200×200"),
        "{stderr}"
    );
    assert!(server.terminate().success(), "{}", server.log_text());
    assert_eq!(read_all(&data).await.len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_sends_the_body_file_byte_for_byte_and_puts_the_event_type_where_the_provider_does() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let secret = "whsec_send_bytes_test_0123456789";
    let config = write_config(
        dir.path(),
        &format!(
            "{}[[source]]\nname = \"pay\"\nkind = \"stripe\"\nsecret = \"{secret}\"\n",
            server_section(&data)
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    // Spacing, key order and an escape a re-serialiser would change.
    let given = "{\n  \"object\": \"event\",\n  \"id\": \"evt_given\",\n  \"type\": \"invoice.paid\",\n  \"data\": {\"z\": 1, \"a\": \"caf\\u00e9\"}\n}\n";
    let file = dir.path().join("event.json");
    std::fs::write(&file, given).unwrap();
    let url = server.url("/in/pay");
    let send = |extra: &[&str]| {
        let mut args = vec![
            "send",
            "--provider",
            "stripe",
            "--secret",
            secret,
            "--url",
            &url,
            "--body-file",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        hookinbox(&args)
    };
    let out = send(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = send(&["--event-id", "evt_second", "--event-type", "invoice.voided"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A provider whose events carry no type: refused, nothing sent.
    let out = hookinbox(&[
        "send",
        "--provider",
        "twilio",
        "--secret",
        "x",
        "--url",
        &url,
        "--event-type",
        "sms",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("twilio events carry no event type"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(server.terminate().success(), "{}", server.log_text());

    let stored = read_all(&data).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(
        stored[0].record.body,
        given.as_bytes(),
        "the file, byte for byte"
    );
    assert_eq!(stored[1].record.event_id, "evt_second");
    assert_eq!(
        stored[1].record.event_type.as_deref(),
        Some("invoice.voided")
    );
    assert_eq!(
        String::from_utf8(stored[1].record.body.clone()).unwrap(),
        given
            .replace("evt_given", "evt_second")
            .replace("invoice.paid", "invoice.voided"),
        "only the id and the type change"
    );
}

/// `sudo hookinbox stats` on a server's machine: the address and token come
/// from the server's config, which is read without its sources (their
/// secrets live in the service's environment, not the operator's).
#[test]
fn operator_commands_find_their_server_from_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = crate::support::free_port();
    let config = write_config(
        dir.path(),
        &format!(
            r#"[server]
listen = "127.0.0.1:0"
admin_listen = "0.0.0.0:{port}"
data_dir = {:?}

[[source]]
name = "shop"
kind = "standard"
secret_env = "SHOP_SECRET_ONLY_IN_THE_SERVICE"
"#,
            data.display().to_string()
        ),
    );
    let mut server = BinaryServer::start(
        &config,
        &[("SHOP_SECRET_ONLY_IN_THE_SERVICE", STANDARD_SECRET)],
        None,
    );
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(args)
            .env_remove("HOOKINBOX_ADMIN_URL")
            .env_remove("HOOKINBOX_ADMIN_TOKEN")
            .env_remove("HOOKINBOX_CONFIG")
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let path = config.to_str().unwrap();
    // --config: the admin address (0.0.0.0 → loopback) and the token the
    // server generated in its data dir.
    let (code, out, err) = run(&["stats", "--config", path], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("shop")), "{out}");
    // HOOKINBOX_CONFIG does the same.
    let (code, _, err) = run(&["destinations", "list"], &[("HOOKINBOX_CONFIG", path)]);
    assert_eq!(code, 0, "{err}");
    // Explicit flags still win: another address is unreachable (3), another
    // token is refused (4).
    let (code, _, _) = run(
        &["stats", "--config", path, "--admin", "http://127.0.0.1:1"],
        &[],
    );
    assert_eq!(code, 3);
    let wrong = dir.path().join("wrong.token");
    std::fs::write(&wrong, "not-the-admin-token-0000").unwrap();
    let (code, _, _) = run(
        &[
            "stats",
            "--config",
            path,
            "--token-file",
            wrong.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 4);
    // A config that cannot be read says so, and how to do without it.
    let (code, _, err) = run(&["stats", "--config", "/nonexistent/hookinbox.toml"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/nonexistent/hookinbox.toml") && err.contains("--admin"),
        "{err}"
    );
    assert!(server.terminate().success(), "{}", server.log_text());
}

#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    for (shell, marker) in [
        ("bash", "complete -F _hookinbox"),
        ("zsh", "#compdef hookinbox"),
        ("fish", "complete -c hookinbox"),
    ] {
        let out = hookinbox(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(marker), "{shell}: {text}");
        // Subcommands and their flags are there.
        assert!(text.contains("dlq") && text.contains("dry-run"), "{shell}");
    }
    let out = hookinbox(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));

    let dir = tempfile::tempdir().unwrap();
    let out = hookinbox(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert!(page("hookinbox.1").contains(".TH hookinbox 1"));
    let dlq = page("hookinbox-dlq-ignore.1");
    assert!(
        dlq.contains("\\-\\-note") && dlq.contains("kept with each event"),
        "{dlq}"
    );
}

/// `events tail` and `stats --watch` keep running and print what changes;
/// read from their pipes until what is expected shows up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_tail_follows_new_events_and_stats_watch_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"tail-test-token-0123456789\"\n\n{}",
            server_section(&dir.path().join("data")),
            standard_source("demo")
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let spawn = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(args)
            .args(["--admin", &server.admin])
            .env("HOOKINBOX_ADMIN_TOKEN", "tail-test-token-0123456789")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let rx = crate::support::lines_of(child.stdout.take().unwrap());
        (child, rx)
    };
    let until = |rx: &std::sync::mpsc::Receiver<String>, want: &dyn Fn(&str) -> bool| {
        crate::support::line_where(rx, "the line expected", Duration::from_secs(10), want)
    };
    let send = |id: &str| {
        let out = hookinbox(&[
            "send",
            "--source",
            "demo",
            "--config",
            config.to_str().unwrap(),
            "--url",
            &server.url("/in/demo"),
            "--event-id",
            id,
            "--quiet",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    send("before_tail");
    let (mut tail, lines) = spawn(&["events", "tail"]);
    until(&lines, &|l| l.contains("before_tail"));
    send("during_tail_1");
    send("during_tail_2");
    until(&lines, &|l| l.contains("during_tail_1"));
    until(&lines, &|l| l.contains("during_tail_2"));
    assert!(tail.try_wait().unwrap().is_none(), "tail keeps following");
    tail.kill().unwrap();
    tail.wait().unwrap();

    let (mut watch, lines) = spawn(&["stats", "--watch", "200ms", "--json"]);
    let received = |line: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["sources"]["demo"]["since_start"]["received"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(received(&until(&lines, &|l| l.starts_with('{'))), 3);
    send("during_watch");
    let later = until(&lines, &|l| l.starts_with('{') && received(l) == 4);
    assert!(later.contains("\"demo\""));
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert!(server.terminate().success(), "{}", server.log_text());
}

/// Runs an operator command against `admin` with `token`; returns
/// (exit code, stdout, stderr).
/// Runs an operator command of the real binary against `admin`; returns
/// (exit code, stdout, stderr).
pub(crate) fn ops(admin: &str, token: &str, args: &[String]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(args)
        .args(["--admin", admin])
        .env("HOOKINBOX_ADMIN_TOKEN", token)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The real server with one source, `shop`, whose app refuses refunds
/// (400: dead at once): `cli_0` (`order.paid`) delivered, `cli_1` and
/// `cli_2` (`order.refund`) dead-lettered.
struct Operated {
    server: crate::support::BinaryServer,
    dest: crate::destination::Destination,
    /// The hookinbox ids of `cli_0`, `cli_1`, `cli_2`.
    ids: Vec<String>,
    dir: tempfile::TempDir,
}

const OPS_TOKEN: &str = "cli-test-token-0123456789";

impl Operated {
    async fn start() -> Operated {
        use crate::destination::{Destination, Mode};
        let dir = tempfile::tempdir().unwrap();
        let token = OPS_TOKEN;
        let dest = Destination::start(Mode::RejectBodyWith("refund")).await;
        let config = crate::support::write_config(
            dir.path(),
            &format!(
                r#"{}[admin]
token = "{token}"

{}destination = "{}"
"#,
                crate::support::server_section(&dir.path().join("data")),
                crate::support::standard_source("shop"),
                dest.url()
            ),
        );
        let server = crate::support::BinaryServer::start(&config, &[], None);
        let http = crate::support::client();
        let mut ids = Vec::new();
        for (i, kind) in ["paid", "refund", "refund"].iter().enumerate() {
            let body = format!("{{\"type\":\"order.{kind}\"}}").into_bytes();
            let a = crate::support::post(
                &http,
                &server.url("/in/shop"),
                &crate::support::standard_headers(&format!("cli_{i}"), &body),
                body,
            )
            .await;
            ids.push(a.id().to_owned());
        }
        dest.wait_for(3, Duration::from_secs(10)).await;
        let operated = Operated {
            server,
            dest,
            ids,
            dir,
        };
        // Wait until both refunds are dead-lettered.
        eventually(
            "both refunds are dead-lettered",
            Duration::from_secs(10),
            Duration::from_millis(20),
            async || {
                let (code, out, _) = operated.run(&["dlq", "list", "--json"]).await;
                assert_eq!(code, 0);
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                if v["events"].as_array().unwrap().len() == 2 {
                    Ok(())
                } else {
                    Err(out)
                }
            },
        )
        .await;
        operated
    }

    /// Runs an operator command with the right token; returns (exit code,
    /// stdout, stderr).
    async fn run(&self, args: &[&str]) -> (i32, String, String) {
        let (admin, args) = (
            self.server.admin.clone(),
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || ops(&admin, OPS_TOKEN, &args))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_list_and_stats_show_what_is_stored_and_what_came_since_start() {
    let operated = Operated::start().await;
    let (code, out, _) = operated.run(&["dlq", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("ID") && out.contains("order.refund") && out.contains("400"),
        "{out}"
    );

    let (code, out, _) = operated.run(&["stats"]).await;
    assert_eq!(code, 0, "{out}");
    // Stored counts and since-start counts in their own labelled tables.
    let (stored, since) = out.split_once("since the server started:").expect(&out);
    assert!(stored.starts_with("stored now:"), "{out}");
    let shop_stored = stored.lines().find(|l| l.starts_with("shop")).expect(&out);
    assert_eq!(
        shop_stored.split_whitespace().collect::<Vec<_>>()[..7],
        ["shop", "0", "0", "0", "1", "2", "0"],
        "{out}"
    );
    let shop_since = since.lines().find(|l| l.starts_with("shop")).expect(&out);
    assert_eq!(
        shop_since.split_whitespace().collect::<Vec<_>>()[..4],
        ["shop", "3", "0", "0"],
        "{out}"
    );
    let (_, out, _) = operated.run(&["stats", "--json"]).await;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sources"]["shop"]["stored"]["dead"], 2);
}

/// `--all --json` printed an array of pages here, an array of pages in
/// `audit` and one merged object in `keys list`: every listing now prints
/// one array of its items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_pages_keep_their_cursor_and_a_search_says_how_far_it_looked() {
    let operated = Operated::start().await;
    let ids = &operated.ids;
    let (code, out, _) = operated.run(&["events", "list", "--limit", "2"]).await;
    assert_eq!(code, 0);
    assert!(
        out.lines().last().unwrap().starts_with("more: --cursor "),
        "{out}"
    );
    // Every page with --json: one array of the events, as every listing
    // prints it (this printed an array of pages, `keys list` one object).
    for args in [
        &["events", "list", "--limit", "2", "--all", "--json"][..],
        &[
            "events", "search", "--q", "order", "--limit", "2", "--all", "--json",
        ],
        &["dlq", "list", "--limit", "1", "--all", "--json"],
    ] {
        let (code, out, err) = operated.run(args).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        let all: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
        let got: Vec<&str> = all.iter().map(|e| e["id"].as_str().unwrap()).collect();
        let want: Vec<&str> = match args[0] {
            "dlq" => vec![&ids[2], &ids[1]],
            _ => vec![&ids[2], &ids[1], &ids[0]],
        };
        assert_eq!(got, want, "{args:?}: {out}");
    }
    let (code, out, _) = operated
        .run(&["events", "search", "--match", "/type=order.paid"])
        .await;
    assert_eq!(code, 0);
    assert!(out.contains(&ids[0]) && !out.contains(&ids[1]), "{out}");
    assert!(out.contains("searched 3 payloads back to "), "{out}");
    let (code, _, err) = operated.run(&["events", "search"]).await;
    assert_eq!(code, 2, "{err}");
}

/// Regression: `events show --help` promised headers that only `--json`
/// showed; the table shows the stored headers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_show_prints_the_event_with_its_stored_headers() {
    let operated = Operated::start().await;
    let (code, out, _) = operated.run(&["events", "show", &operated.ids[0]]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("order.paid") && out.contains("delivered"),
        "{out}"
    );
    assert!(out.contains("\nheaders:\n"), "{out}");
    assert!(out.contains("\nwebhook-id: cli_0\n"), "{out}");
}

/// `events show` numbered a replay's first attempt #2 while the app saw
/// `hookinbox-attempt: 1`: each round's attempts count from 1, as the app
/// saw them and as the dashboard's event page groups them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_show_numbers_each_rounds_attempts_as_the_app_saw_them() {
    use crate::destination::Mode;
    let operated = Operated::start().await;
    let id = operated.ids[1].as_str();
    operated.dest.set(Mode::Ok);
    let (code, _, err) = operated.run(&["events", "replay", id]).await;
    assert_eq!(code, 0, "{err}");
    let detail = eventually(
        "the replay's attempt is recorded",
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || {
            let (_, out, _) = operated.run(&["events", "show", id, "--json"]).await;
            let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
            match v["attempt_history"].as_array().map(Vec::len) {
                Some(2) => Ok(v),
                _ => Err(out),
            }
        },
    )
    .await;
    let sent = operated.dest.received();
    assert_eq!(sent[3].header("webhook-id"), id);
    assert_eq!(sent[3].header("hookinbox-attempt"), "1");
    let numbers: Vec<(u64, u64, u64)> = detail["attempt_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["round"].as_u64().unwrap(),
                a["attempt"].as_u64().unwrap(),
                a["n"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(numbers, [(0, 1, 1), (1, 1, 2)], "{detail}");
    let (code, out, _) = operated.run(&["events", "show", id]).await;
    assert_eq!(code, 0);
    let (_, attempts) = out.split_once("\nattempts:\n").expect(&out);
    let rows: Vec<(&str, &str)> = attempts
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[1], cells[2])
        })
        .collect();
    assert_eq!(rows, [("0", "1"), ("1", "1")], "ROUND and #: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_replay_and_ignore_count_what_matched_and_work_on_dead_events_only() {
    use crate::destination::Mode;
    let operated = Operated::start().await;
    let (code, out, _) = operated
        .run(&["dlq", "replay", "--source", "shop", "--dry-run"])
        .await;
    assert_eq!((code, out.as_str()), (0, "dry run: 2 events match\n"));
    let (code, out, _) = operated
        .run(&[
            "dlq",
            "ignore",
            "--event-id",
            "cli_1",
            "--note",
            "refunded by hand",
        ])
        .await;
    assert_eq!((code, out.as_str()), (0, "1 event matched, 1 ignored\n"));
    operated.dest.set(Mode::Ok);
    let (code, out, _) = operated.run(&["dlq", "replay", "--source", "shop"]).await;
    assert_eq!((code, out.as_str()), (0, "1 event matched, 1 replayed\n"));
    // Another status is refused, never silently replaced by dead.
    let (code, _, err) = operated
        .run(&["dlq", "replay", "--status", "pending"])
        .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("work on dead events"), "{err}");
    operated.dest.wait_for(4, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_pause_and_an_unknown_name_or_event_is_refused_in_words() {
    let operated = Operated::start().await;
    let (code, out, _) = operated.run(&["destinations", "pause", "shop"]).await;
    assert_eq!((code, out.as_str()), (0, "shop: paused\n"));
    let (_, out, _) = operated.run(&["destinations", "list"]).await;
    assert!(
        out.contains("shop") && out.contains("true") && out.contains("closed"),
        "{out}"
    );
    let (code, _, err) = operated.run(&["destinations", "pause", "nope"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no destination named"), "{err}");
    let (code, _, err) = operated.run(&["events", "replay", "hbx_nope"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("404"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_delete_and_backup_do_what_they_say() {
    let operated = Operated::start().await;
    let ids = &operated.ids;
    let (code, out, _) = operated.run(&["sweep"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("swept "), "{out}");
    let (code, out, err) = operated
        .run(&["events", "delete", &ids[2], "--note", "erasure request"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("payload and headers deleted"), "{out}");
    let (_, out, _) = operated.run(&["events", "show", &ids[2]]).await;
    assert!(
        out.contains("payload deleted at") && out.contains("erasure request"),
        "{out}"
    );
    let out_file = operated.dir.path().join("backup.redb");
    let (code, out, err) = operated
        .run(&["backup", "--out", &out_file.display().to_string()])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("backup written to"), "{out}");
    let restore = tempfile::tempdir().unwrap();
    std::fs::copy(&out_file, restore.path().join(hookinbox::store::DB_FILE)).unwrap();
    assert_eq!(crate::support::read_all(restore.path()).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_and_a_stopped_server_get_clear_messages_and_their_own_codes() {
    let operated = Operated::start().await;
    let (code, _, err) = tokio::task::spawn_blocking({
        let admin = operated.server.admin.clone();
        move || ops(&admin, "wrong-token-wrong-token", &["stats".to_owned()])
    })
    .await
    .unwrap();
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("refused the token"), "{err}");
    let admin = operated.server.admin.clone();
    drop(operated.server);
    let (code, _, err) =
        tokio::task::spawn_blocking(move || ops(&admin, OPS_TOKEN, &["stats".to_owned()]))
            .await
            .unwrap();
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is the server running?"), "{err}");
}

/// Regression: `backup --out` wrote the database copy (every stored payload)
/// and its `.partial` file world-readable under the usual umask 022.
#[test]
fn backup_is_written_mode_0600_even_under_umask_022() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token = "backup-test-token-0123456789";
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{token}\"\n\n{}",
            server_section(&dir.path().join("data")),
            standard_source("shop"),
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // The shell sets the umask a packaged cron job or an operator's shell has.
    let backup = |out: &std::path::Path| {
        Command::new("sh")
            .args(["-c", "umask 022; exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_hookinbox"))
            .args(["backup", "--admin", &server.admin, "--out"])
            .arg(out)
            .env("HOOKINBOX_ADMIN_TOKEN", token)
            .output()
            .unwrap()
    };

    let fresh = dir.path().join("fresh.redb");
    let out = backup(&fresh);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&fresh), 0o600, "a new backup file");

    // A partial file left world-readable by an older version's broken
    // download is reused: its mode is tightened before a byte is written.
    let again = dir.path().join("again.redb");
    let leftover = again.with_extension("partial");
    std::fs::write(&leftover, b"old").unwrap();
    std::fs::set_permissions(&leftover, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = backup(&again);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        mode(&again),
        0o600,
        "a backup through a leftover partial file"
    );
    assert!(!leftover.exists());
}

/// The restore the README documents, through the real binary: a backup
/// taken with `hookinbox backup`, put in place of the database in an empty
/// data dir (no `hookinbox.wal`), serves the same events under the same ids,
/// and a provider's resend of one of them is still a duplicate.
#[tokio::test]
async fn a_backup_restored_as_documented_serves_the_same_events_and_dedupes() {
    let dir = tempfile::tempdir().unwrap();
    let token = "restore-test-token-0123456789";
    let config_for = |data: &std::path::Path, name: &str| {
        let sub = dir.path().join(name);
        std::fs::create_dir_all(&sub).unwrap();
        write_config(
            &sub,
            &format!(
                "{}[admin]\ntoken = \"{token}\"\n\n{}",
                server_section(data),
                standard_source("shop"),
            ),
        )
    };
    let mut server = BinaryServer::start(&config_for(&dir.path().join("data"), "a"), &[], None);
    let http = crate::support::client();
    let mut ids = Vec::new();
    for i in 0..5 {
        let body = format!("{{\"type\":\"order.paid\",\"n\":{i}}}").into_bytes();
        let headers = crate::support::standard_headers(&format!("evt_restore_{i}"), &body);
        let a = crate::support::post(&http, &server.url("/in/shop"), &headers, body).await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        ids.push(a.id().to_owned());
    }
    // An operator command against `admin`, off the async runtime; its stdout.
    let run = |admin: &str, args: &[&str]| {
        let admin = admin.to_owned();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        async move {
            let (code, out, err) = tokio::task::spawn_blocking(move || ops(&admin, token, &args))
                .await
                .unwrap();
            assert_eq!(code, 0, "{out}{err}");
            out
        }
    };
    let backup = dir.path().join("hookinbox-backup.redb");
    run(
        &server.admin,
        &["backup", "--out", backup.to_str().unwrap()],
    )
    .await;
    assert!(server.terminate().success());

    // The documented steps: stop, put the file in place, no write-ahead log, start.
    let restored = dir.path().join("restored");
    std::fs::create_dir_all(&restored).unwrap();
    std::fs::copy(&backup, restored.join("hookinbox.redb")).unwrap();
    assert!(!restored.join("hookinbox.wal").exists());
    let mut server = BinaryServer::start(&config_for(&restored, "b"), &[], None);
    let out = run(&server.admin, &["events", "list", "--json"]).await;
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut listed: Vec<String> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(listed, expected);

    let body = br#"{"type":"order.paid","n":3}"#.to_vec();
    let headers = crate::support::standard_headers("evt_restore_3", &body);
    let a = crate::support::post(&http, &server.url("/in/shop"), &headers, body).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json["duplicate"],
        serde_json::Value::Bool(true),
        "{:?}",
        a.json
    );
    assert_eq!(a.id(), ids[3]);
    assert!(server.terminate().success());
}

/// A source with two destinations: the app takes everything, billing
/// refuses refunds. `fan_0` (`order.paid`) is delivered to both; `fan_1`
/// (`order.refund`) to the app, and dead at billing.
struct TwoDestinations {
    server: BinaryServer,
    app: crate::destination::Destination,
    billing: crate::destination::Destination,
    /// The hookinbox id of `fan_1`.
    refund: String,
    _dir: tempfile::TempDir,
}

impl TwoDestinations {
    async fn start() -> TwoDestinations {
        use crate::destination::{Destination, Mode};
        let dir = tempfile::tempdir().unwrap();
        let token = OPS_TOKEN;
        let app = Destination::start(Mode::Ok).await;
        let billing = Destination::start(Mode::RejectBodyWith("refund")).await;
        let config = write_config(
            dir.path(),
            &format!(
                r#"{}[admin]
token = "{token}"

{}[[source.destination]]
url = "{}"
[[source.destination]]
name = "billing"
url = "{}"
"#,
                server_section(&dir.path().join("data")),
                standard_source("shop"),
                app.url(),
                billing.url()
            ),
        );
        let server = BinaryServer::start(&config, &[], None);
        let http = crate::support::client();
        let mut ids = Vec::new();
        for (i, kind) in ["paid", "refund"].iter().enumerate() {
            let body = format!("{{\"type\":\"order.{kind}\"}}").into_bytes();
            let a = crate::support::post(
                &http,
                &server.url("/in/shop"),
                &crate::support::standard_headers(&format!("fan_{i}"), &body),
                body,
            )
            .await;
            ids.push(a.id().to_owned());
        }
        app.wait_for(2, Duration::from_secs(10)).await;
        billing.wait_for(2, Duration::from_secs(10)).await;
        let two = TwoDestinations {
            server,
            app,
            billing,
            refund: ids[1].clone(),
            _dir: dir,
        };
        let refund = two.refund.as_str();
        eventually(
            &format!("only {refund} is dead for shop.billing"),
            Duration::from_secs(10),
            Duration::from_millis(20),
            async || {
                let (code, out, _) = two
                    .run(&[
                        "events",
                        "list",
                        "--destination",
                        "shop.billing",
                        "--status",
                        "dead",
                        "--json",
                    ])
                    .await;
                assert_eq!(code, 0, "{out}");
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                let listed: Vec<&str> = v["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["id"].as_str().unwrap())
                    .collect();
                if listed == [refund] {
                    Ok(())
                } else {
                    Err(out.clone())
                }
            },
        )
        .await;
        two
    }

    /// Runs an operator command with the right token; returns (exit code,
    /// stdout, stderr).
    async fn run(&self, args: &[&str]) -> (i32, String, String) {
        let (admin, args) = (
            self.server.admin.clone(),
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || ops(&admin, OPS_TOKEN, &args))
            .await
            .unwrap()
    }
}

/// The DLQ, stats and an event's deliveries, each by destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dlq_stats_and_an_events_deliveries_are_shown_per_destination() {
    let two = TwoDestinations::start().await;
    let (code, out, _) = two.run(&["dlq", "list", "--destination", "shop"]).await;
    assert_eq!(
        (code, out.as_str()),
        (0, "no events\n"),
        "dead at billing only"
    );
    let (code, out, _) = two.run(&["stats"]).await;
    assert_eq!(code, 0, "{out}");
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("→ {name} ")))
            .unwrap_or_else(|| panic!("no row for {name} in\n{out}"))
            .split_whitespace()
            .skip(1)
            .take(6)
            .map(str::to_owned)
            .collect()
    };
    // destination, pending, retrying, held, delivered, dead
    assert_eq!(
        row("shop.billing"),
        ["shop.billing", "0", "0", "0", "1", "1"]
    );
    assert_eq!(row("shop"), ["shop", "0", "0", "0", "2", "0"]);
    let (code, out, _) = two.run(&["events", "show", &two.refund]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("deliveries:") && out.contains("shop.billing"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_replay_to_one_destination_sends_it_there_only() {
    use crate::destination::Mode;
    let two = TwoDestinations::start().await;
    let refund = two.refund.as_str();
    let (code, _, err) = two
        .run(&["events", "replay", refund, "--destination", "shop.nope"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("404") && err.contains("shop.nope"), "{err}");
    two.billing.set(Mode::Ok);
    let (code, out, err) = two
        .run(&["events", "replay", refund, "--destination", "shop.billing"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    two.billing.wait_for(3, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(two.app.count(), 2, "the app got nothing again");
}
