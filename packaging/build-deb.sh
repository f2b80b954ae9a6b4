#!/usr/bin/env bash
# Packages a binary already built from this tree into
# target/debian/hookinbox_<version>_<arch>.deb ($CARGO_TARGET_DIR/debian if
# set) with dpkg-deb: the binary (stripped), the hardened systemd unit, a
# minimal config that serves as installed (a conffile) with the full example
# beside it, shell completions and man pages, the README and docs/, and
# maintainer scripts that create the `hookinbox` system user and its data dir.
# The service is installed but not started: add your sources first, then
# `systemctl enable --now hookinbox` (see packaging/README.md).
#
#     cargo build --release --locked
#     bash packaging/build-deb.sh target/release/hookinbox    # or HOOKINBOX_BIN=…
#
# It never builds: what it ships is the binary it is given.
set -euo pipefail
given=${1:-${HOOKINBOX_BIN:-}}
if [ -z "$given" ]; then
    echo "usage: bash packaging/build-deb.sh BINARY (or HOOKINBOX_BIN=BINARY): the hookinbox binary to package, built first with cargo build --release --locked" >&2
    exit 2
fi
# The path as given, before the cd below.
bin=$(realpath -e -- "$given") || { echo "build-deb: no binary at $given" >&2; exit 2; }
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
target_dir=${CARGO_TARGET_DIR:-target}
# The binary is this version's, or the package would say something untrue.
bin_version=$("$bin" --version) || { echo "build-deb: $bin does not run" >&2; exit 1; }
case $bin_version in
    "hookinbox $version "* | "hookinbox $version") ;;
    *) echo "build-deb: $bin is \"$bin_version\"; Cargo.toml says $version" >&2; exit 1 ;;
esac

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
install -D -s -m 0755 "$bin" "$stage/usr/bin/hookinbox"
install -D -m 0644 packaging/hookinbox.service "$stage/lib/systemd/system/hookinbox.service"
install -D -m 0640 packaging/hookinbox.toml "$stage/etc/hookinbox/hookinbox.toml"
# Reference, a conffile as every file in /etc (Debian policy 10.7.2): each
# upgrade refreshes it unless the admin edited it (then dpkg asks).
install -D -m 0644 packaging/hookinbox.example.toml "$stage/etc/hookinbox/hookinbox.example.toml"
install -d -m 0750 "$stage/etc/hookinbox/secrets"
# Completions and man pages, generated from the command definitions.
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
    "$stage/usr/share/fish/vendor_completions.d" "$stage/usr/share/man/man1"
"$bin" completions bash > "$stage/usr/share/bash-completion/completions/hookinbox"
"$bin" completions zsh > "$stage/usr/share/zsh/vendor-completions/_hookinbox"
"$bin" completions fish > "$stage/usr/share/fish/vendor_completions.d/hookinbox.fish"
"$bin" man --dir "$stage/usr/share/man/man1"
gzip -9n "$stage"/usr/share/man/man1/*.1
find "$stage/usr/share" -type f -exec chmod 0644 {} +
# The README, ARCHITECTURE.md and the pages of docs/ the README links to
# (docs/production.md, the reference, the runbook the alert rules link to),
# with the screenshots they show and the app-side examples of docs/verify/,
# each where the README's relative links lead (check-deb.sh checks). Debian policy 12.3: documentation over 4 KB is compressed with
# gzip -9n (as dh_compress does; images stay as they are).
doc_file() {
    if [ "$(stat -c %s "$1")" -gt 4096 ]; then
        gzip -9nc "$1" > "$2/$(basename "$1").gz"
        chmod 0644 "$2/$(basename "$1").gz"
    else
        install -m 0644 "$1" "$2/"
    fi
}
install -d "$stage/usr/share/doc/hookinbox/docs"
doc_file README.md "$stage/usr/share/doc/hookinbox"
for page in docs/*.md; do
    doc_file "$page" "$stage/usr/share/doc/hookinbox/docs"
done
install -m 0644 docs/*.png "$stage/usr/share/doc/hookinbox/docs/"
doc_file ARCHITECTURE.md "$stage/usr/share/doc/hookinbox"
# docs/verify/: its README is compressed as the other pages are; the
# examples stay as they are, so a copy of node/ or python/ runs as that
# README says (npm ci reads package-lock.json). Listed file by file: a
# checkout's node_modules or venv is never shipped.
verify=$stage/usr/share/doc/hookinbox/docs/verify
install -d "$verify/node" "$verify/python"
doc_file docs/verify/README.md "$verify"
install -m 0644 docs/verify/node/app.js docs/verify/node/package.json \
    docs/verify/node/package-lock.json "$verify/node/"
install -m 0644 docs/verify/python/app.py docs/verify/python/requirements.txt "$verify/python/"
# The keys helpers (clients/), which the examples install from
# ../../../clients: source packages for pip and npm, so not compressed
# (pyproject.toml names its README.md). Their tests stay in the checkout.
clients=$stage/usr/share/doc/hookinbox/clients
install -d "$clients/python/hookinbox_keys" "$clients/node"
install -m 0644 clients/python/pyproject.toml clients/python/README.md "$clients/python/"
install -m 0644 clients/python/hookinbox_keys/*.py clients/python/hookinbox_keys/py.typed "$clients/python/hookinbox_keys/"
install -m 0644 clients/node/package.json clients/node/index.js clients/node/index.d.ts clients/node/README.md "$clients/node/"
# The changelog's newest entry is this version, or the package says nothing true.
changelog_version=$(sed -n '1s/^hookinbox (\([^)]*\)).*/\1/p' packaging/changelog)
if [ "$changelog_version" != "$version" ]; then
    echo "packaging/changelog's newest entry is ${changelog_version:-missing}; Cargo.toml says $version" >&2
    exit 1
fi
# A native package (no Debian revision in the version): changelog.gz.
gzip -9nc packaging/changelog > "$stage/usr/share/doc/hookinbox/changelog.gz"
chmod 0644 "$stage/usr/share/doc/hookinbox/changelog.gz"
install -D -m 0644 packaging/README.md "$stage/usr/share/doc/hookinbox/PACKAGING.md"
# lintian's overrides, each with its reason (check-deb.sh runs lintian).
install -D -m 0644 packaging/lintian-overrides "$stage/usr/share/lintian/overrides/hookinbox"
# The Grafana dashboard, Prometheus rules and scrape example, as documented.
install -d "$stage/usr/share/doc/hookinbox/monitoring"
install -m 0644 packaging/monitoring/README.md packaging/monitoring/hookinbox.dashboard.json \
    packaging/monitoring/hookinbox.rules.yml packaging/monitoring/hookinbox.rules.test.yml \
    packaging/monitoring/prometheus.example.yml "$stage/usr/share/doc/hookinbox/monitoring/"
{
    cat <<'COPYRIGHT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: hookinbox

Files: *
Copyright: 2026 The hookinbox authors
License: MIT or Apache-2.0

License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0 (and in LICENSE-APACHE beside this file).

License: MIT
COPYRIGHT
    sed 's/^$/./; s/^/ /' LICENSE-MIT
} > "$stage/usr/share/doc/hookinbox/copyright"
install -m 0644 LICENSE-MIT LICENSE-APACHE "$stage/usr/share/doc/hookinbox/"

# Depends with versions: the newest glibc symbol version the binary uses.
glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
if [ -z "$glibc" ]; then
    echo "cannot read the glibc symbol versions of $bin (is binutils installed?)" >&2
    exit 1
fi
depends="libc6 (>= $glibc), adduser"
# The maintainer is the one the changelog's newest entry names: one place.
maintainer=$(sed -n 's/^ -- \(.*>\)  .*/\1/p' packaging/changelog | head -1)
if [ -z "$maintainer" ]; then
    echo "packaging/changelog's newest entry has no trailer ( -- Name <address>  date)" >&2
    exit 1
fi
# Rust binaries unwind through libgcc_s when it is linked.
if objdump -p "$bin" | grep -q 'NEEDED *libgcc_s'; then
    depends="$depends, libgcc-s1 (>= 3.0)"
fi

install -d "$stage/DEBIAN"
# No Homepage: the project has no home of its own yet (lintian's
# no-homepage-field is about source packages that are not native: it says
# nothing here). The unit's Documentation= and the alert rules' runbook_url
# name the man pages and the docs installed here (check-deb.sh checks).
installed_kb=$(du -ks "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: hookinbox
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_kb
Depends: $depends
Section: net
Priority: optional
Description: single-binary webhook inbox
 Receives provider webhooks (Stripe, GitHub, Shopify, Slack, Paddle, Linear,
 Twilio, GitLab, Twitch, Zoom, Meta, Standard Webhooks, any HMAC sender),
 verifies their signatures, dedupes them and stores
 them durably in one local redb file before answering, then delivers them to
 your app with retries, a circuit breaker and a dead-letter queue.
CONTROL
printf '%s\n' /etc/hookinbox/hookinbox.toml /etc/hookinbox/hookinbox.example.toml > "$stage/DEBIAN/conffiles"

cat > "$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    if ! getent passwd hookinbox >/dev/null; then
        adduser --system --group --home /var/lib/hookinbox --no-create-home \
            --gecos "hookinbox webhook inbox" hookinbox
    fi
    chgrp hookinbox /etc/hookinbox /etc/hookinbox/hookinbox.toml /etc/hookinbox/secrets
    chmod 0750 /etc/hookinbox /etc/hookinbox/secrets
    chmod 0640 /etc/hookinbox/hookinbox.toml
    # systemd's StateDirectory makes it too; without systemd (containers)
    # `hookinbox serve` as the hookinbox user needs it.
    if [ ! -d /var/lib/hookinbox ]; then
        install -d -o hookinbox -g hookinbox -m 0700 /var/lib/hookinbox
    fi
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        # An upgrade ($2: the version replaced): a running service restarts
        # on the new binary; a stopped one stays stopped. deb-systemd-invoke
        # (init-system-helpers, essential) is systemctl that respects
        # policy-rc.d, as debhelper's scripts call it.
        if [ -n "$2" ]; then
            deb-systemd-invoke try-restart hookinbox.service || true
        fi
    fi
    if [ -z "$2" ]; then
        echo "hookinbox: start it with  systemctl enable --now hookinbox"
        echo "  then try it:  hookinbox send --source demo && hookinbox stats"
        echo "  add providers to /etc/hookinbox/hookinbox.toml (every key: hookinbox.example.toml beside it)"
    fi
fi
exit 0
POSTINST

cat > "$stage/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
# A clean stop lets in-flight requests get their durable answer.
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    deb-systemd-invoke stop hookinbox.service || true
    deb-systemd-helper disable hookinbox.service || true
fi
exit 0
PRERM

cat > "$stage/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
# Purge keeps /var/lib/hookinbox: it holds received events, possibly
# payments not yet delivered. Remove it by hand once you are sure.
if [ "$1" = purge ] && [ -d /var/lib/hookinbox ]; then
    echo "hookinbox: kept /var/lib/hookinbox (your events); remove it by hand if unneeded"
fi
exit 0
POSTRM
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"

mkdir -p "$target_dir/debian"
out="$target_dir/debian/hookinbox_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$out" >/dev/null
echo "$out"
