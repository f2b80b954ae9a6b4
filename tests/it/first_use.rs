//! What a new user meets first, through the real binary: the first-start
//! banner's command, config errors, the packaged config they may not read,
//! `events tail`, time filters with offsets and `--since`, and output into a
//! pipe whose reader has gone (`| head`). Each test is a tester's report.

use std::process::Command;

use crate::support::write_config;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Regression: config value errors said `source[0]` and no line. They now
/// name the file, the line and column of the value, and the source.
#[test]
fn config_value_errors_name_the_line_and_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let head = "[[source]]\nname = \"a\"\nkind = \"github\"\nsecret_env = \"A\"\n\n\
                [[source]]\nname = \"stripe\"\nkind = \"standard\"\n";
    let secret = "secret_env = \"SECRET\"\n";
    for (rest, at, key) in [
        (
            "secret = \"not-a-whsec-key\"\n".to_owned(),
            "9:10",
            "source[1].secret",
        ),
        (
            format!("{secret}tolerance = \"5 parsecs\"\n"),
            "10:13",
            "source[1].tolerance",
        ),
        (
            format!("{secret}destination = \"ftp://app.example/hook\"\n"),
            "10:15",
            "source[1].destination",
        ),
    ] {
        let path = write_config(dir.path(), &format!("{head}{rest}"));
        let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(["config", "check", "--config", path.to_str().unwrap()])
            .env("A", "x")
            .env("SECRET", crate::support::STANDARD_SECRET)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rest}: {stderr}");
        let want = format!("{}:{at}: {key} (source \"stripe\"): ", path.display());
        assert!(stderr.contains(&want), "{rest}: want {want:?} in {stderr}");
    }
}

/// Regression: a packaged config the user may not read (`/etc/hookinbox`
/// is 0750) read as no file, and the embedded default was used in silence.
/// As root no permission stops a read, so the packaged path (set for tests
/// through `HOOKINBOX_PACKAGED_CONFIG`) is one below a regular file: any
/// error but "not found" is reported, with exit 2.
#[test]
fn a_packaged_config_that_cannot_be_read_is_an_error_not_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etc");
    std::fs::write(&file, "").unwrap();
    let packaged = file.join("hookinbox.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["config", "check"])
        .env_remove("HOOKINBOX_CONFIG")
        .env("HOOKINBOX_PACKAGED_CONFIG", &packaged)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: cannot read the packaged config: ",
            packaged.display()
        )),
        "{stderr}"
    );
    // Absent, it is the embedded default, as before.
    let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["config", "check"])
        .env_remove("HOOKINBOX_CONFIG")
        .env("HOOKINBOX_PACKAGED_CONFIG", dir.path().join("absent.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}
