//! What the compiler does not check: every source file says what it owns,
//! ARCHITECTURE.md's codemap names every module in `lib.rs`'s order, every
//! test and module path the docs cite exists, every alert's runbook is a
//! section of the operating guide, no test writes out its own deadline
//! loop, and the operator commands import nothing of the server.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_opens_with_a_line_saying_what_it_owns() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    assert!(files.len() > 30, "found only {} files", files.len());
    let silent: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let first = text.lines().next().unwrap_or("");
            // A sentence, not a bare `//!`: at least three words after it.
            !first.starts_with("//! ") || first.split_whitespace().count() < 4
        })
        .map(|path| path.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(
        silent.is_empty(),
        "these files do not open with a `//! ` line saying what they own: {silent:?}"
    );
}

/// `pub mod name;` lines of `src/lib.rs`, in order.
fn lib_modules() -> Vec<String> {
    std::fs::read_to_string(root().join("src/lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The modules the codemap's entries name, in order: each entry is a line
/// `- \`name/\` —` or `- \`name.rs\`, \`other.rs\` —`.
fn codemap_modules() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let codemap = text
        .split("\n## Codemap\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a Codemap section")
        .split("\n## ")
        .next()
        .unwrap();
    let mut names = Vec::new();
    for line in codemap.lines() {
        let Some(entry) = line.strip_prefix("- ") else {
            continue;
        };
        let head = entry.split(" —").next().unwrap();
        for quoted in head.split(", ") {
            let name = quoted.trim_matches('`');
            let name = name
                .strip_suffix('/')
                .or_else(|| name.strip_suffix(".rs"))
                .unwrap_or(name);
            names.push(name.to_owned());
        }
    }
    names
}

#[test]
fn the_codemap_names_every_module_in_lib_rs_order() {
    let lib = lib_modules();
    assert!(lib.len() > 15, "found only {lib:?} in src/lib.rs");
    // `main.rs` is the binary's, not a library module.
    let codemap: Vec<String> = codemap_modules()
        .into_iter()
        .filter(|name| name != "main")
        .collect();
    assert_eq!(
        codemap, lib,
        "ARCHITECTURE.md's codemap must list src/lib.rs's modules, once each, in the same order"
    );
}

/// Cargo.toml's `license` names two licenses: both texts are in the
/// repository (and `packaging/build-deb.sh` ships them).
#[test]
fn the_license_files_match_cargo_toml() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"MIT OR Apache-2.0\""),
        "Cargo.toml's license changed: change the files with it"
    );
    let apache = std::fs::read_to_string(root().join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
    let mit = std::fs::read_to_string(root().join("LICENSE-MIT")).unwrap();
    assert!(mit.starts_with("Copyright (c) "));
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    let deb = std::fs::read_to_string(root().join("packaging/build-deb.sh")).unwrap();
    assert!(deb.contains("LICENSE-MIT LICENSE-APACHE"));
}

/// `packaging/hookinbox.example.toml` documents every key with one source
/// of each kind, and `packaging/hookinbox.toml` is what the package installs:
/// both must load. The example's secret files are made under a temporary
/// directory in place of /etc/hookinbox, and each `*_env` variable it names
/// is given a value every kind accepts.
#[test]
fn the_packaged_configs_load_and_the_example_has_every_kind() {
    use hookinbox::config::{Config, Kind};
    const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    let example = std::fs::read_to_string(root().join("packaging/hookinbox.example.toml")).unwrap();
    let example = example.replace("/etc/hookinbox/", &format!("{}/", etc.display()));
    for line in example.lines().filter(|l| !l.trim_start().starts_with('#')) {
        if let Some((key, value)) = line.split_once('=')
            && key.trim().ends_with("_file")
        {
            let path = value.split('"').nth(1).unwrap();
            std::fs::create_dir_all(Path::new(path).parent().unwrap()).unwrap();
            std::fs::write(path, format!("{KEY}\n")).unwrap();
        }
    }
    let env = |name: &str| (!name.starts_with("HOOKINBOX_")).then(|| KEY.to_owned());
    let config = Config::from_toml(&example, "hookinbox.example.toml", None, &env)
        .unwrap_or_else(|e| panic!("{e}"));
    for kind in Kind::ALL {
        assert!(
            config.sources.iter().any(|s| s.kind == kind),
            "the example has no source of kind {kind}"
        );
    }
    assert!(
        config.sources.iter().any(|s| s.destinations.len() > 1),
        "the example shows no source with several destinations"
    );

    let installed = std::fs::read_to_string(root().join("packaging/hookinbox.toml")).unwrap();
    let config = Config::from_toml(&installed, "hookinbox.toml", None, &|_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert_eq!(
        config.server.data_dir,
        Path::new("/var/lib/hookinbox"),
        "the unit's StateDirectory"
    );
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `module::…::name` paths a page cites in backticks, as it names a
/// test: two or more segments of lower-case letters, digits and `_`.
fn cited_paths(text: &str) -> Vec<String> {
    let segment = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.contains("::") && quoted.split("::").all(segment))
        .map(str::to_owned)
        .collect()
}

/// The module `name` under `dir` (a file beside it, or its `mod.rs`), and
/// the directory of its own modules.
fn module(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|file| file.is_file())
    .map(|file| (file, dir.join(name)))
}

/// Whether a cited path leads somewhere: its first segment is a module of
/// the integration tests (`tests/it/`) or of the crate (`src/`), each next
/// one a module (a file beside it, or `mod name {` inline), and the last
/// one may instead be a `fn` of the module reached. `Err` says what is
/// missing where.
fn resolve(path: &str) -> Result<(), String> {
    let segments: Vec<&str> = path.split("::").collect();
    let (first, rest) = segments.split_first().unwrap();
    // A name both places have (`replicate`) is tried in each.
    let mut tried = Vec::new();
    for top in ["tests/it", "src"] {
        let Some((file, dir)) = module(&root().join(top), first) else {
            continue;
        };
        match resolve_in(file, dir, rest) {
            Ok(()) => return Ok(()),
            Err(e) => tried.push(e),
        }
    }
    if tried.is_empty() {
        return Err(format!("no module {first} in tests/it/ or src/"));
    }
    Err(tried.join("; "))
}

/// The rest of [`resolve`]: `rest` from the module in `file` (its
/// submodules under `dir`).
fn resolve_in(mut file: PathBuf, mut dir: PathBuf, rest: &[&str]) -> Result<(), String> {
    for (i, name) in rest.iter().enumerate() {
        let text = std::fs::read_to_string(&file).unwrap();
        let last = i + 1 == rest.len();
        if last && (text.contains(&format!("fn {name}(")) || text.contains(&format!("fn {name}<")))
        {
            return Ok(());
        }
        if let Some(found) = module(&dir, name) {
            (file, dir) = found;
        } else if text.contains(&format!("mod {name} {{")) {
            dir = dir.join(name);
        } else {
            return Err(format!(
                "no fn or module {name} in {}",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    Ok(())
}

/// Every test docs/reliability.md cites as the proof of a promise (and the
/// README's guarantees, and ARCHITECTURE.md's invariants and entry points)
/// exists at the path cited: a test or module renamed or moved fails here,
/// not in a reader's search.
#[test]
fn every_test_the_reliability_page_cites_exists() {
    for (doc, at_least) in [
        ("docs/reliability.md", 15),
        ("README.md", 1),
        ("ARCHITECTURE.md", 20),
    ] {
        let cited = cited_paths(&read(doc));
        assert!(
            cited.len() >= at_least,
            "{doc} cites only {cited:?}: tests are cited as `module::test_name`"
        );
        let missing: Vec<String> = cited
            .iter()
            .filter_map(|path| resolve(path).err().map(|e| format!("{path}: {e}")))
            .collect();
        assert!(
            missing.is_empty(),
            "{doc} cites what does not exist; fix the name in the page: {missing:#?}"
        );
    }
    assert!(resolve("tidy::every_test_the_reliability_page_cites_exists").is_ok());
    assert!(resolve("tidy::no_such_test").is_err());
    assert!(resolve("supervise::tests::no_such_test").is_err());
}

/// A heading's anchor as GitHub makes it: lower case, spaces to `-`, other
/// punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Each alert rule's `runbook_url` is its own section of docs/operating.md
/// where the package installs it (packaging/check-deb.sh checks the file is
/// in the package): the anchor is the alert's name in lower case, and a
/// heading of the page.
#[test]
fn every_alert_links_its_section_of_the_installed_operating_guide() {
    let headings: Vec<String> = read("docs/operating.md")
        .lines()
        .filter_map(|line| {
            line.strip_prefix("### ")
                .or_else(|| line.strip_prefix("## "))
        })
        .map(anchor)
        .collect();
    let (mut alerts, mut linked) = (Vec::new(), 0);
    for line in read("packaging/monitoring/hookinbox.rules.yml").lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- alert: ") {
            alerts.push(name.to_owned());
        }
        if let Some(url) = line.strip_prefix("runbook_url: ") {
            let alert = alerts.last().expect("a runbook_url follows its alert");
            let section = alert.to_lowercase();
            assert_eq!(
                url.trim_matches('"'),
                format!("file:///usr/share/doc/hookinbox/docs/operating.md.gz#{section}"),
                "{alert}"
            );
            assert!(
                headings.contains(&section),
                "docs/operating.md has no heading `### {alert}` for its runbook_url"
            );
            linked += 1;
        }
    }
    assert!(alerts.len() >= 6, "found only {alerts:?}");
    assert_eq!(
        linked,
        alerts.len(),
        "an alert without a runbook_url: {alerts:?}"
    );
}

/// `text` with its comments and the insides of its string and character
/// literals blanked (same length, same lines), so braces and words in them
/// are not read as code.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push_str("  ");
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            chars.get(i + 1 + hashes) == Some(&'"')
        } {
            // A raw string: r"…", r#"…"#.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            out.push('r');
            i += 1;
            for _ in 0..=hashes {
                out.push(chars[i]);
                i += 1;
            }
            let rest: String = chars[i..].iter().collect();
            let len = rest
                .find(&close)
                .map_or(chars.len() - i, |at| rest[..at].chars().count());
            for _ in 0..len {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push_str(&close);
            i += close.chars().count();
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let n = if chars[i] == '\\' { 2 } else { 1 };
                for _ in 0..n.min(chars.len() - i) {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' && next.is_some() && {
            // A character literal ('x', '\n', '\''), not a lifetime or label.
            let end = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&q| q == '\'')
                    .map(|p| i + 2 + p)
            } else {
                Some(i + 2)
            };
            end.is_some_and(|e| chars.get(e) == Some(&'\''))
        } {
            let end = if next == Some('\\') {
                i + 2 + chars[i + 2..].iter().position(|&q| q == '\'').unwrap()
            } else {
                i + 2
            };
            out.push('\'');
            for _ in i + 1..end {
                out.push(' ');
            }
            out.push('\'');
            i = end + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// For each byte of `code` (as [`code_of`] leaves it), whether it is in a
/// `loop`, `while` or `for`: its header or its body.
fn in_loops(code: &str) -> Vec<bool> {
    let mut inside = vec![false; code.len()];
    let mut stack: Vec<bool> = Vec::new();
    let mut statement = 0;
    for (at, c) in code.char_indices() {
        match c {
            '{' => {
                let header = &code[statement..at];
                let words: Vec<&str> = header
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .collect();
                let is_loop = ["loop", "while", "for"].iter().any(|k| words.contains(k))
                    && !words.contains(&"impl");
                if is_loop {
                    inside[statement..at].fill(true);
                }
                stack.push(is_loop);
                statement = at + 1;
            }
            '}' => {
                stack.pop();
                statement = at + 1;
            }
            ';' => statement = at + 1,
            _ => {}
        }
        if stack.iter().any(|&l| l) {
            inside[at] = true;
        }
    }
    inside
}

/// The deadline loops written out in `text`: `(line, what)`. See
/// [`no_test_writes_out_a_deadline_loop`].
fn deadline_loops(text: &str) -> Vec<(usize, &'static str)> {
    let code = code_of(text);
    let mut found = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let now = "Instant::now()";
    for (at, _) in code.match_indices(now) {
        let after = code[at + now.len()..].trim_start();
        let before = code[..at].trim_end_matches("std::time::").trim_end();
        if after.starts_with('+') || after.starts_with(".checked_add") {
            found.push((line_of(at), "a deadline built from Instant::now()"));
        } else if after.starts_with('<')
            || after.starts_with('>')
            || before.ends_with('<')
            || before.ends_with('>')
            || before.ends_with("<=")
            || before.ends_with(">=")
        {
            found.push((line_of(at), "Instant::now() compared with a deadline"));
        } else if before.ends_with("duration_since(") {
            found.push((line_of(at), "the time left before a deadline"));
        }
    }
    let inside = in_loops(&code);
    for (at, _) in code.match_indices(".elapsed()") {
        let after = code[at + ".elapsed()".len()..].trim_start();
        let compared = after.starts_with('<') || after.starts_with('>');
        if compared && inside[at] {
            found.push((line_of(at), "a loop bounded by an elapsed time"));
        }
    }
    found.sort();
    found
}

/// Refuses, in every file of `tests/it` but `support.rs`, a deadline loop
/// written out by hand: a deadline built (`Instant::now() + …`), compared
/// (`Instant::now() < deadline`) or counted down
/// (`deadline.saturating_duration_since(Instant::now())`), and an elapsed
/// time compared inside a `loop`, `while` or `for` (its header or body:
/// `while started.elapsed() < …`, `if started.elapsed() > … { break }`,
/// `assert!(started.elapsed() < …)` between polls). Waiting for a condition
/// is `support::eventually` (or `eventually_sync`, `line_where`,
/// `next_lines`); load that runs for a while is `support::Window`. An
/// elapsed time measured and reported or asserted once, outside a loop,
/// stays.
#[test]
fn no_test_writes_out_a_deadline_loop() {
    let mut files = Vec::new();
    rust_files(&root().join("tests/it"), &mut files);
    assert!(files.len() > 30, "found only {} files", files.len());
    let mut loops = Vec::new();
    for path in files.iter().filter(|p| !p.ends_with("support.rs")) {
        let text = std::fs::read_to_string(path).unwrap();
        for (line, what) in deadline_loops(&text) {
            let path = path.strip_prefix(root()).unwrap().display();
            loops.push(format!("{path}:{line}: {what}"));
        }
    }
    assert!(
        loops.is_empty(),
        "deadline loops written out in tests (use support::eventually, or support::Window for load that runs for a while):\n{}",
        loops.join("\n")
    );
}

/// The scanner itself, on the forms it refuses and on those it lets be.
#[test]
fn the_deadline_loop_scanner_tells_a_wait_from_a_measurement() {
    let refused = r##"
fn a() {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{x}");
    }
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    let started = Instant::now();
    let took = loop {
        if ok() { break started.elapsed(); }
        assert!(started.elapsed() < Duration::from_secs(5), "}} {{");
    };
    while woke.elapsed() < Duration::from_secs(10) {}
    let body = br#"{"a":"b"}"#; let until = Instant::now() + Duration::from_secs(6);
}
"##;
    let lines: Vec<usize> = deadline_loops(refused).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [3, 5, 7, 11, 13, 14]);
    let kept = r##"
fn b() {
    let started = Instant::now();
    // while Instant::now() < deadline {
    let s = "Instant::now() + 1";
    let r = r#"{"a":"b"}"#;
    let c = '{';
    send().await;
    assert!(started.elapsed() < Duration::from_secs(15));
    for i in 0..3 { println!("{:?}", started.elapsed()); }
    let d: &'static str = "";
}
impl X for Y {
    fn c(&self) -> bool { self.0.elapsed() > Duration::ZERO }
}
"##;
    assert_eq!(deadline_loops(kept), []);
}

/// The crate's modules that `code` names through `crate::` paths, with the
/// line of each: `crate::store::X` and each name of
/// `crate::{store::X, deliver}`. Comments and literals are not read.
fn crate_modules_named(code: &str) -> Vec<(usize, String)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut named = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group only: `crate::{a::{b, c}, d}` names a, d.
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        named.push((line, ident(&group[i..])));
                    }
                    _ => {}
                }
            }
        } else {
            named.push((line, ident(rest)));
        }
    }
    named
}

/// The server's rooms: what `hookinbox serve` runs. An operator command
/// reaches them only over the admin API.
const SERVER_MODULES: &[&str] = &[
    "listener",
    "ingest",
    "verify",
    "store",
    "schedule",
    "deliver",
    "sweep",
    "alert",
    "admin",
    "metrics",
    "supervise",
    "app",
    "replicate",
];

/// The CLI's operator commands are pure clients: `ctl/` names no module of
/// the server, only `api`'s types (and the config, the clock, the exit
/// codes, the Standard Webhooks key and message that `listen` signs with).
/// Scoped to `ctl/`: `cli/` also holds `serve`, which runs `App` and sets
/// a replaced primary's data aside (`store::standby_dir`).
#[test]
fn the_operator_commands_import_nothing_of_the_server() {
    let mut files = Vec::new();
    rust_files(&root().join("src/ctl"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let mut found = Vec::new();
    for path in &files {
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for (line, module) in crate_modules_named(&code) {
            if SERVER_MODULES.contains(&module.as_str()) {
                let path = path.strip_prefix(root()).unwrap().display();
                found.push(format!("{path}:{line}: crate::{module}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "ctl/ imports the server (an operator command speaks to it over the admin API, in `api`'s types):\n{}",
        found.join("\n")
    );
}

/// The import scanner, on the forms a path can take.
#[test]
fn the_import_scanner_reads_each_crate_path() {
    let code = code_of(
        r#"use crate::api::{self, Timestamp};
use crate::{deliver::Message, store};
use crate::{config::{self, Kind}, exit};
// crate::schedule in a comment
let s = "crate::ingest";
let n = crate::clock::unix_ms(now);
macro_rules! m { () => { $crate::sweep::x() } }
"#,
    );
    let named = crate_modules_named(&code);
    let named: Vec<(usize, &str)> = named.iter().map(|(l, m)| (*l, m.as_str())).collect();
    assert_eq!(
        named,
        [
            (1, "api"),
            (2, "deliver"),
            (2, "store"),
            (3, "config"),
            (3, "exit"),
            (6, "clock")
        ]
    );
}
