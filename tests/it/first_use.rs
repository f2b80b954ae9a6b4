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
