//! `docs/high-availability.md`'s "Step by step on Debian", run: every
//! ```` ```sh vm-x ```` block of that section, in order, with bash, as root,
//! on this one machine. The three VMs are the loopback addresses 127.0.1.1–3
//! (the page's 10.0.0.1–3), each with its own root directory standing in for
//! `/etc` and `/var/lib`; a file a block leaves in its VM's working directory
//! is copied to the other VMs' (the page's `scp`). `systemctl restart`
//! starts the real `nats-server` (as user `nats`, as Debian's unit does) or
//! the real binary in the background; `apt-get install` only checks that the
//! package is there (`.ci/run` installs it). Everything else runs as
//! written, so a step the page gets wrong (a directory `nats` cannot
//! create, a secret left to the data dir, a flag that does not exist) fails
//! here.

use std::path::{Path, PathBuf};
use std::process::Command;

const PAGE: &str = "docs/high-availability.md";
const SECTION: &str = "## Step by step on Debian";

/// The section's blocks: (vm, text), in the page's order.
fn blocks(page: &str) -> Vec<(String, String)> {
    let start = page.find(SECTION).expect("the page has the section");
    let rest = &page[start + SECTION.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut found = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(vm) = line.strip_prefix("```sh ") else {
            continue;
        };
        let text: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        found.push((vm.trim().to_owned(), text.join("\n")));
    }
    found
}

/// What the page means on a real VM, here: its addresses on loopback, and
/// `/etc` and `/var/lib` under the VM's root.
fn localize(text: &str, root: &Path) -> String {
    let root = root.display();
    text.replace("10.0.0.", "127.0.1.")
        .replace(r"10\.0\.0\.", r"127\.0\.1\.")
        .replace("/etc/", &format!("{root}/etc/"))
        .replace("/var/lib/", &format!("{root}/var/lib/"))
}

/// The shell functions each block runs with: the services it restarts, the
/// package it installs, the `hookinbox` on the PATH.
fn prelude(root: &Path) -> String {
    format!(
        r#"set -euo pipefail
VMROOT={root}
export HOOKINBOX_CONFIG="$VMROOT/etc/hookinbox/hookinbox.toml"
export HOOKINBOX_PACKAGED_CONFIG="$HOOKINBOX_CONFIG"
hookinbox() {{ "{bin}" "$@"; }}
apt-get() {{ command -v nats-server > /dev/null; }}
stop_service() {{
  if [ -f "$VMROOT/$1.pid" ]; then kill -TERM -- "-$(cat "$VMROOT/$1.pid")" 2> /dev/null || true; sleep 1; fi
}}
systemctl() {{
  [ "$1" = restart ] || {{ echo "systemctl $*: the runbook test runs restart only" >&2; return 1; }}
  case "$2" in
    nats-server)
      stop_service nats-server
      setsid runuser -u nats -- nats-server -c "$VMROOT/etc/nats-server.conf" >> "$VMROOT/nats-server.log" 2>&1 < /dev/null &
      echo $! > "$VMROOT/nats-server.pid"
      local address; address=$(sed -n 's/^listen: *//p' "$VMROOT/etc/nats-server.conf")
      for _ in $(seq 100); do
        if (exec 3<> "/dev/tcp/${{address%:*}}/${{address##*:}}") 2> /dev/null; then return 0; fi
        sleep 0.1
      done
      echo "nats-server does not listen on $address:" >&2; cat "$VMROOT/nats-server.log" >&2; return 1 ;;
    hookinbox)
      stop_service hookinbox
      setsid "{bin}" serve --config "$HOOKINBOX_CONFIG" >> "$VMROOT/hookinbox.log" 2>&1 < /dev/null &
      echo $! > "$VMROOT/hookinbox.pid"
      for _ in $(seq 300); do
        if grep -Eq 'hookinbox is (receiving webhooks|following the primary)' "$VMROOT/hookinbox.log"; then return 0; fi
        if ! kill -0 "$(cat "$VMROOT/hookinbox.pid")" 2> /dev/null; then break; fi
        sleep 0.1
      done
      echo "hookinbox did not start:" >&2; cat "$VMROOT/hookinbox.log" >&2; return 1 ;;
    *) echo "systemctl restart $2: not a service of the runbook" >&2; return 1 ;;
  esac
}}
"#,
        root = root.display(),
        bin = env!("CARGO_BIN_EXE_hookinbox"),
    )
}

/// Kills what the blocks started (each in its own process group).
struct Services(Vec<PathBuf>);

impl Drop for Services {
    fn drop(&mut self) {
        for root in &self.0 {
            for service in ["hookinbox", "nats-server"] {
                if let Ok(pid) = std::fs::read_to_string(root.join(format!("{service}.pid"))) {
                    let _ = Command::new("kill")
                        .args(["-KILL", "--", &format!("-{}", pid.trim())])
                        .status();
                }
            }
        }
    }
}

fn copy_files(from: &Path, from_root: &Path, to: &Path, to_root: &Path) {
    for entry in std::fs::read_dir(from).unwrap().filter_map(Result::ok) {
        if entry.file_type().unwrap().is_file() {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            // The same paths on every VM: here, each VM's own root.
            let text = text.replace(
                &from_root.display().to_string(),
                &to_root.display().to_string(),
            );
            std::fs::write(to.join(entry.file_name()), text).unwrap();
        }
    }
}

/// Every command of the page's Debian steps runs and does what the page
/// says: NATS with JetStream and a token as user `nats`, a primary and a
/// standby sharing their secrets, a webhook the standby refuses naming the
/// primary, one the primary takes and the standby holds, and a planned
/// switch-over after which the old primary follows with its data.
#[test]
fn the_high_availability_runbook_runs_on_debian() {
    // SAFETY: getuid has no preconditions.
    let root_user = unsafe { libc::getuid() } == 0;
    let nats_user = Command::new("id")
        .arg("nats")
        .output()
        .unwrap()
        .status
        .success();
    if !root_user || !nats_user {
        // CI runs as root with Debian's nats-server (which makes the user).
        println!("runbook: not run: needs root and the nats user of Debian's nats-server");
        return;
    }
    // The hookinbox package's group, which the steps give the secrets to.
    let _ = Command::new("sh")
        .args([
            "-c",
            "getent group hookinbox > /dev/null || groupadd --system hookinbox",
        ])
        .status();
    let page = std::fs::read_to_string(format!("{}/{PAGE}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let steps = blocks(&page);
    assert!(steps.len() >= 5, "the section's blocks: {steps:?}");

    let top = tempfile::tempdir().unwrap();
    let mode = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    mode(top.path());
    let vms = ["vm-a", "vm-b", "vm-c"];
    let root_of = |vm: &str| top.path().join(vm).join("root");
    let home_of = |vm: &str| top.path().join(vm).join("home");
    for vm in vms {
        for dir in ["etc", "var/lib"] {
            std::fs::create_dir_all(root_of(vm).join(dir)).unwrap();
        }
        std::fs::create_dir_all(home_of(vm)).unwrap();
        for dir in [
            top.path().join(vm),
            root_of(vm),
            root_of(vm).join("etc"),
            root_of(vm).join("var"),
            root_of(vm).join("var/lib"),
        ] {
            mode(&dir);
        }
    }
    let _services = Services(vms.iter().map(|vm| root_of(vm)).collect());

    for (i, (vm, text)) in steps.iter().enumerate() {
        assert!(vms.contains(&vm.as_str()), "block {i}: unknown VM {vm:?}");
        let root = root_of(vm);
        let script = format!("{}\n{}\n", prelude(&root), localize(text, &root));
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(home_of(vm))
            .output()
            .unwrap();
        let log = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
        assert!(
            out.status.success(),
            "block {i} on {vm} failed ({}):\n{text}\nstdout:\n{}\nstderr:\n{}\nhookinbox log:\n{}\nnats log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            log("hookinbox.log"),
            log("nats-server.log"),
        );
        println!("runbook: block {i} on {vm} ran");
        for other in vms.iter().filter(|o| **o != vm.as_str()) {
            copy_files(&home_of(vm), &root, &home_of(other), &root_of(other));
        }
    }
    // The switch-over set nothing aside on the old primary.
    let data = root_of("vm-a").join("var/lib/hookinbox");
    let aside: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("set-aside"))
        .collect();
    assert!(aside.is_empty(), "{aside:?}");
}
