#!/usr/bin/env bash
# The offline check of the Nix flake (CONTRIBUTING.md, "The Nix offline check"). nixpkgs cannot be fetched here, so the flake
# is evaluated against nix/offline-nixpkgs, a stand-in that builds with the host's cargo and go:
#   1. every .nix file parses (nix-instantiate --parse)
#   2. flake.lock pins one stable nixpkgs, the branch flake.nix names (nix/tests/lock.nix)
#   3. nix flake check --no-build
#   4. every package's drvPath, every app's type/program, every devShell's drvPath evaluate, for
#      both systems; each package has meta.mainProgram; each app runs a package's main program
#   5. the writeShellApplication scripts pass shellcheck, as nixpkgs checks them when built
#   6. the packages in $NIX_CHECK_BUILD are built; their main programs, and the apps that run
#      them, exist and are executable
# Then `nix run .#goroutines -- hold --n 1000` (and threads, tokio-tasks, processes), the app scripts' own behaviour
# (root / not root, what the main job runs), and broken copies of the flake that the check must
# refuse, each for its own reason. The real files are never modified: all of it runs on copies.
# Installs Debian's nix-bin when nix is missing (root); prints SKIP and exits 77 when nix cannot be had.
# Usage: ./scripts/test-nix.sh              Exit status: 0 when every case passed, 77 skipped.
#   NIX_CHECK_BUILD="threads goroutines tokio-tasks processes spawnscope-unwrapped"   the packages built
#                                            (default; the others are evaluated only)
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

# skip WHY: the check cannot run on this host; exit 77, which test.sh counts as skipped (never
# as passed).
skip() {
  printf 'SKIP: %s\n' "$*"
  exit 77
}

if ! command -v nix >/dev/null 2>&1; then
  if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
    skip "nix is not installed, and installing Debian's nix-bin needs root and apt-get"
  fi
  need_packages nix-bin || skip "nix-bin could not be installed with apt-get"
fi
# Without root, the store belongs to a daemon whose builders cannot reach the host's toolchains.
is_root || skip "the check runs nix as root (builds use the host's cargo and go); this is $(id -un)"
add_toolchain_paths
command -v cargo >/dev/null 2>&1 || die "cargo not found: the stand-in builds with the host's cargo"
command -v go >/dev/null 2>&1 || die "go not found: the stand-in builds with the host's go"

read -r -a BUILD <<<"${NIX_CHECK_BUILD:-threads goroutines tokio-tasks processes spawnscope-unwrapped}"

# Offline, no binary cache, builds as root without sandbox (the stand-in's builders read the host's
# ~/.cargo and ~/.rustup), flakes enabled.
NIX=(nix --extra-experimental-features 'nix-command flakes' --offline
  --option substituters '' --option build-users-group '' --option sandbox false)
say "$(nix --version), offline, against nix/offline-nixpkgs (a test double for nixpkgs)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# For the cases run as nobody.
chmod 755 "$tmp"

# stage DIR: a copy of the flake's files (tracked and untracked, not ignored) in DIR.
stage() {
  local file
  mkdir -p "$1"
  while IFS= read -r -d '' file; do
    if [ -e "$file" ]; then cp --parents -- "$file" "$1/"; fi
  done < <(git ls-files -z --cached --others --exclude-standard)
}

# flake_nix COMMAND ARGS...: nix COMMAND with the flake's nixpkgs replaced by the stand-in in
# $flake_dir (the options go before ARGS, which may end with `-- program arguments`).
flake_dir=
flake_nix() {
  "${NIX[@]}" "$1" --no-write-lock-file --override-input nixpkgs "path:$flake_dir/nix/offline-nixpkgs" "${@:2}"
}

# step_failed NAME ERRFILE: says which step failed and the error Nix gave.
step_failed() {
  printf 'check failed: %s\n' "$1"
  if [ -s "$2" ]; then
    grep -v -e '^warning: not writing modified lock file' -e "^• Added input 'nixpkgs'" \
      -e "^    'path:.*offline-nixpkgs" "$2" | sed -n '/error/,$p' | head -n 20 | sed 's/^/  /'
  fi
  return 1
}

# check_flake DIR: the offline check of the flake in DIR (steps 1-6 above); the first failure
# is printed with its reason and returns 1.
check_flake() {
  local dir=$1 work file out report what path package script_pkg index name
  local -A built=()
  work="$dir.work"
  flake_dir=$dir
  mkdir -p "$work"

  while IFS= read -r -d '' file; do
    nix-instantiate --parse "$file" >/dev/null 2>"$work/parse.err" ||
      step_failed "nix-instantiate --parse ${file#"$dir"/}" "$work/parse.err" || return 1
  done < <(find "$dir" -name '*.nix' -print0)

  report=$("${NIX[@]}" eval --raw --impure \
    --expr "import $REPO_ROOT/nix/tests/lock.nix { flakeDir = $dir; }" 2>"$work/lock.err") ||
    step_failed "flake.lock" "$work/lock.err" || return 1
  if [ -n "$report" ]; then
    printf 'check failed: flake.lock\n%s\n' "$report" | sed '2,$s/^/  /'
    return 1
  fi

  "${NIX[@]}" flake check --no-build --no-write-lock-file \
    --override-input nixpkgs "path:$dir/nix/offline-nixpkgs" "path:$dir" 2>"$work/flake-check.err" ||
    step_failed "nix flake check --no-build" "$work/flake-check.err" || return 1

  for out in packages apps devShells; do
    flake_nix eval --json --impure "path:$dir#$out" \
      --apply "(import $REPO_ROOT/nix/tests/outputs.nix).$out" >"$work/$out.json" 2>"$work/$out.err" ||
      step_failed "nix eval $out (every drvPath, app type and program)" "$work/$out.err" || return 1
  done
  report=$("${NIX[@]}" eval --raw --impure --expr "
    (import $REPO_ROOT/nix/tests/outputs.nix).report {
      system = builtins.currentSystem;
      packages = builtins.fromJSON (builtins.readFile $work/packages.json);
      apps = builtins.fromJSON (builtins.readFile $work/apps.json);
      devShells = builtins.fromJSON (builtins.readFile $work/devShells.json);
    }" 2>"$work/report.err") || step_failed "the outputs' report" "$work/report.err" || return 1
  if grep -q '^PROBLEM ' <<<"$report"; then
    printf 'check failed: the outputs\n'
    grep '^PROBLEM ' <<<"$report" | sed 's/^PROBLEM /  /'
    return 1
  fi

  if command -v shellcheck >/dev/null 2>&1; then
    while read -r what script_pkg index name; do
      if [ "$what" != SCRIPT ]; then continue; fi
      "${NIX[@]}" eval --raw --impure --expr "(builtins.elemAt
        (builtins.fromJSON (builtins.readFile $work/packages.json)).\${builtins.currentSystem}.\"$script_pkg\".scripts
        $index).text" >"$work/script-$name" 2>"$work/script.err" ||
        step_failed "the text of script $name" "$work/script.err" || return 1
      shellcheck "$work/script-$name" >"$work/shellcheck.err" 2>&1 ||
        step_failed "shellcheck of $name (nixpkgs' writeShellApplication runs it at build time)" \
          "$work/shellcheck.err" || return 1
    done <<<"$report"
  else
    warn "shellcheck not installed: the generated scripts are not checked"
  fi

  for package in "${BUILD[@]}"; do
    flake_nix build -L --no-link "path:$dir#$package" 2>"$work/build-$package.err" ||
      step_failed "nix build .#$package" "$work/build-$package.err" || return 1
    built[$package]=1
  done
  while read -r what name path package; do
    if [ "$what" != EXE ] || [ -z "${built[$package]:-}" ]; then continue; fi
    if [ ! -x "$path" ]; then
      printf 'check failed: %s: %s is not an executable of the built package %s\n' "$name" "$path" "$package"
      find "$(dirname "$path")" -maxdepth 1 2>&1 | sed 's/^/  /'
      return 1
    fi
  done <<<"$report"
  return 0
}

passed=0
failed=0
failed_cases=()
pass() {
  printf 'ok: %s\n' "$1"
  passed=$((passed + 1))
}
fail() {
  printf 'FAILED: %s\n' "$1"
  failed=$((failed + 1))
  failed_cases+=("$1")
}

# case_passes NAME CMD...: the case passes when CMD succeeds.
case_passes() {
  local name=$1
  shift
  say "$name"
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# broken NAME FILE SED: a copy of the flake with SED applied to FILE, which must change it.
broken() {
  local dir="$tmp/$1"
  cp -r "$tmp/flake" "$dir"
  sed -i -e "$3" "$dir/$2"
  if cmp -s "$tmp/flake/$2" "$dir/$2"; then
    printf 'the mutation %s did not change %s\n' "$3" "$2"
    return 1
  fi
}

# refused NAME PATTERN: the check must fail on the copy $tmp/NAME, saying PATTERN (grep -E).
refused() {
  local output
  if output=$(check_flake "$tmp/$1"); then
    printf 'the check passed a broken flake (%s)\n' "$1"
    return 1
  fi
  printf '%s\n' "$output"
  grep -Eq -- "$2" <<<"$output" || {
    printf 'the check failed, but without saying: %s\n' "$2"
    return 1
  }
}

# host_nix DIR: tells the stand-in in the flake copy DIR where this host's toolchains are (the
# builders do not see this shell's PATH, CARGO_HOME or RUSTUP_HOME); see nix/offline-nixpkgs.
host_nix() {
  local path cargo_home rustup_home value
  path="$(dirname "$(command -v cargo)"):$(dirname "$(command -v go)")"
  if command -v rustc >/dev/null 2>&1; then path="$path:$(dirname "$(command -v rustc)")"; fi
  cargo_home=${CARGO_HOME:-$HOME/.cargo}
  rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
  [ -d "$rustup_home" ] || rustup_home=
  for value in "$path" "$cargo_home" "$rustup_home"; do
    [[ $value =~ ^[A-Za-z0-9/._:+-]*$ ]] || die "a toolchain path Nix would need quoted: $value"
  done
  printf '{\n  path = "%s";\n  cargoHome = "%s";\n  rustupHome = "%s";\n}\n' \
    "$path" "$cargo_home" "$rustup_home" >"$1/nix/offline-nixpkgs/host.nix"
}

stage "$tmp/flake"
host_nix "$tmp/flake"

case_passes "the offline check passes on the flake as committed (building: ${BUILD[*]})" \
  check_flake "$tmp/flake"

# hold_1000 APP: nix run .#APP -- hold --n 1000 holds 1000 tasks at its peak.
hold_1000() {
  local peak
  flake_dir="$tmp/flake"
  peak=$(flake_nix run "path:$tmp/flake#$1" -- hold --n 1000 </dev/null 2>"$tmp/run-$1.err" |
    grep '^{"event":"peak"') || step_failed "nix run .#$1" "$tmp/run-$1.err" || return 1
  printf '%s\n' "$peak"
  grep -q '"alive":1000,"expected":1000,' <<<"$peak"
}
case_passes "nix run .#goroutines -- hold --n 1000 (the real program, built by Nix)" hold_1000 goroutines
case_passes "nix run .#threads -- hold --n 1000 (the real program, built by Nix)" hold_1000 threads
case_passes "nix run .#tokio-tasks -- hold --n 1000 (the real program, built by Nix)" hold_1000 tokio-tasks
case_passes "nix run .#processes -- hold --n 1000 (the real program, built by Nix)" hold_1000 processes

# out_path PACKAGE: the store path of a package the offline check built.
out_path() {
  flake_dir="$tmp/flake"
  flake_nix eval --raw "path:$tmp/flake#$1.outPath" 2>"$tmp/out-path-$1.err" ||
    step_failed "nix eval .#$1.outPath" "$tmp/out-path-$1.err"
}

# The conductor's completions and man page where installShellFiles puts them, each naming the
# subcommands; the workloads under names no other program has, and not under the common ones.
installed_files() {
  local unwrapped threads goroutines tokio processes file
  unwrapped=$(out_path spawnscope-unwrapped) && threads=$(out_path threads) &&
    goroutines=$(out_path goroutines) && tokio=$(out_path tokio-tasks) &&
    processes=$(out_path processes) || return 1
  for file in share/bash-completion/completions/spawnscope.bash share/zsh/site-functions/_spawnscope \
    share/fish/vendor_completions.d/spawnscope.fish share/man/man1/spawnscope.1; do
    printf '%s: ' "$file"
    grep -c -e compare "$unwrapped/$file" || return 1
  done
  grep -q '^\.TH spawnscope 1' "$unwrapped/share/man/man1/spawnscope.1" || return 1
  ls "$threads/bin" "$goroutines/bin" "$tokio/bin" "$processes/bin"
  [ -x "$threads/bin/spawnscope-threads" ] && [ ! -e "$threads/bin/threads" ] &&
    [ -x "$goroutines/bin/spawnscope-goroutines" ] && [ ! -e "$goroutines/bin/goroutines" ] &&
    [ -x "$tokio/bin/spawnscope-tokio-tasks" ] && [ ! -e "$tokio/bin/tokio-tasks" ] &&
    [ -x "$processes/bin/spawnscope-processes" ] && [ ! -e "$processes/bin/processes" ]
}
case_passes "nix build: completions and the man page installed; workloads as spawnscope-threads, spawnscope-goroutines, spawnscope-tokio-tasks, spawnscope-processes" installed_files

# --- The scripts behind the apps, run as they are written (with the preamble's bash options),
# with a fake conductor / fake spawnscope that log their arguments.
fake="$tmp/fake"
mkdir -p "$fake/bin" "$fake/log"
chmod 1777 "$fake/log"
cp nix/main-job.sh nix/spawnscope.sh "$fake/"
cat >"$fake/bin/spawnscope" <<'EOF'
#!/usr/bin/env bash
# Fake spawnscope: logs its arguments; `run` writes a results directory as the conductor does.
set -euo pipefail
echo "$*" >>"$FAKE_LOG"
if [ "$1" = run ]; then
  mkdir -p "results/20260101T000000Z-$3-$5-$7"
fi
EOF
chmod -R a+rX "$fake"
chmod +x "$fake/bin/spawnscope"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

main_job_without_root() {
  local log="$fake/log/main-job-nobody" rc=0
  : >"$log"
  chmod 666 "$log"
  (cd "$fake" && as_nobody env PATH="$fake/bin:$PATH" FAKE_LOG="$log" \
    bash -euo pipefail "$fake/main-job.sh") 2>"$fake/log/out" || rc=$?
  cat "$fake/log/out"
  [ "$rc" -eq 1 ] && grep -q 'needs root' "$fake/log/out" &&
    grep -q 'sudo ./result/bin/spawnscope-trace' "$fake/log/out" && [ ! -s "$log" ]
}

main_job_as_root() {
  local log="$fake/log/main-job-root" work="$tmp/main-job-cwd"
  mkdir -p "$work/results/20250101T000000Z-threads-hold-10"
  (cd "$work" && env PATH="$fake/bin:$PATH" FAKE_LOG="$log" bash -euo pipefail "$fake/main-job.sh")
  cat "$log"
  diff -u - "$log" <<'EOF'
run --runtime goroutines --workload hold --n 1000000
run --runtime threads --workload hold --n 100000
report results/20260101T000000Z-goroutines-hold-1000000 results/20260101T000000Z-threads-hold-100000
EOF
}

main_job_passes_arguments() {
  local log="$fake/log/main-job-args"
  env PATH="$fake/bin:$PATH" FAKE_LOG="$log" bash -euo pipefail "$fake/main-job.sh" compare --quick
  [ "$(cat "$log")" = "compare --quick" ]
}

wrapper_without_root() {
  local log="$fake/log/wrapper-nobody" rc=0
  : >"$log"
  chmod 666 "$log"
  as_nobody env SPAWNSCOPE_CONDUCTOR="$fake/bin/spawnscope" FAKE_LOG="$log" \
    bash -euo pipefail "$fake/spawnscope.sh" run --runtime threads --workload hold --n 10 \
    2>"$fake/log/out" || rc=$?
  cat "$fake/log/out"
  [ "$rc" -eq 1 ] && grep -q 'spawnscope run needs root' "$fake/log/out" &&
    grep -q 'sudo ./result/bin/spawnscope run --runtime threads --workload hold --n 10' "$fake/log/out" &&
    [ ! -s "$log" ] || return 1
  # What needs no root runs without it.
  as_nobody env SPAWNSCOPE_CONDUCTOR="$fake/bin/spawnscope" FAKE_LOG="$log" \
    bash -euo pipefail "$fake/spawnscope.sh" check
  [ "$(cat "$log")" = check ]
}

wrapper_as_root() {
  local log="$fake/log/wrapper-root" work="$tmp/wrapper-cwd"
  mkdir -p "$work"
  (cd "$work" && env SPAWNSCOPE_CONDUCTOR="$fake/bin/spawnscope" FAKE_LOG="$log" \
    bash -euo pipefail "$fake/spawnscope.sh" run --runtime goroutines --workload hold --n 10)
  [ "$(cat "$log")" = "run --runtime goroutines --workload hold --n 10" ]
}

if command -v setpriv >/dev/null 2>&1; then
  case_passes "main job without root: says how to re-run with sudo, runs nothing, exits 1" main_job_without_root
  case_passes "spawnscope run without root: says how to re-run with sudo; check runs" wrapper_without_root
else
  warn "setpriv not installed: the cases without root are not run"
fi
case_passes "main job as root: 1M goroutines, 100k threads, then the report of those two runs" main_job_as_root
case_passes "main job with arguments: passes them to spawnscope" main_job_passes_arguments
case_passes "spawnscope run as root: the conductor gets the arguments" wrapper_as_root

# --- Broken copies: the check must refuse each, for the right reason.
app_typo() {
  # shellcheck disable=SC2016 # ${...} is Nix, for the flake
  broken app-typo flake.nix 's|goroutines = app p.goroutines;|goroutines = { type = "app"; program = "${p.goroutines}/bin/goroutine"; };|' &&
    refused app-typo 'apps\.[a-z0-9_-]+\.goroutines: program /nix/store/[^ ]*/bin/goroutine is not the main program'
}
case_passes "refused: an app whose program names a binary no package has" app_typo

main_program_typo() {
  broken main-program-typo flake.nix 's|mainProgram = "spawnscope-goroutines";|mainProgram = "spawnscope-goroutine";|' &&
    refused main-program-typo 'apps\.[a-z0-9_-]+\.goroutines: /nix/store/[^ ]*-goroutines-[^ ]*/bin/spawnscope-goroutine is not an executable of the built package'
}
case_passes "refused: an app pointing at a binary the built package lacks (wrong meta.mainProgram)" main_program_typo

lock_file_lost() {
  cp -r "$tmp/flake" "$tmp/lock-file-lost"
  rm "$tmp/lock-file-lost/Cargo.lock"
  refused lock-file-lost "Cargo\.lock.*(No such file|does not exist)"
}
case_passes "refused: the Rust packages' Cargo.lock is gone" lock_file_lost

cargo_lock_unset() {
  broken cargo-lock-unset flake.nix '/cargoLock.lockFile = .\/Cargo.lock;/d' &&
    refused cargo-lock-unset 'cargoHash, cargoVendorDir, cargoDeps, or cargoLock must be set'
}
case_passes "refused: a Rust package without cargoLock" cargo_lock_unset

vendor_hash_unset() {
  broken vendor-hash-unset flake.nix '/vendorHash = null;/d' &&
    refused vendor-hash-unset 'buildGoModule: vendorHash is missing'
}
case_passes "refused: the Go package without vendorHash" vendor_hash_unset

devshell_missing_package() {
  broken devshell-missing flake.nix '/devShells = /,$ s|pkgs\.inferno$|pkgs.inferno-flamegraph|' &&
    refused devshell-missing "attribute 'inferno-flamegraph' missing"
}
case_passes "refused: a devShell naming a package nixpkgs does not have" devshell_missing_package

devshell_old_perf() {
  broken devshell-old-perf flake.nix '/devShells = /,$ s|pkgs\.perf$|pkgs.linuxPackages.perf|' &&
    refused devshell-old-perf 'linuxPackages.perf is now perf'
}
case_passes "refused: a devShell with linuxPackages.perf (moved to perf)" devshell_old_perf

lock_mismatch() {
  broken lock-mismatch flake.nix 's|github:NixOS/nixpkgs/nixos-25.11|github:NixOS/nixpkgs/nixos-unstable|' &&
    refused lock-mismatch 'flake.nix asks for github:NixOS/nixpkgs/nixos-unstable but flake.lock pins'
}
case_passes "refused: flake.nix and flake.lock name different nixpkgs" lock_mismatch

echo
if [ "$failed" -gt 0 ]; then
  printf 'failed: %s\n' "${failed_cases[@]}"
fi
echo "test-nix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
