package main

// What the workload reads about itself and the host: the monotonic clock, rusage and rlimits, and
// /proc, /sys. threads-rs/src/sys.rs reads the same things.

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// monotonicNs reads CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads, so probes can be cut by
// phase. (time.Now's monotonic reading is not exposed, and it is only called at phase edges.)
func monotonicNs() uint64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return uint64(ts.Sec)*1_000_000_000 + uint64(ts.Nsec)
}

// rusageObject is getrusage(RUSAGE_SELF) as the schema's `rusage` object.
func rusageObject() object {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	us := func(tv syscall.Timeval) uint64 { return uint64(tv.Sec)*1_000_000 + uint64(tv.Usec) }
	return object{}.
		with("user_us", us(ru.Utime)).
		with("sys_us", us(ru.Stime)).
		with("maxrss_kb", uint64(ru.Maxrss)).
		with("minflt", uint64(ru.Minflt)).
		with("majflt", uint64(ru.Majflt)).
		with("nvcsw", uint64(ru.Nvcsw)).
		with("nivcsw", uint64(ru.Nivcsw))
}

// rlimitNproc is RLIMIT_NPROC's soft limit; ok is false when unlimited.
func rlimitNproc() (uint64, bool) {
	const rlimitNPROC = 6
	var rl syscall.Rlimit
	if syscall.Getrlimit(rlimitNPROC, &rl) != nil || rl.Cur == ^uint64(0) {
		return 0, false
	}
	return rl.Cur, true
}

func errnoName(errno int) string {
	names := map[int]string{
		1: "EPERM", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES", 22: "EINVAL", 23: "ENFILE", 24: "EMFILE",
		28: "ENOSPC", 98: "EADDRINUSE", 99: "EADDRNOTAVAIL",
	}
	if name, ok := names[errno]; ok {
		return name
	}
	return "E?"
}

func readUint(path string) (uint64, bool) { return readUintWith(readFile, path) }

// sysctl reads a sysctl by its /proc/sys path, e.g. kernel/threads-max.
func sysctl(key string) (uint64, bool) { return readUint(filepath.Join("/proc/sys", key)) }

// statusFields returns the first number after each `Name:` of a /proc file.
func statusFields(path string) map[string]uint64 {
	data, _ := os.ReadFile(path)
	fields := map[string]uint64{}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if words := strings.Fields(value); len(words) > 0 {
			if v, err := strconv.ParseUint(words[0], 10, 64); err == nil {
				fields[name] = v
			}
		}
	}
	return fields
}

// statusObject holds the fields of /proc/self/status the schema's `status` object carries (kB).
func statusObject() object {
	f := statusFields("/proc/self/status")
	return object{}.
		with("vm_size_kb", f["VmSize"]).
		with("vm_rss_kb", f["VmRSS"]).
		with("vm_hwm_kb", f["VmHWM"]).
		with("rss_anon_kb", f["RssAnon"]).
		with("vm_pte_kb", f["VmPTE"]).
		with("vm_stk_kb", f["VmStk"]).
		with("threads", f["Threads"])
}

func threadCount() uint64 { return statusFields("/proc/self/status")["Threads"] }

func meminfo(name string) (uint64, bool) {
	v, ok := statusFields("/proc/meminfo")[name]
	return v * 1024, ok
}

// tasksOnHost counts tasks (threads) on the whole host: /proc/loadavg's fourth field's denominator.
func tasksOnHost() (uint64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	words := strings.Fields(string(data))
	if len(words) < 4 {
		return 0, false
	}
	_, total, _ := strings.Cut(words[3], "/")
	v, err := strconv.ParseUint(total, 10, 64)
	return v, err == nil
}

// mapCount counts this process's memory mappings (lines of /proc/self/maps).
func mapCount() (uint64, bool) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	buf := make([]byte, 1<<16)
	var lines uint64
	for {
		n, err := f.Read(buf)
		lines += uint64(bytes.Count(buf[:n], []byte{'\n'}))
		if err == io.EOF {
			return lines, true
		}
		if err != nil {
			return 0, false
		}
	}
}

// cgroupDir is where this process's cgroup keeps one controller's files.
type cgroupDir struct {
	dir   string
	mount string // limits are looked up from dir up to here
	v2    bool
}

// findCgroupDir finds the directory of controller (memory, pids) for this process: the v1
// hierarchy that has it, else the v2 (unified) one. Handles pure v1, hybrid and pure v2 hosts.
func findCgroupDir(controller string) (cgroupDir, bool) {
	membership, err1 := os.ReadFile("/proc/self/cgroup")
	mountinfo, err2 := os.ReadFile("/proc/self/mountinfo")
	if err1 != nil || err2 != nil {
		return cgroupDir{}, false
	}
	return locateCgroupDir(controller, string(membership), string(mountinfo), func(point string) string {
		available, _ := os.ReadFile(filepath.Join(point, "cgroup.controllers"))
		return string(available)
	})
}

// locateCgroupDir is findCgroupDir from the texts it reads: /proc/self/cgroup (membership),
// /proc/self/mountinfo, and controllersAt(mount point), the v2 mount's cgroup.controllers (empty
// when unreadable). The cases are schema/cgroup-paths.tsv, shared with threads-rs's
// locate_cgroup_dir.
func locateCgroupDir(controller, membership, mountinfo string, controllersAt func(point string) string) (cgroupDir, bool) {
	type mount struct{ root, point, fstype, options string }
	var mounts []mount
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		preFields, postFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(preFields) >= 5 && len(postFields) >= 3 {
			mounts = append(mounts, mount{preFields[3], preFields[4], postFields[0], postFields[2]})
		}
	}
	join := func(m mount, path string) cgroupDir {
		rel := strings.TrimPrefix(strings.TrimPrefix(path, m.root), "/")
		return cgroupDir{dir: filepath.Join(m.point, rel), mount: m.point}
	}
	has := func(list, item string) bool {
		for _, x := range strings.Split(list, ",") {
			if x == item {
				return true
			}
		}
		return false
	}
	lines := strings.Split(strings.TrimSpace(membership), "\n")
	for _, line := range lines {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && has(parts[1], controller) {
			for _, m := range mounts {
				if m.fstype == "cgroup" && has(m.options, controller) {
					return join(m, parts[2]), true
				}
			}
			return cgroupDir{}, false
		}
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "0::") {
			continue
		}
		path := strings.TrimPrefix(line, "0::")
		for _, m := range mounts {
			if m.fstype != "cgroup2" {
				continue
			}
			available := controllersAt(m.point)
			if !has(strings.Join(strings.Fields(available), ","), controller) {
				return cgroupDir{}, false
			}
			found := join(m, path)
			found.v2 = true
			return found, true
		}
	}
	return cgroupDir{}, false
}

// readText reads a whole file: the file system, or a table's files in the tests.
type readText func(path string) (string, bool)

func readFile(path string) (string, bool) {
	data, err := os.ReadFile(path)
	return string(data), err == nil
}

func readUintWith(read readText, path string) (uint64, bool) {
	text, ok := read(path)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
	return v, err == nil
}

// tightestLimit is the smallest numeric value of file from cg.dir up to the mount (`max` = none).
func tightestLimit(cg cgroupDir, file string, read readText) (uint64, bool) {
	var best uint64
	found := false
	for dir := cg.dir; ; dir = filepath.Dir(dir) {
		if v, ok := readUintWith(read, filepath.Join(dir, file)); ok && (!found || v < best) {
			best, found = v, true
		}
		if dir == cg.mount || dir == "/" || dir == "." {
			return best, found
		}
	}
}

// v1Unlimited: values at or above this are cgroup v1's "no limit" (PAGE_COUNTER_MAX in pages).
const v1Unlimited = 1 << 62

// cgroupMemory returns the memory limit (ok false: unlimited) and usage of the cgroup, in bytes.
func cgroupMemory(cg cgroupDir) (limit uint64, limited bool, usage uint64, usageOk bool) {
	return cgroupMemoryWith(cg, readFile)
}

// cgroupMemoryWith is cgroupMemory with the files read by read; the cases are
// schema/cgroup-limits.tsv.
func cgroupMemoryWith(cg cgroupDir, read readText) (limit uint64, limited bool, usage uint64, usageOk bool) {
	if cg.v2 {
		limit, limited = tightestLimit(cg, "memory.max", read)
		usage, usageOk = readUintWith(read, filepath.Join(cg.dir, "memory.current"))
		return
	}
	limit, limited = statusLikeField(read, filepath.Join(cg.dir, "memory.stat"), "hierarchical_memory_limit")
	limited = limited && limit < v1Unlimited
	usage, usageOk = readUintWith(read, filepath.Join(cg.dir, "memory.usage_in_bytes"))
	return
}

// statusLikeField reads `name value` lines (memory.stat) for one name.
func statusLikeField(read readText, path, name string) (uint64, bool) {
	data, ok := read(path)
	if !ok {
		return 0, false
	}
	for _, line := range strings.Split(data, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, name+" ")), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// cgroupPids returns pids.max (ok false: unlimited) and pids.current of the cgroup.
func cgroupPids(cg cgroupDir) (max uint64, limited bool, current uint64, currentOk bool) {
	return cgroupPidsWith(cg, readFile)
}

// cgroupPidsWith is cgroupPids with the files read by read; the cases are schema/cgroup-limits.tsv.
func cgroupPidsWith(cg cgroupDir, read readText) (max uint64, limited bool, current uint64, currentOk bool) {
	max, limited = tightestLimit(cg, "pids.max", read)
	current, currentOk = readUintWith(read, filepath.Join(cg.dir, "pids.current"))
	return
}

func syscallGeteuid() int { return syscall.Geteuid() }
