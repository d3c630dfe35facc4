# shellcheck shell=bash disable=SC2154 # out, src, name, ...: set by Nix from the derivation
# TEST DOUBLE — NOT NIXPKGS. The builder of every derivation of the stand-in (pkgs.nix), run as
# `/bin/bash -e builder.sh KIND` by Nix with the derivation's attributes in the environment.
# It uses the HOST's tools: those host.nix names, else /usr/bin, /usr/local/go/bin, and rustup's
# ~/.cargo/bin (or /usr/local/cargo/bin) with ~/.rustup (or /usr/local/rustup) of the user the
# build runs as (root, with --option build-users-group ''). No sandbox: the host's crate cache
# (~/.cargo/registry) is read, and crates.io is reached only when a crate is missing from it.
set -euo pipefail

# The host's toolchains: where host.nix says (hostPath, hostCargoHome, hostRustupHome), else
# rustup's and Go's usual places.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
host_home=$(getent passwd "$(id -u)" | cut -d: -f6)
for dir in /usr/local/go/bin /usr/local/cargo/bin "$host_home/.cargo/bin"; do
  if [ -d "$dir" ]; then PATH="$dir:$PATH"; fi
done
if [ -n "${hostPath:-}" ]; then PATH="$hostPath:$PATH"; fi
export PATH
host_cargo_home=${hostCargoHome:-}
for dir in "$host_home/.cargo" /usr/local/cargo; do
  if [ -z "$host_cargo_home" ] && [ -d "$dir/registry" ]; then host_cargo_home=$dir; fi
done
host_cargo_home=${host_cargo_home:-$host_home/.cargo}
for dir in "${hostRustupHome:-}" "$host_home/.rustup" /usr/local/rustup; do
  if [ -n "$dir" ] && [ -d "$dir/toolchains" ]; then
    export RUSTUP_HOME="$dir"
    break
  fi
done
# Tools that write under $HOME (go's telemetry, for one) must not create /homeless-shelter.
export HOME="$NIX_BUILD_TOP/home"

die() {
  printf 'offline-nixpkgs (test double): %s\n' "$*" >&2
  exit 1
}

need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 ||
      die "$tool not found on the host as $(id -un) (PATH=$PATH); builds need the host's toolchains and, as root, --option build-users-group ''"
  done
}

# A writable copy of the source in the build directory.
unpack() {
  cp -r "$src" source
  chmod -R u+w source
  cd source
}

# The crates Cargo.lock names, vendored from the host's cache (or crates.io), like
# importCargoLock's cargo-vendor-dir.
build_cargo_vendor() {
  need cargo
  unpack
  cp --no-preserve=mode "$lockFile" Cargo.lock
  export CARGO_HOME="$host_cargo_home"
  if ! cargo vendor --locked --offline --versioned-dirs "$out" >/dev/null 2>vendor.log; then
    echo "offline-nixpkgs: some crates are not in $CARGO_HOME; fetching them from crates.io" >&2
    cat vendor.log >&2
    cargo vendor --locked --versioned-dirs "$out" >/dev/null
  fi
}

# nativeBuildInputs: their bin/ on PATH and their setup hooks sourced, as stdenv does.
use_native_inputs() {
  local input
  for input in ${nativeBuildInputs:-}; do # clang, pkg-config: links to the host's
    PATH="$input/bin:$PATH"
    if [ -f "$input/nix-support/setup-hook" ]; then
      # shellcheck disable=SC1091 # a derivation's output, known at build time only
      . "$input/nix-support/setup-hook"
    fi
  done
}

# The postInstall (postBuild for symlinkJoin) hook, in the build directory as stdenv runs it.
run_hook() {
  if [ -n "${!1:-}" ]; then eval "${!1}"; fi
}

# buildRustPackage: cargo build --release --frozen against the vendored crates, then every
# executable of target/release into $out/bin (as nixpkgs' cargoInstallHook does).
build_cargo_build() {
  use_native_inputs
  need cargo rustc cc
  unpack
  cmp -s Cargo.lock "$lockFile" ||
    die "ERROR: cargoLock.lockFile ($lockFile) and the source's Cargo.lock differ: Cargo.lock is out of date"
  export CARGO_HOME="$PWD/.cargo-home" CARGO_TARGET_DIR="$PWD/target"
  mkdir -p "$CARGO_HOME"
  cat >"$CARGO_HOME/config.toml" <<EOF
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "$cargoDeps"
EOF
  # The release profile without optimisation: this double proves what the derivations build and
  # install, not how fast the programs run, and each package builds its whole dependency tree
  # afresh (three trees in test-nix.sh, a few minutes of CI's time). nixpkgs builds it as set.
  export CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false
  # shellcheck disable=SC2086 # a list attribute arrives space-separated
  cargo build --release --frozen --offline $cargoBuildFlags
  mkdir -p "$out/bin"
  find "$CARGO_TARGET_DIR/release" -maxdepth 1 -type f -executable -exec cp {} "$out/bin/" \;
  [ -n "$(ls -A "$out/bin")" ] || die "cargo build $cargoBuildFlags produced no executable"
  run_hook postInstall
}

# buildGoModule with vendorHash = null: go install of the module's main packages, no proxy.
build_go_build() {
  use_native_inputs
  need go
  unpack
  export GOCACHE="$PWD/.go-cache" GOPATH="$PWD/.go" GOBIN="$out/bin"
  export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-trimpath GO111MODULE=on GOTELEMETRY=off
  if [ -d vendor ]; then GOFLAGS="$GOFLAGS -mod=vendor"; fi
  go install ./...
  run_hook postInstall
}

# writeShellApplication: the script, then bash -n and shellcheck as nixpkgs' checkPhase.
build_write_script() {
  local target="$out$destination"
  mkdir -p "$(dirname "$target")"
  cp "$textPath" "$target"
  chmod +x "$target"
  bash -n "$target"
  need shellcheck
  shellcheck "$target"
}

build_symlink_join() {
  local path
  mkdir -p "$out"
  for path in $paths; do # a list attribute arrives space-separated
    cp -rs --no-preserve=mode "$path/." "$out/"
  done
  run_hook postBuild
}

# installShellFiles' setup hook, reduced to what a package's postInstall calls:
#   installShellCompletion --cmd NAME [--bash|--zsh|--fish] FILE ...   (FILE may be <(command))
#   installManPage PAGE.SECTION ...
# into share/bash-completion/completions/NAME.bash, share/zsh/site-functions/_NAME,
# share/fish/vendor_completions.d/NAME.fish and share/man/man<SECTION>/, as nixpkgs places them.
build_setup_hook() {
  mkdir -p "$out/nix-support"
  cat >"$out/nix-support/setup-hook" <<'HOOK'
installShellCompletion() {
  local cmd="" shell="" file dest
  while [ $# -gt 0 ]; do
    case "$1" in
      --cmd) cmd=$2; shift 2; continue ;;
      --bash | --zsh | --fish) shell=${1#--}; shift; continue ;;
    esac
    file=$1
    shift
    [ -n "$shell" ] || { echo "installShellCompletion: no shell named for $file" >&2; return 1; }
    [ -n "$cmd" ] || cmd=$(basename "$file" | sed 's/\..*//')
    case "$shell" in
      bash) dest=$out/share/bash-completion/completions/$cmd.bash ;;
      zsh) dest=$out/share/zsh/site-functions/_$cmd ;;
      fish) dest=$out/share/fish/vendor_completions.d/$cmd.fish ;;
    esac
    mkdir -p "$(dirname "$dest")"
    cat "$file" >"$dest"
    [ -s "$dest" ] || { echo "installShellCompletion: $file is empty" >&2; return 1; }
  done
}
installManPage() {
  local page section
  for page in "$@"; do
    section=${page##*.}
    mkdir -p "$out/share/man/man$section"
    cp "$page" "$out/share/man/man$section/"
  done
}
HOOK
}

# A tool nixpkgs would build: links to the host's binaries of the same names.
build_host_tool() {
  local bin found
  mkdir -p "$out/bin"
  for bin in $bins; do
    found=$(command -v "$bin") || die "$pname: $bin is not installed on this host"
    ln -s "$found" "$out/bin/$bin"
  done
}

build_host_library() {
  mkdir -p "$out"
  echo "$pname: the host's, found by the host's compiler" >"$out/README"
}

build_shell() {
  die "$name: this derivation is not meant to be built, aside from nix develop (as nixpkgs' mkShell)"
}

"build_$1"
