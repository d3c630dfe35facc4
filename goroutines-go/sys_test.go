package main

import (
	"strings"
	"testing"
)

// describe writes a found cgroup directory as schema/cgroup-paths.tsv does.
func describe(cg cgroupDir, found bool) string {
	if !found {
		return "- - -"
	}
	version := "v1"
	if cg.v2 {
		version = "v2"
	}
	return cg.dir + " " + cg.mount + " " + version
}

// TestCgroupPathsTable checks every row of schema/cgroup-paths.tsv, which threads-rs/src/sys.rs
// checks too.
func TestCgroupPathsTable(t *testing.T) {
	for _, row := range tableRows(t, "cgroup-paths.tsv", 7, 20) {
		controller, membership, mountinfo, controllers := row[0], row[1], row[2], row[3]
		cg, found := locateCgroupDir(controller, unescape(membership), unescape(mountinfo),
			func(string) string { return unescape(controllers) })
		if got, want := describe(cg, found), strings.Join(row[4:], " "); got != want {
			t.Errorf("%s in %q: got %s, want %s", controller, membership, got, want)
		}
	}
}

// TestCgroupLimitsTable checks every row of schema/cgroup-limits.tsv, which threads-rs/src/sys.rs
// checks too.
func TestCgroupLimitsTable(t *testing.T) {
	for _, row := range tableRows(t, "cgroup-limits.tsv", 7, 20) {
		controller, version, dir, mount, list := row[0], row[1], row[2], row[3], row[4]
		files := map[string]string{}
		if list != "-" {
			for _, f := range strings.Split(list, ";") {
				path, text, ok := strings.Cut(f, "=")
				if !ok {
					t.Fatalf("file %q is not PATH=TEXT", f)
				}
				files[path] = unescape(text)
			}
		}
		read := func(path string) (string, bool) {
			text, ok := files[path]
			return text, ok
		}
		if version != "v1" && version != "v2" {
			t.Fatalf("cgroup-limits.tsv: unknown version %q", version)
		}
		cg := cgroupDir{dir: dir, mount: mount, v2: version == "v2"}
		var limit, usage uint64
		var limited, usageOk bool
		switch controller {
		case "memory":
			limit, limited, usage, usageOk = cgroupMemoryWith(cg, read)
		case "pids":
			limit, limited, usage, usageOk = cgroupPidsWith(cg, read)
		default:
			t.Fatalf("cgroup-limits.tsv: unknown controller %q", controller)
		}
		got := show(opt(limit, limited)) + " " + show(opt(usage, usageOk))
		if want := row[5] + " " + row[6]; got != want {
			t.Errorf("%s %s %s: got %s, want %s", controller, version, dir, got, want)
		}
	}
}

// TestReadsHostCgroup finds this process's memory cgroup on the host, as the workload does.
func TestReadsHostCgroup(t *testing.T) {
	cg, found := findCgroupDir("memory")
	if !found {
		t.Skip("no memory cgroup controller on this host")
	}
	if !strings.HasPrefix(cg.dir, cg.mount) {
		t.Fatalf("%s outside %s", cg.dir, cg.mount)
	}
	if _, _, _, usageOk := cgroupMemory(cg); !usageOk {
		t.Fatalf("memory usage of %s unreadable", cg.dir)
	}
}
