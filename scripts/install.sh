#!/usr/bin/env bash
# Installs what peakbench needs on a fresh Debian machine, then peakbench itself
# (pip builds the Rust engine with maturin). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
command -v mkfs.ext4 >/dev/null || need_apt+=(e2fsprogs)
# The NFS tests and benchmarks run a real nfs-ganesha (VFS FSAL) behind rpcbind.
command -v ganesha.nfsd >/dev/null || need_apt+=(nfs-ganesha nfs-ganesha-vfs)
[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ] || ls /usr/lib/*/ganesha/libfsalvfs.so >/dev/null 2>&1 || need_apt+=(nfs-ganesha-vfs)
command -v rpcbind >/dev/null || [ -x /usr/sbin/rpcbind ] || need_apt+=(rpcbind)
command -v mkfs.xfs >/dev/null || need_apt+=(xfsprogs)      # plans benchmark xfs and btrfs images too
command -v mkfs.btrfs >/dev/null || need_apt+=(btrfs-progs)
command -v losetup >/dev/null || need_apt+=(mount)
# fio (and valgrind's callgrind) for the posix benchmarks' peers and instruction counts (flatout_ab.py, run.py posix).
command -v fio >/dev/null || need_apt+=(fio)
command -v valgrind >/dev/null || need_apt+=(valgrind)
# nginx (and its WebDAV PROPFIND/OPTIONS module) for the HTTP target's tests.
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
[ -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || need_apt+=(libnginx-mod-http-dav-ext)
# A real access log for the replay tests: the example that Debian's logstalgia ships.
[ -f /usr/share/logstalgia/example.log ] || need_apt+=(logstalgia)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip python3-venv)
# The engine needs the Rust named by rust-version in engine/Cargo.toml. Debian 12's own
# rustc (1.63) is too old; its rustc-web and cargo-web (1.96, security updates) are new enough.
rust_needed=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' engine/Cargo.toml)
rust_found() { PATH="$HOME/.cargo/bin:$PATH" rustc --version 2>/dev/null | awk '{print $2}'; }
rust_new_enough() { [ -n "$(rust_found)" ] && printf '%s\n%s\n' "$rust_needed" "$(rust_found)" | sort -V -C; }
rust_new_enough || need_apt+=(cargo-web rustc-web)
# The test script holds the engine to rustfmt and clippy.
PATH="$HOME/.cargo/bin:$PATH" cargo fmt --version >/dev/null 2>&1 || need_apt+=(rustfmt)
PATH="$HOME/.cargo/bin:$PATH" cargo clippy --version >/dev/null 2>&1 || need_apt+=(rust-clippy)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
export PATH="$HOME/.cargo/bin:$PATH"
if ! rust_new_enough; then
  found=$(rust_found)
  echo "install.sh: peakbench's engine needs Rust >= $rust_needed; found ${found:-none}." \
    "Install it with rustup (https://rustup.rs) or, on Debian 12, apt-get install cargo-web rustc-web." >&2
  exit 2
fi
python3 -m pip install -q --disable-pip-version-check ".[test]"
