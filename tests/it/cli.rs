//! The binary's command line: `config check`, `config default`, `serve` with
//! the embedded default, SIGTERM, and `send`.

use std::process::Command;

use crate::support::{BinaryServer, read_all, server_section, standard_source, write_config};

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
/// ephemeral port through the environment), generates and prints the demo
/// secret once, `send --source demo` is accepted, SIGTERM exits 0.
#[tokio::test]
async fn serve_with_the_embedded_default_generates_a_secret_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_text = data.to_str().unwrap().to_owned();
    let env = [
        ("HOOKINBOX_LISTEN", "127.0.0.1:0".to_owned()),
        ("HOOKINBOX_DATA_DIR", data_text),
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookinbox"));
    cmd.arg("serve")
        .envs(env.clone())
        .env("HOOKINBOX_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::piped());
    // Start it through the same runner as other tests, but without --config.
    let mut server = BinaryServer::start_command(cmd);
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
    assert!(server.terminate().success(), "{}", server.log_text());
    let stdout = server.stdout_text();
    assert!(
        stdout.contains(secret.trim()) && stdout.contains("hookinbox send"),
        "{stdout}"
    );
    assert_eq!(read_all(&data).await.len(), 1);

    // The second start reuses the secret and prints it no more.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookinbox"));
    cmd.arg("serve")
        .envs(env.clone())
        .env("HOOKINBOX_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::piped());
    let mut server = BinaryServer::start_command(cmd);
    assert!(server.terminate().success());
    assert!(!server.stdout_text().contains(secret.trim()));
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
