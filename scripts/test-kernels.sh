#!/usr/bin/env bash
# The kernel matrix: this checkout's userspace booted under other kernels, each in a virtual
# machine (virtme-ng), the suite scripts/lib/kernel-suite.sh run inside each.
#
#   sudo ./scripts/test-kernels.sh               the newest Debian 6.1 and 6.12 kernels (cgroup v2)
#   sudo ./scripts/test-kernels.sh 6.12 …        KERNEL: a series (6.1, 6.12: its newest package
#                                                here) or a release (6.1.0-56-amd64,
#                                                6.12.117+deb12-amd64)
#   sudo ./scripts/test-kernels.sh --suite ci 6.12
#                                                SUITE: full [default] or ci, CI's smaller one
#                                                (threads hold and sleep 2,000, goroutines and
#                                                tokio hold 100,000, the leash; what test.sh runs);
#                                                full adds threads at 10,000 and churn, goroutines
#                                                and tokio sleep, a Go program as a command, a
#                                                --perf run and the bpftrace tools
#
# Each kernel's package (linux-image-RELEASE-unsigned) is downloaded once into
# $SPAWNSCOPE_KERNEL_CACHE [~/.cache/spawnscope/kernels]; its modules go into /lib/modules for the
# VM's boot and are removed on every exit path. The VM uses KVM when KVM can boot the kernel, else
# QEMU's emulation (TCG, said in the output: its times mean nothing, its memory and counts do),
# $SPAWNSCOPE_VM_CPUS [2] CPUs and $SPAWNSCOPE_VM_MEMORY [6G], and is stopped after
# $SPAWNSCOPE_VM_TIMEOUT [3600; 1200 for the ci suite] seconds. SPAWNSCOPE_KERNEL_SUITE sets the
# suite as --suite does; SPAWNSCOPE_KERNEL_CHECKS="check threads-hold-2000 …" runs only those
# checks (names in kernel-suite.sh).
#
# Results: results/kernels-<UTC time>/<release>/ (results.tsv, each check's log, the runs); a
# table kernel × check × result at the end. A VM whose kernel panicked at an int3 (QEMU's emulation
# can meet a static branch mid-patch; a CI run met it twice in one suite) is booted again, twice at
# most, and its suite resumes; any other panic fails it. (Emulating the vCPUs on one host thread,
# -accel tcg,thread=single, would not meet that int3, but it pauses a vCPU for whole slices
# between a switch's nvcsw++ and its tracepoint: the cut at getrusage then misses a switch in
# flight, and the exact switch cross-check fails — seen once in one try.) Exit 0 when every check
# passed on every kernel, 1 when one failed (or a VM gave no results, or its suite did not reach
# its end), 2 on bad arguments, 77 when this host cannot run a VM at all (not root, no apt-get, no
# QEMU to be had: the one line "skipped: why" says which).
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

usage="usage: ${0##*/} [--suite full|ci] [KERNEL...] (KERNEL: a series such as 6.1 or 6.12, or a release such as 6.1.0-56-amd64)"
suite=${SPAWNSCOPE_KERNEL_SUITE:-full}
kernels=()
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) echo "$usage"; exit 0 ;;
    --suite) [ $# -ge 2 ] || { echo "${0##*/}: --suite needs a value (full or ci); $usage" >&2; exit 2; }
      suite=$2; shift 2; continue ;;
    --suite=*) suite=${1#--suite=}; shift; continue ;;
    -*) echo "${0##*/}: unknown option '$1'; $usage" >&2; exit 2 ;;
  esac
  [[ "$1" =~ ^[0-9]+\.[0-9]+(\.[0-9]+(-[0-9]+|\+deb[0-9]+)-[a-z0-9]+)?$ ]] ||
    { echo "${0##*/}: '$1' is neither a kernel series (6.12) nor a Debian kernel release (6.12.117+deb12-amd64); $usage" >&2; exit 2; }
  kernels+=("$1")
  shift
done
[[ "$suite" =~ ^(full|ci)$ ]] || { echo "${0##*/}: the suite is full or ci, not '$suite'; $usage" >&2; exit 2; }
cpus=${SPAWNSCOPE_VM_CPUS:-2}
memory=${SPAWNSCOPE_VM_MEMORY:-6G}
vm_timeout=${SPAWNSCOPE_VM_TIMEOUT:-$([ "$suite" = ci ] && echo 1200 || echo 3600)}
is_count "$cpus" || { echo "${0##*/}: SPAWNSCOPE_VM_CPUS must be a whole number, not '$cpus'; $usage" >&2; exit 2; }
is_count "$vm_timeout" || { echo "${0##*/}: SPAWNSCOPE_VM_TIMEOUT must be seconds, not '$vm_timeout'; $usage" >&2; exit 2; }
[[ "$memory" =~ ^[1-9][0-9]*[MG]$ ]] || { echo "${0##*/}: SPAWNSCOPE_VM_MEMORY must be like 6G or 4096M, not '$memory'; $usage" >&2; exit 2; }
[ ${#kernels[@]} -gt 0 ] || kernels=(6.1 6.12)

# skip WHY: this host cannot run a VM at all; said in one line, exit 77 (test.sh counts it as
# skipped, never as passed).
skip() { echo "skipped: $*" >&2; exit 77; }
is_root || skip "not root: the kernels' modules go into /lib/modules for the VM's boot"
command -v apt-get >/dev/null 2>&1 || skip "no apt-get: the kernels are Debian's packages and QEMU comes from apt"
cache=${SPAWNSCOPE_KERNEL_CACHE:-${HOME:-/root}/.cache/spawnscope/kernels}
mkdir -p "$cache"

# What this script put in /lib/modules, taken out again on every exit path.
installed_modules=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local dir
  for dir in "${installed_modules[@]}"; do
    say "removing $dir"
    if [ "$dir" = /lib/modules ]; then rmdir /lib/modules || true; else rm -rf "$dir"; fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_packages qemu-system-x86 busybox-static kmod jq || true
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "no QEMU (qemu-system-x86_64): the package qemu-system-x86 could not be installed"
need_packages busybox-static kmod jq || die "the VM needs the packages above"
if ! command -v vng >/dev/null 2>&1; then
  command -v pip3 >/dev/null 2>&1 || need_packages python3-pip || die "pip is missing (python3-pip)"
  say "installing virtme-ng (pip3 install virtme-ng)"
  pip3 install --quiet virtme-ng >&2 || pip3 install --quiet --break-system-packages virtme-ng >&2 ||
    die "could not install virtme-ng with pip"
  hash -r
  command -v vng >/dev/null 2>&1 || die "virtme-ng is installed but vng is not on PATH"
fi
need_packages "${BUILD_PACKAGES[@]}" || warn "the build may fail: see the packages above"
build_all
# The suite's command check runs the tests' own Go program; the VM's root is read-only, so it is
# built here, where the suite finds it.
if [ "$suite" = full ]; then
  say "building the tests' Go program for the command check (target/kernel-suite/sleepers)"
  (cd spawnscope/tests/programs/sleepers && go build -o "$REPO_ROOT/target/kernel-suite/sleepers" .) ||
    warn "could not build spawnscope/tests/programs/sleepers: the command check will fail"
fi
# Every suite's process-tree check runs the tests' C program whose children make the threads.
say "building the tests' C program for the process-tree check (target/kernel-suite/forked-threads)"
mkdir -p target/kernel-suite
cc -O2 -pthread -o target/kernel-suite/forked-threads \
  spawnscope/tests/programs/forked-threads/forked-threads.c ||
  warn "could not build spawnscope/tests/programs/forked-threads: the process-tree check will fail"

# package_of KERNEL: the linux-image-…-unsigned package of a series (its newest) or a release.
package_of() {
  local series=$1
  if [[ "$series" =~ ^[0-9]+\.[0-9]+$ ]]; then
    apt-cache search --names-only "^linux-image-${series//./\\.}\\.[0-9]+(-[0-9]+|\\+deb[0-9]+)-amd64-unsigned\$" |
      awk '{ print $1 }' | sort -V | tail -1
  else
    apt-cache show "linux-image-$series-unsigned" >/dev/null 2>&1 && echo "linux-image-$series-unsigned"
  fi
  return 0
}

# unpacked PACKAGE: its files under the cache (downloaded and unpacked once); prints the folder.
unpacked() {
  local pkg=$1 deb dir="$cache/${1#linux-image-}"
  dir=${dir%-unsigned}
  if [ ! -d "$dir/boot" ]; then
    deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -1)
    if [ -z "$deb" ]; then
      say "downloading $pkg into $cache"
      (cd "$cache" && apt-get download -o APT::Sandbox::User=root "$pkg" >&2) || return 1
      deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -1)
    fi
    rm -rf "$dir.tmp" && dpkg-deb -x "$deb" "$dir.tmp" && mv "$dir.tmp" "$dir" || return 1
  fi
  echo "$dir"
}

# with_modules RELEASE DIR: the release's modules in /lib/modules (unless already there).
with_modules() {
  local release=$1 dir=$2
  [ -d "/lib/modules/$release" ] && return 0
  [ -d "$dir/lib/modules/$release" ] || { warn "$release: no lib/modules/$release in its package"; return 1; }
  say "installing the modules of $release in /lib/modules (removed at exit)"
  # A host without modules of its own may have no /lib/modules: made here, removed at exit.
  if [ ! -d /lib/modules ]; then
    mkdir /lib/modules
    installed_modules+=(/lib/modules)
  fi
  installed_modules=("/lib/modules/$release" "${installed_modules[@]}")
  cp -a "$dir/lib/modules/$release" "/lib/modules/$release" && depmod -a "$release"
}

# accel VMLINUZ: kvm when KVM boots this kernel (a trial boot), else tcg.
accel() {
  if [ -n "${SPAWNSCOPE_VM_ACCEL:-}" ]; then echo "$SPAWNSCOPE_VM_ACCEL"; return 0; fi
  if [ -w /dev/kvm ] && timeout 30 vng --run "$1" --cpus 1 --memory 1G -- true >/dev/null 2>&1 </dev/null; then
    echo kvm
  else
    echo tcg
  fi
}

# boot_suite VMLINUZ KOUT RESUME: one boot of the VM running the suite into KOUT (RESUME=1: it keeps
# KOUT/results.tsv and runs what that does not hold yet).
boot_suite() {
  rm -f "$2/vm-exit.txt"
  timeout "$vm_timeout" vng --verbose --run "$1" "${kvm_flag[@]}" --cpus "$cpus" --memory "$memory" \
    --rwdir "$2" -- "SPAWNSCOPE_KERNEL_SUITE=$suite SPAWNSCOPE_KERNEL_RESUME=$3 SPAWNSCOPE_KERNEL_CHECKS='${SPAWNSCOPE_KERNEL_CHECKS:-}' $REPO_ROOT/scripts/lib/kernel-suite.sh $2" \
    </dev/null >"$2/vm.log" 2>&1 || echo "$?" >"$2/vm-exit.txt"
}

out="$REPO_ROOT/results/kernels-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
table="$out/table.tsv"
: >"$table"
failed=0
for kernel in "${kernels[@]}"; do
  pkg=$(package_of "$kernel")
  if [ -z "$pkg" ]; then
    warn "no Debian kernel package for $kernel (apt-cache search linux-image-$kernel)"
    printf '%s\t-\tpackage\tfail\tno linux-image-…-unsigned package found\n' "$kernel" >>"$table"
    failed=1
    continue
  fi
  release=${pkg#linux-image-}
  release=${release%-unsigned}
  dir=$(unpacked "$pkg") || { printf '%s\t-\tpackage\tfail\tdownload or unpack failed\n' "$release" >>"$table"; failed=1; continue; }
  with_modules "$release" "$dir" || { printf '%s\t-\tmodules\tfail\tcould not install its modules\n' "$release" >>"$table"; failed=1; continue; }
  vmlinuz="$dir/boot/vmlinuz-$release"
  how=$(accel "$vmlinuz")
  kvm_flag=()
  if [ "$how" = tcg ]; then
    kvm_flag=(--disable-kvm)
    say "$release ($pkg $(dpkg-deb -f "$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -1)" Version 2>/dev/null)): QEMU emulation (TCG), KVM cannot boot it here: times mean nothing, memory and counts do"
  else
    say "$release ($pkg): KVM"
  fi
  say "$release: the $suite suite (its time limit ${vm_timeout}s)"
  kout="$out/$release"
  mkdir -p "$kout"
  echo "$how" >"$kout/accel.txt"
  boot_suite "$vmlinuz" "$kout" ""
  # Under QEMU's emulation a CPU can meet the int3 of a static branch being patched (perf or a
  # tracepoint switched on or off): the guest's kernel panics ("Oops: int3" in vm.log), an
  # emulator's fault. Booted again (twice at most), the suite goes on after its last recorded
  # check; each panic is a line of the results, its log kept. Any other panic fails the suite.
  for boot in 2 3; do
    if [ -e "$kout/suite-done" ] || ! grep -q 'Kernel panic' "$kout/vm.log"; then break; fi
    oops=$(grep -m1 -E 'Oops|BUG:' "$kout/vm.log" | tr -d '\r' | sed 's/^\[ *[0-9.]*\] //')
    if [[ "$oops" != *"Oops: int3"* ]]; then
      printf 'vm-panic\tfail\tthe kernel panicked, not at an int3 (%s, vm.log): not booted again\n' \
        "${oops:-no Oops line}" >>"$kout/results.tsv"
      break
    fi
    panicked="vm-panicked-$((boot - 1)).log"
    mv "$kout/vm.log" "$kout/$panicked"
    warn "$release: the VM's kernel panicked (${oops}); booting it again (boot $boot of 3), the suite resumes"
    printf 'vm-panic\tinfo\tthe kernel panicked (%s, %s); booted again, the suite resumed\n' \
      "$oops" "$panicked" >>"$kout/results.tsv"
    boot_suite "$vmlinuz" "$kout" 1
  done
  if [ ! -e "$kout/suite-done" ] && [ -s "$kout/results.tsv" ]; then
    printf 'suite\tfail\tthe suite stopped before its end: the checks after its last line did not run (vm.log)\n' >>"$kout/results.tsv"
  fi
  cgroup=$(awk '$1 == "cgroup" { print $2 }' "$kout/machine.txt" 2>/dev/null)
  if [ ! -s "$kout/results.tsv" ]; then
    printf '%s\t%s\tvm\tfail\tno results (vm.log; exit %s)\n' "$release" "${cgroup:--}" "$(cat "$kout/vm-exit.txt" 2>/dev/null || echo 0)" >>"$table"
    failed=1
    continue
  fi
  awk -F'\t' -v k="$release" -v c="${cgroup:--}" '{ print k "\t" c "\t" $0 }' "$kout/results.tsv" >>"$table"
  grep -q $'\tfail\t' "$kout/results.tsv" && failed=1
done
give_to_invoker "$REPO_ROOT/results"

echo
echo "| kernel | cgroup | check | result | found |"
echo "|---|---|---|---|---|"
awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$table"
echo
echo "results: ${out#"$REPO_ROOT"/}/"
exit "$failed"
