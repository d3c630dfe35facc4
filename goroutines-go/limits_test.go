package main

import (
	"strings"
	"testing"
)

// tableReadings builds readings from a table's key=value list (keys as in the schema's
// `readings` object).
func tableReadings(t *testing.T, text string) readings {
	t.Helper()
	var r readings
	for _, pair := range strings.Fields(text) {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			t.Fatalf("reading %q is not key=value", pair)
		}
		v := opt(tableUint(t, value), true)
		switch key {
		case "euid":
			r.euid = *v
		case "threads_max":
			r.threadsMax = v
		case "tasks_on_host":
			r.tasksOnHost = v
		case "pid_max":
			r.pidMax = v
		case "max_map_count":
			r.maxMapCount = v
		case "maps":
			r.maps = v
		case "rlimit_nproc":
			r.rlimitNproc = v
		case "threads":
			r.threads = v
		case "cgroup_pids_max":
			r.cgroupPidsMax = v
		case "cgroup_pids_current":
			r.cgroupPidsCurrent = v
		case "mem_available_bytes":
			r.memAvailable = v
		case "cgroup_mem_limit_bytes":
			r.cgroupMemLimit = v
		case "cgroup_mem_usage_bytes":
			r.cgroupMemUsage = v
		default:
			t.Fatalf("limit-diagnosis.tsv: unknown reading %q", key)
		}
	}
	return r
}

// TestLimitDiagnosisTable checks every row of schema/limit-diagnosis.tsv, which
// threads-rs/src/limits.rs checks too. Goroutines have no errno to diagnose (the limit comes from
// the guard), so the limit column is the input of detail here.
func TestLimitDiagnosisTable(t *testing.T) {
	for _, row := range tableRows(t, "limit-diagnosis.tsv", 6, 30) {
		text, limit, wantHeadroom, wantDetail := row[2], row[3], row[4], row[5]
		r := tableReadings(t, text)
		if got := show(headroom(r.memAvailable, r.cgroupMemLimit, r.cgroupMemUsage)); got != wantHeadroom {
			t.Errorf("%s: headroom %s, want %s", text, got, wantHeadroom)
		}
		if got := r.detail(limit); got != wantDetail {
			t.Errorf("%s: detail of %s %q, want %q", text, limit, got, wantDetail)
		}
	}
}

// TestAutoReserveTable checks every row of schema/auto-reserve.tsv, which threads-rs/src/limits.rs
// checks too.
func TestAutoReserveTable(t *testing.T) {
	for _, row := range tableRows(t, "auto-reserve.tsv", 3, 8) {
		got := autoReserveFor(tableOptional(t, row[0]), tableOptional(t, row[1]))
		if want := tableUint(t, row[2]); got != want {
			t.Errorf("%s %s: %d, want %d", row[0], row[1], got, want)
		}
	}
}

// TestSpawnBudgetTable checks every row of schema/spawn-budget.tsv, which
// threads-rs/src/limits.rs checks too.
func TestSpawnBudgetTable(t *testing.T) {
	for _, row := range tableRows(t, "spawn-budget.tsv", 4, 8) {
		b := newBudget(tableUint(t, row[0]), tableUint(t, row[1]), tableOptional(t, row[2]))
		for _, check := range strings.Fields(row[3]) {
			parts := strings.Split(check, "/")
			if len(parts) != 3 {
				t.Fatalf("check %q is not SPAWNED/READING/OUTCOME", check)
			}
			reading, want := parts[1], parts[2]
			read := false
			left, ok := b.check(tableUint(t, parts[0]), func() *uint64 {
				read = true
				if reading == "." {
					t.Errorf("%s: read when it must not be", check)
					return nil
				}
				return tableOptional(t, reading)
			})
			var got string
			switch {
			case !read:
				got = "skip"
			case !ok:
				got = "stop=" + show(&left)
			case b.reserve == 0:
				got = "off"
			default:
				got = "next=" + show(&b.nextCheck)
			}
			if got != want {
				t.Errorf("%s %s %s: %s gave %s", row[0], row[1], row[2], check, got)
			}
		}
	}
}
