package main

// End-to-end tests of the built binary: every workload's output validates against the shared
// schema, hold proves coexistence, and the shared bad-input table is refused as it says.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goroutines-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "goroutines")
	// The one way it is built (pure Go): scripts/build-goroutines.sh.
	build := exec.Command(filepath.Join("..", "scripts", "build-goroutines.sh"), binary)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building the goroutines binary: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type runOutput struct {
	stdout, stderr string
	code           int
}

func runBinary(t *testing.T, args ...string) runOutput {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return runOutput{stdout.String(), stderr.String(), code}
}

// events decodes JSON Lines, validating each against the schema.
func events(t *testing.T, s *schemaValidator, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(stdout))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if err := s.validateLine(line); err != nil {
			t.Fatalf("invalid event %s: %v", line, err)
		}
		if !strings.HasPrefix(line, `{"event":`) {
			t.Fatalf("`event` is not the first key: %s", line)
		}
		var event map[string]any
		json.Unmarshal([]byte(line), &event)
		out = append(out, event)
	}
	return out
}

func only(t *testing.T, evs []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, e := range evs {
		if e["event"] == kind {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %q event, got %d", kind, len(found))
	}
	return found[0]
}

func TestEveryWorkloadValidates(t *testing.T) {
	s := loadSchema(t)
	runs := [][]string{
		{"sleep", "--n", "300", "--sleep", "20ms"},
		{"hold", "--n", "300", "--hold-for", "10ms"},
		{"churn", "--n", "300", "--batch", "16"},
		{"pingpong", "--n", "2", "--rounds", "500"},
		{"chain", "--n", "20", "--events", "50", "--type", "int"},
		{"chain", "--n", "20", "--events", "50", "--type", "str", "--size", "64"},
		{"chain", "--n", "20", "--events", "50", "--type", "str_ptr"},
		{"chain", "--n", "20", "--events", "50", "--type", "str_clone"},
	}
	for _, args := range runs {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := runBinary(t, args...)
			if out.code != 0 {
				t.Fatalf("exit %d: %s", out.code, out.stderr)
			}
			evs := events(t, s, out.stdout)
			if evs[0]["event"] != "start" || evs[len(evs)-1]["event"] != "result" {
				t.Fatalf("want start first and result last, got %v ... %v", evs[0]["event"], evs[len(evs)-1]["event"])
			}
			result := only(t, evs, "result")
			if result["spawned"] != result["target"] || result["ok"] != true {
				t.Fatalf("spawned %v of %v, ok %v", result["spawned"], result["target"], result["ok"])
			}
			// The work done is exactly what was asked for: every event arrives, every hop returns.
			wantWork := map[string][2]any{
				"sleep": {"tasks/s", 300.0}, "hold": {"tasks/s", 300.0}, "churn": {"tasks/s", 300.0},
				"pingpong": {"hops/s", 2.0 * 500 * 2}, "chain": {"events/s", 20.0 * 50},
			}[args[0]]
			tp := result["throughput"].(map[string]any)
			if tp["unit"] != wantWork[0] || tp["count"] != wantWork[1] || tp["value"].(float64) <= 0 {
				t.Fatalf("throughput %v, want %v", tp, wantWork)
			}
			// Phases are contiguous and in time order.
			var last float64
			for _, p := range result["phases"].([]any) {
				span := p.(map[string]any)
				if span["start_ns"].(float64) < last {
					t.Fatalf("phases out of order: %v", result["phases"])
				}
				last = span["end_ns"].(float64)
			}
		})
	}
}

func TestHoldProvesCoexistence(t *testing.T) {
	out := runBinary(t, "hold", "--n", "2000") // stdin is empty: EOF releases at once
	if out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	evs := events(t, loadSchema(t), out.stdout)
	peak := only(t, evs, "peak")
	if peak["alive"] != 2000.0 || peak["expected"] != 2000.0 {
		t.Fatalf("peak: %v alive of %v expected, want 2000", peak["alive"], peak["expected"])
	}
	result := only(t, evs, "result")
	if result["alive_at_peak"] != 2000.0 {
		t.Fatalf("alive_at_peak %v, want 2000", result["alive_at_peak"])
	}
	stats := result["runtime_stats"].(map[string]any)
	if stats["goroutine_stack_bytes"].(float64) < 2000*2048 {
		t.Fatalf("2000 parked goroutines hold at least 2 KiB of stack each; runtime says %v bytes", stats["goroutine_stack_bytes"])
	}
	var names []string
	for _, e := range evs {
		if e["event"] == "phase" {
			names = append(names, e["name"].(string))
		}
	}
	if strings.Join(names, ",") != "spawn,steady,join,end" {
		t.Fatalf("hold phases %v", names)
	}
}

func TestGuardStopsSpawningAsData(t *testing.T) {
	// A reserve larger than any machine's memory: the guard must stop at its first check, report
	// the memory limit and exit 3 instead of crashing.
	out := runBinary(t, "hold", "--n", "5000", "--reserve", "1048576G")
	if out.code != 3 {
		t.Fatalf("exit %d, want 3; stderr: %s", out.code, out.stderr)
	}
	result := only(t, events(t, loadSchema(t), out.stdout), "result")
	failure := result["failure"].(map[string]any)
	if result["ok"] != false || failure["limit"] != "memory" || failure["errno_name"] != "ENOMEM" {
		t.Fatalf("failure %v", failure)
	}
	if spawned := result["spawned"].(float64); spawned >= 5000 || spawned != result["alive_at_peak"].(float64) {
		t.Fatalf("spawned %v, alive at peak %v: spawning should stop early and all spawned be alive", spawned, result["alive_at_peak"])
	}
}

// appliesTo says whether a bad-input row's runtime column ("all", or programs separated by
// commas) names program.
func appliesTo(column, program string) bool {
	if column == "all" {
		return true
	}
	for _, name := range strings.Split(column, ",") {
		if name == program {
			return true
		}
	}
	return false
}

// badInputRows reads schema/bad-input.tsv for this runtime.
func badInputRows(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "schema", "bad-input.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][2]string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.SplitN(line, "\t", 3)
		if len(cols) != 3 {
			t.Fatalf("malformed row %q", line)
		}
		if appliesTo(cols[0], program) {
			rows = append(rows, [2]string{cols[1], cols[2]})
		}
	}
	if len(rows) < 20 {
		t.Fatalf("only %d rows for %s", len(rows), program)
	}
	return rows
}

func TestBadInputIsRefused(t *testing.T) {
	// {busy_port} in a row is a port in use: one this test holds a listener on.
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strings.NewReplacer("{busy_port}", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port))
	for _, row := range badInputRows(t) {
		expect, args := busyPort.Replace(row[0]), strings.Fields(busyPort.Replace(row[1]))
		t.Run(row[1], func(t *testing.T) {
			out := runBinary(t, args...)
			firstLine, _, _ := strings.Cut(out.stderr, "\n")
			switch {
			case out.code != 2:
				t.Errorf("exit %d, want 2", out.code)
			case out.stdout != "":
				t.Errorf("stdout not empty: %q", out.stdout)
			case !strings.HasPrefix(firstLine, program+": ") || !strings.Contains(firstLine, expect):
				t.Errorf("first stderr line %q does not name %q", firstLine, expect)
			case !strings.Contains(out.stderr, "usage: "+program):
				t.Errorf("no usage on stderr")
			}
		})
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	out := runBinary(t, "--help")
	if out.code != 0 || !strings.HasPrefix(out.stdout, "usage: goroutines") || out.stderr != "" {
		t.Fatalf("--help: exit %d, stdout %q", out.code, out.stdout)
	}
}

// The binary is pure Go: serve imports `net`, which links cgo when CGO_ENABLED is on, and then
// the runtime starts its threads through glibc (clone3, pthread stacks) in every workload.
func TestBuiltWithoutCgo(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	if !strings.Contains(string(out), "CGO_ENABLED=0") {
		t.Fatalf("built with cgo:\n%s", out)
	}
}

// Built with cgo on (as most Go programs are), the runtime keeps an extra M for callbacks from
// threads C made, which has no thread of its own: the OS threads the workload says it made are
// the kernel's count of its threads, read at the same peak (before: pprof's threadcreate count,
// one more, and the probes' threads check failed by one). The runtime may start a thread between
// the two readings, so a few runs are given to find them at one moment.
func TestCgoBuildCountsTheThreadsItMade(t *testing.T) {
	cgoBinary := filepath.Join(t.TempDir(), "goroutines-cgo")
	build := exec.Command(filepath.Join("..", "scripts", "build-goroutines.sh"), "--cgo", cgoBinary)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	if err := build.Run(); err != nil {
		if exitErr, ok := err.(*exec.ExitError); ok && exitErr.ExitCode() == 77 {
			t.Skipf("SKIP: %s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("build-goroutines.sh --cgo: %v: %s", err, stderr.String())
	}
	var seen []string
	for try := 0; try < 5; try++ {
		out, err := exec.Command(cgoBinary, "hold", "--n", "200", "--hold-for", "50ms").Output()
		if err != nil {
			t.Fatalf("hold: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var result struct {
			StatusAtPeak struct {
				Threads uint64 `json:"threads"`
			} `json:"status_at_peak"`
			RuntimeStats struct {
				OsThreadsCreated uint64 `json:"os_threads_created"`
			} `json:"runtime_stats"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &result); err != nil {
			t.Fatalf("result: %v", err)
		}
		kernel, made := result.StatusAtPeak.Threads, result.RuntimeStats.OsThreadsCreated
		if kernel > 1 && made == kernel {
			return
		}
		seen = append(seen, strconv.FormatUint(made, 10)+" made, "+strconv.FormatUint(kernel, 10)+" threads")
	}
	t.Fatalf("the threads made never matched the kernel's count at the peak: %v", seen)
}

// The start gate (--wait-to-start): after `start` nothing happens until a line on stdin, and
// hold's release is the line after it, even when both arrive in one write (one buffer reads
// stdin for the whole process).
func TestStartGateWaitsForItsLine(t *testing.T) {
	r := startServe(t, "hold", "--n", "200", "--wait-to-start")
	r.next(t, "start")
	select {
	case line, ok := <-r.lines:
		t.Fatalf("an event before the gate's line (open: %v): %s", ok, line)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := io.WriteString(r.stdin, "start\nrelease\n"); err != nil {
		t.Fatal(err)
	}
	if phase := r.next(t, "phase"); phase["name"] != "spawn" {
		t.Fatalf("first phase after the gate: %v", phase)
	}
	r.next(t, "peak")
	// stdin stays open: only the buffered second line can release the tasks.
	timeout := time.After(30 * time.Second)
	for {
		if _, ok := r.read(t, timeout); !ok {
			break
		}
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr: %s", err, r.stderr.String())
	}
	result := r.seen[len(r.seen)-1]
	if result["event"] != "result" || result["spawned"] != float64(200) {
		t.Fatalf("last event: %v", result)
	}
}

// --go-trace FILE: the runtime's execution trace of the whole run lands in FILE (its header
// says the Go version's format), and the run's events are those of a run without it.
func TestGoTraceWritesTheRunsTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go.trace")
	out := runBinary(t, "pingpong", "--n", "10", "--rounds", "10", "--go-trace", path)
	if out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	evs := events(t, loadSchema(t), out.stdout)
	if last := evs[len(evs)-1]; last["event"] != "result" || last["spawned"] != float64(20) {
		t.Fatalf("last event: %v", last)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 1024 || !bytes.HasPrefix(data, []byte("go 1.")) || !bytes.Contains(data[:16], []byte(" trace\x00")) {
		t.Fatalf("not a Go execution trace: %d bytes, starting %q", len(data), string(data[:16]))
	}
}

// A dry run checks the trace's path and leaves nothing behind; a path that cannot be written is
// bad usage before `start`.
func TestGoTraceDryRunChecksThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "go.trace")
	if out := runBinary(t, "hold", "--go-trace", path, "--dry-run"); out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the dry run left %s behind (%v)", path, err)
	}
	for _, bad := range []string{filepath.Join(dir, "missing", "go.trace"), dir} {
		out := runBinary(t, "hold", "--go-trace", bad, "--dry-run")
		firstLine, _, _ := strings.Cut(out.stderr, "\n")
		if out.code != 2 || out.stdout != "" || !strings.Contains(firstLine, bad) {
			t.Fatalf("--go-trace %s: exit %d, stdout %q, stderr %q", bad, out.code, out.stdout, firstLine)
		}
	}
}

// A trace that could not be written whole fails the run (exit 1, said on stderr) after its
// `result`: runtime/trace itself drops its writer's errors.
func TestGoTraceWriteFailureIsSaid(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full: ", err)
	}
	out := runBinary(t, "churn", "--n", "100", "--go-trace", "/dev/full")
	if out.code != 1 || !strings.Contains(out.stderr, "no space left on device") {
		t.Fatalf("exit %d, stderr %q", out.code, out.stderr)
	}
	if !strings.Contains(out.stdout, `"event":"result"`) {
		t.Fatalf("no result before the failure: %q", out.stdout)
	}
}

// The GC's work at the rusage read: there, sane and within the process's CPU. 200,000 goroutines
// grow the heap past its first goal, so the GC must have run and its figures cannot be zero.
func TestGCWorkIsReportedBesideTheUserTime(t *testing.T) {
	out := runBinary(t, "hold", "--n", "200000")
	if out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	result := only(t, events(t, loadSchema(t), out.stdout), "result")
	stats := result["runtime_stats"].(map[string]any)
	gc, ok := stats["gc_at_getrusage"].(map[string]any)
	if !ok {
		t.Fatalf("no gc_at_getrusage in %v", stats)
	}
	cycles, total := gc["cycles"].(float64), gc["cpu_s"].(float64)
	if cycles < 1 || total <= 0 {
		t.Fatalf("200,000 goroutines and no GC work: %v", gc)
	}
	if cycles < stats["gc_cycles"].(float64) {
		t.Fatalf("fewer cycles at getrusage (%v) than at the peak (%v)", cycles, stats["gc_cycles"])
	}
	parts := 0.0
	for _, k := range []string{"assist_cpu_s", "dedicated_cpu_s", "idle_cpu_s", "pause_cpu_s"} {
		v := gc[k].(float64)
		if v < 0 {
			t.Fatalf("%s %v < 0", k, v)
		}
		parts += v
	}
	if d := parts - total; d > 1e-6 || d < -1e-6 {
		t.Fatalf("the parts sum to %v s, the total is %v s", parts, total)
	}
	ru := result["rusage"].(map[string]any)
	cpu := (ru["user_us"].(float64) + ru["sys_us"].(float64)) / 1e6
	if total > cpu {
		t.Fatalf("GC CPU %v s above the process's own CPU %v s", total, cpu)
	}
	// Per phase: one entry per span of `phases`, named alike, adding up to no more than the whole.
	spans := result["phases"].([]any)
	perPhase := stats["gc_per_phase"].([]any)
	if len(perPhase) != len(spans) {
		t.Fatalf("%d gc_per_phase entries for %d phases", len(perPhase), len(spans))
	}
	var phaseCycles, phaseCPU float64
	for i, p := range perPhase {
		g := p.(map[string]any)
		if g["name"] != spans[i].(map[string]any)["name"] || g["cpu_s"].(float64) < 0 {
			t.Fatalf("gc_per_phase[%d] %v against phase %v", i, g, spans[i])
		}
		phaseCycles += g["cycles"].(float64)
		phaseCPU += g["cpu_s"].(float64)
	}
	if phaseCycles > cycles || phaseCPU > total+1e-9 || phaseCycles < 1 {
		t.Fatalf("phases hold %v cycles and %v s; the whole run %v and %v s", phaseCycles, phaseCPU, cycles, total)
	}
}
