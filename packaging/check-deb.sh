#!/usr/bin/env bash
# CI check of the Debian package on a disposable machine (needs root): build
# the release binary and package it, install it, check what it put where,
# verify the unit, run it as installed and drive it with the operator
# commands without flags, install it over itself, purge it.
#
# HOOKINBOX_BIN=PATH packages that binary (already built from this tree)
# instead of building one: `HOOKINBOX_BIN=target/debug/hookinbox bash
# packaging/check-deb.sh` checks the packaging without a release build. CI
# sets none.
set -euo pipefail
fail() { echo "check-deb: $*" >&2; exit 1; }
if [ -n "${HOOKINBOX_BIN:-}" ]; then
    # As given, before the cd below.
    bin=$(realpath -e -- "$HOOKINBOX_BIN") || fail "HOOKINBOX_BIN: no binary at $HOOKINBOX_BIN"
fi
cd "$(dirname "$0")/.."
if [ -z "${HOOKINBOX_BIN:-}" ]; then
    cargo build --release --locked
    bin=${CARGO_TARGET_DIR:-target}/release/hookinbox
fi
deb=$(bash packaging/build-deb.sh "$bin" | tail -1)
# Completions and man pages are in the package (checked in it: minimal
# images exclude /usr/share/man from what dpkg unpacks).
contents=$(dpkg-deb -c "$deb")
for f in usr/share/bash-completion/completions/hookinbox usr/share/zsh/vendor-completions/_hookinbox \
         usr/share/fish/vendor_completions.d/hookinbox.fish usr/share/man/man1/hookinbox.1.gz \
         usr/share/man/man1/hookinbox-dlq-replay.1.gz usr/share/doc/hookinbox/changelog.gz \
         usr/share/doc/hookinbox/monitoring/hookinbox.dashboard.json \
         usr/share/doc/hookinbox/monitoring/hookinbox.rules.yml \
         usr/share/doc/hookinbox/README.md.gz usr/share/doc/hookinbox/docs/operating.md.gz \
         usr/share/doc/hookinbox/docs/production.md.gz usr/share/doc/hookinbox/docs/dashboard-overview.png \
         usr/share/doc/hookinbox/docs/verify/node/app.js usr/share/doc/hookinbox/docs/verify/node/package.json \
         usr/share/doc/hookinbox/docs/verify/node/package-lock.json \
         usr/share/doc/hookinbox/docs/verify/python/app.py usr/share/doc/hookinbox/docs/verify/python/requirements.txt \
         usr/share/doc/hookinbox/clients/python/pyproject.toml usr/share/doc/hookinbox/clients/python/hookinbox_keys/__init__.py \
         usr/share/doc/hookinbox/clients/python/hookinbox_keys/powertools.py usr/share/doc/hookinbox/clients/python/hookinbox_keys/py.typed \
         usr/share/doc/hookinbox/clients/node/package.json usr/share/doc/hookinbox/clients/node/index.js \
         usr/share/doc/hookinbox/clients/node/index.d.ts; do
    grep -q "\./$f\$" <<<"$contents" || fail "$f is not in the package"
done
grep -q '/node_modules/\|/\.venv/\|/__pycache__/' <<<"$contents" && fail "the package holds a checkout's node_modules, venv or __pycache__"
# Every file the README links into docs/ or to ARCHITECTURE.md is in the
# package where the link leads from /usr/share/doc/hookinbox/ (a page over
# 4 KB as NAME.gz); a link to a directory needs its README.md, which is
# what the link shows.
links=$(grep -o '](\(docs/\|ARCHITECTURE\.md\)[^)]*)' README.md | sed 's/^](//; s/)$//; s/#.*//' | sort -u)
[ "$(grep -c . <<<"$links")" -ge 10 ] || fail "found too few links into docs/ in README.md: $links"
while read -r link; do
    case $link in
        */) f=usr/share/doc/hookinbox/${link}README.md ;;
        *) f=usr/share/doc/hookinbox/$link ;;
    esac
    grep -Eq "\./${f//./\\.}(\.gz)?\$" <<<"$contents" || fail "README.md links $link, but the package has no $f"
done <<<"$links"
# What the unit's Documentation= and the alert rules' runbook_url name is in
# the package: man pages and the installed docs, no web page (the project
# has no home of its own yet).
refs=$( { sed -n 's/^Documentation=//p' packaging/hookinbox.service | tr ' ' '\n'
          sed -n 's/^ *runbook_url: "\(.*\)"$/\1/p' packaging/monitoring/hookinbox.rules.yml; } | sort -u)
[ "$(grep -c . <<<"$refs")" -ge 3 ] || fail "found no Documentation= or runbook_url to check"
while read -r ref; do
    case $ref in
        man:*\(*\))
            name=${ref#man:}; name=${name%%(*}
            section=${ref##*(}; section=${section%)}
            f=usr/share/man/man$section/$name.$section.gz ;;
        file:///*)
            f=${ref#file:///}; f=${f%%#*} ;;
        *) fail "$ref (a Documentation= or runbook_url) is neither a man: nor a file:/// reference" ;;
    esac
    grep -q "\./$f\$" <<<"$contents" || fail "$ref names $f, which is not in the package"
done <<<"$refs"
# An upgrade restarts a running service on the new binary.
dpkg-deb -I "$deb" postinst | grep -q 'deb-systemd-invoke try-restart hookinbox.service' \
    || fail "postinst does not restart the service on upgrade"
if command -v dpkg-parsechangelog >/dev/null; then
    dpkg-parsechangelog -l packaging/changelog >/dev/null || fail "packaging/changelog does not parse"
fi
# Debian's package checker, when installed (CI's .ci/run installs it): no
# error or warning. An override is shipped in the package with its reason
# (packaging/lintian-overrides). Not --show-overrides: with it lintian
# counts the overridden tags toward --fail-on.
if command -v lintian >/dev/null; then
    lintian --allow-root --fail-on error,warning --info "$deb" \
        || fail "lintian found errors or warnings in $deb"
else
    echo "check-deb: lintian is not installed; skipping it (apt-get install lintian)" >&2
fi
dpkg -i "$deb" >/dev/null
getent passwd hookinbox >/dev/null || fail "no hookinbox user"
[ "$(stat -c '%a %U %G' /etc/hookinbox/hookinbox.toml)" = "640 root hookinbox" ] || fail "config file mode/owner"
[ "$(stat -c '%a %U %G' /etc/hookinbox)" = "750 root hookinbox" ] || fail "config dir mode/owner"
/usr/bin/hookinbox --version | grep -q "^hookinbox " || fail "binary does not run"
grep -qx /etc/hookinbox/hookinbox.toml /var/lib/dpkg/info/hookinbox.conffiles || fail "config is not a conffile"
grep -qx /etc/hookinbox/hookinbox.example.toml /var/lib/dpkg/info/hookinbox.conffiles || fail "the example config is not a conffile"
if command -v systemd-analyze >/dev/null; then
    # --man=no: minimal images leave /usr/share/man out of what dpkg
    # unpacks; the man pages Documentation= names are checked in the
    # package above.
    systemd-analyze verify --man=no /lib/systemd/system/hookinbox.service || fail "unit does not verify"
    # The hardening must not regress: exposure at most 1.6 (the threshold is in tenths).
    systemd-analyze security --offline=true --threshold=16 /lib/systemd/system/hookinbox.service >/dev/null \
        || fail "unit exposure above 1.6: systemd-analyze security --offline=true packaging/hookinbox.service"
fi
dpkg-deb -f "$deb" Depends | grep -Eq '^libc6 \(>= 2\.[0-9]+\), adduser' || fail "Depends has no libc6 version: $(dpkg-deb -f "$deb" Depends)"
[ -f /etc/hookinbox/hookinbox.example.toml ] || fail "the full example is not beside the config"
[ "$(stat -c '%a %U %G' /var/lib/hookinbox)" = "700 hookinbox hookinbox" ] || fail "data dir mode/owner"

# The keys helpers install from the package as docs/verify/README.md says,
# by a user who is not root: a copy for pip (it builds beside the source),
# and npm links the copy into an app.
if command -v npm >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null; then
    scratch=$(mktemp -d)
    chown nobody "$scratch"
    as_nobody() { runuser -u nobody -- env HOME="$scratch" npm_config_cache="$scratch/.npm" "$@"; }
    as_nobody cp -r /usr/share/doc/hookinbox/clients "$scratch/hookinbox-clients"
    as_nobody python3 -m venv "$scratch/venv"
    as_nobody "$scratch/venv/bin/pip" install -q "$scratch/hookinbox-clients/python" \
        || fail "pip install of the packaged clients/python failed"
    as_nobody "$scratch/venv/bin/python" -c 'import hookinbox_keys' || fail "hookinbox_keys does not import"
    as_nobody mkdir "$scratch/app"
    (cd "$scratch/app" && as_nobody npm init -y >/dev/null \
        && as_nobody npm install -q --no-audit --no-fund "$scratch/hookinbox-clients/node" >/dev/null \
        && as_nobody node --input-type=module -e "import { Keys } from 'hookinbox-keys'; if (!Keys) process.exit(1);") \
        || fail "npm install of the packaged clients/node failed"
    rm -rf "$scratch"
else
    echo "check-deb: npm or python3-venv is not installed; skipping the keys helpers' install" >&2
fi

# The config serves as installed, and the operator commands find the server
# with no flags. systemd is absent in CI containers: run what the unit runs.
hookinbox config check >/dev/null || fail "the installed config does not check"
runuser -u hookinbox -- /usr/bin/hookinbox serve --config /etc/hookinbox/hookinbox.toml \
    >/tmp/hookinbox-check-deb.log 2>&1 &
serve=$!
stop_serve() { kill "$serve" 2>/dev/null && wait "$serve" 2>/dev/null || true; }
trap stop_serve EXIT
for _ in $(seq 1 100); do
    hookinbox stats >/dev/null 2>&1 && break
    kill -0 "$serve" 2>/dev/null || { cat /tmp/hookinbox-check-deb.log >&2; fail "serve exited"; }
    sleep 0.1
done
hookinbox stats >/dev/null || fail "hookinbox stats without flags failed on the packaged install"
hookinbox send --source demo --quiet || fail "hookinbox send --source demo failed"
# Read whole, then grep: `cmd | grep -q` under pipefail fails when grep
# exits at the first match and the command's next write gets EPIPE.
listed=$(hookinbox events list) || fail "hookinbox events list failed"
grep -q demo <<<"$listed" || fail "the event sent is not listed"
stats=$(hookinbox stats --json) || fail "hookinbox stats --json failed"
grep -q '"demo"' <<<"$stats" || fail "stats do not show the demo source"
stop_serve
trap - EXIT

# Installing over itself runs the upgrade path of the maintainer scripts;
# an edited config stays (a conffile).
echo "# edited by the admin" >> /etc/hookinbox/hookinbox.toml
dpkg -i --force-confold "$deb" >/dev/null || fail "installing over itself failed"
grep -q "^# edited by the admin" /etc/hookinbox/hookinbox.toml || fail "an upgrade replaced the edited config"
dpkg --purge hookinbox >/dev/null
[ ! -e /usr/bin/hookinbox ] || fail "purge left the binary"
echo "check-deb: ok ($deb)"
