package main

// serve end to end: the built binary driven by clients in the test (net.Dial), its events read
// as they come and validated against the shared schema.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveRun is a running serve process: its events as they come, and its stdin to release it.
type serveRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, closed at EOF
	stderr bytes.Buffer
	schema *schemaValidator
	seen   []map[string]any // every event read so far
}

func startServe(t *testing.T, args ...string) *serveRun {
	t.Helper()
	r := &serveRun{cmd: exec.Command(binary, args...), lines: make(chan string, 1024), schema: loadSchema(t)}
	r.cmd.Stderr = &r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill() })
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 1<<20), 1<<20)
		for scanner.Scan() {
			r.lines <- scanner.Text()
		}
		close(r.lines)
	}()
	return r
}

// read takes the next event; false at the end of stdout.
func (r *serveRun) read(t *testing.T, timeout <-chan time.Time) (map[string]any, bool) {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			return nil, false
		}
		if err := r.schema.validateLine(line); err != nil {
			t.Fatalf("invalid event %s: %v", line, err)
		}
		if !strings.HasPrefix(line, `{"event":`) {
			t.Fatalf("`event` is not the first key: %s", line)
		}
		var event map[string]any
		json.Unmarshal([]byte(line), &event)
		r.seen = append(r.seen, event)
		return event, true
	case <-timeout:
		t.Fatalf("no event in time; stderr: %s", r.stderr.String())
		return nil, false
	}
}

// next waits for the next event of kind.
func (r *serveRun) next(t *testing.T, kind string) map[string]any {
	t.Helper()
	return r.nextWhere(t, kind, func(e map[string]any) bool { return e["event"] == kind })
}

// nextWhere waits for the next event that matches (what names it if none comes).
func (r *serveRun) nextWhere(t *testing.T, what string, matches func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		event, ok := r.read(t, timeout)
		if !ok {
			t.Fatalf("no %q event before the end; stderr: %s", what, r.stderr.String())
		}
		if matches(event) {
			return event
		}
	}
}

// release writes a line on stdin and waits for the process to end: its exit code and every event.
func (r *serveRun) release(t *testing.T) (int, []map[string]any) {
	t.Helper()
	io.WriteString(r.stdin, "\n")
	r.stdin.Close()
	timeout := time.After(30 * time.Second)
	for {
		if _, ok := r.read(t, timeout); !ok {
			break
		}
	}
	err := r.cmd.Wait()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, r.seen
}

// addrs is the `listening` event's addresses.
func addrs(listening map[string]any) []string {
	var out []string
	for _, a := range listening["addrs"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// client is one keep-alive connection of the test.
type client struct {
	conn   net.Conn
	reader *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{conn, bufio.NewReader(conn)}
}

// do sends a request and reads the response: its status line, headers (names lowercased), body.
func (c *client) do(t *testing.T, request string) (string, map[string]string, []byte) {
	t.Helper()
	if _, err := io.WriteString(c.conn, request); err != nil {
		t.Fatal(err)
	}
	status, err := c.reader.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the status line: %v", err)
	}
	headers := map[string]string{}
	for {
		line, err := c.reader.ReadString('\n')
		if err != nil {
			t.Fatalf("reading headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
		name, value, _ := strings.Cut(strings.TrimSuffix(line, "\r\n"), ":")
		headers[strings.ToLower(name)] = strings.TrimSpace(value)
	}
	length, err := strconv.Atoi(headers["content-length"])
	if err != nil {
		t.Fatalf("Content-Length %q", headers["content-length"])
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(c.reader, body); err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return strings.TrimSuffix(status, "\r\n"), headers, body
}

// get does a keep-alive GET and checks that the answer is 200 with a body of bodyBytes x.
func (c *client) get(t *testing.T, bodyBytes int) {
	t.Helper()
	status, headers, body := c.do(t, "GET / HTTP/1.1\r\nHost: test\r\n\r\n")
	if status != "HTTP/1.1 200 OK" || headers["content-type"] != "text/plain" || headers["connection"] != "" ||
		!bytes.Equal(body, bytes.Repeat([]byte("x"), bodyBytes)) {
		t.Fatalf("response %q %v with %d bytes of body, want 200 and %d x", status, headers, len(body), bodyBytes)
	}
}

func phaseNames(evs []map[string]any) string {
	var names []string
	for _, e := range evs {
		if e["event"] == "phase" {
			names = append(names, e["name"].(string))
		}
	}
	return strings.Join(names, ",")
}

// serveResult is the result's `serve` with numbers as integers.
func serveResult(t *testing.T, evs []map[string]any) (map[string]any, map[string]uint64) {
	t.Helper()
	result := only(t, evs, "result")
	counts := map[string]uint64{}
	for key, value := range result["serve"].(map[string]any) {
		counts[key] = uint64(value.(float64))
	}
	return result, counts
}

func TestServeDrivenByClients(t *testing.T) {
	r := startServe(t, "serve", "--n", "50", "--work", "body=1K")
	listening := addrs(r.next(t, "listening"))
	if len(listening) != 1 || !strings.HasPrefix(listening[0], "127.0.0.1:") {
		t.Fatalf("listening on %v", listening)
	}
	var clients []*client
	for i := 0; i < 50; i++ {
		clients = append(clients, dial(t, listening[0]))
	}
	for round := 0; round < 3; round++ {
		for _, c := range clients {
			c.get(t, 1024)
		}
	}
	peak := r.next(t, "peak")
	if peak["alive"] != 50.0 || peak["expected"] != 50.0 {
		t.Fatalf("peak %v alive of %v expected, want 50", peak["alive"], peak["expected"])
	}
	// A response reaches the client before its goroutine counts it: released once the server
	// says it counted all 150, so that they are all in `load` (requests_in_load).
	r.nextWhere(t, "progress counting 150 requests", func(e map[string]any) bool {
		n, _ := e["requests"].(float64)
		return e["event"] == "progress" && n >= 150
	})
	for _, c := range clients {
		c.conn.Close()
	}
	code, evs := r.release(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	if got := phaseNames(evs); got != "listen,load,drain,end" {
		t.Fatalf("phases %s", got)
	}
	if evs[1]["event"] != "phase" || evs[2]["event"] != "listening" {
		t.Fatalf("want phase listen then listening after start, got %v, %v", evs[1], evs[2])
	}
	for _, e := range evs {
		if _, ok := e["requests"]; e["event"] == "progress" && !ok {
			t.Fatalf("progress without requests: %v", e)
		}
	}
	result, counts := serveResult(t, evs)
	want := map[string]uint64{
		"connections_accepted": 50, "connections_max_open": 50, "requests": 150, "requests_in_load": 150,
		"bad_requests":  0,
		"accept_errors": 0, "open_at_end": 0,
	}
	for key, value := range want {
		if counts[key] != value {
			t.Errorf("serve.%s = %d, want %d", key, counts[key], value)
		}
	}
	if perResponse := uint64(len(okResponse(1024, false))); counts["response_bytes"] != 150*perResponse {
		t.Errorf("response_bytes %d, want 150 x %d", counts["response_bytes"], perResponse)
	}
	tp := result["throughput"].(map[string]any)
	if tp["unit"] != "requests/s" || tp["count"] != 150.0 || tp["value"].(float64) <= 0 {
		t.Errorf("throughput %v", tp)
	}
	if result["spawned"] != 50.0 || result["alive_max"] != 50.0 || result["alive_at_peak"] != 50.0 || result["ok"] != true {
		t.Errorf("spawned %v, alive_max %v, alive_at_peak %v, ok %v",
			result["spawned"], result["alive_max"], result["alive_at_peak"], result["ok"])
	}
	params := result["params"].(map[string]any)
	workParams := params["work"].(map[string]any)
	if params["port"] != 0.0 || params["addrs"] != 1.0 || params["backlog"] != 4096.0 || params["serve_for_ns"] != nil ||
		workParams["body_bytes"] != 1024.0 || workParams["spin_ns"] != 0.0 || workParams["sleep_ns"] != 0.0 {
		t.Errorf("params %v", params)
	}
}

func TestServeWorkSleeps(t *testing.T) {
	r := startServe(t, "serve", "--n", "1", "--work", "sleep=200ms,body=0")
	c := dial(t, addrs(r.next(t, "listening"))[0])
	began := time.Now()
	c.get(t, 0)
	if took := time.Since(began); took < 200*time.Millisecond {
		t.Fatalf("a request took %v with --work sleep=200ms", took)
	}
	c.conn.Close()
	if code, _ := r.release(t); code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
}

func TestServeListensOnEveryAddress(t *testing.T) {
	r := startServe(t, "serve", "--n", "3", "--addrs", "3", "--backlog", "16")
	listening := addrs(r.next(t, "listening"))
	if len(listening) != 3 {
		t.Fatalf("listening on %v, want three addresses", listening)
	}
	_, port, _ := strings.Cut(listening[0], ":")
	var clients []*client
	for k, addr := range listening {
		if want := fmt.Sprintf("127.0.0.%d:%s", k+1, port); addr != want {
			t.Fatalf("address %d is %s, want %s", k, addr, want)
		}
		c := dial(t, addr)
		c.get(t, 128)
		clients = append(clients, c)
	}
	r.next(t, "peak")
	// A bad request is answered 400 and counted; the server then closes the connection.
	bad := dial(t, listening[1])
	if status, _, _ := bad.do(t, "GARBAGE\r\n\r\n"); status != "HTTP/1.1 400 Bad Request" {
		t.Fatalf("status %q for garbage", status)
	}
	if _, err := bad.reader.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after a 400: %v", err)
	}
	// The drain waits for the clients to close their connections.
	go func() {
		time.Sleep(300 * time.Millisecond)
		for _, c := range clients {
			c.conn.Close()
		}
	}()
	code, evs := r.release(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, r.stderr.String())
	}
	result, counts := serveResult(t, evs)
	if counts["connections_accepted"] != 4 || counts["requests"] != 3 || counts["bad_requests"] != 1 ||
		counts["open_at_end"] != 0 {
		t.Fatalf("serve %v", counts)
	}
	if drain := result["phases"].([]any)[2].(map[string]any); drain["dur_ns"].(float64) < 100e6 {
		t.Fatalf("the drain took %v, not waiting for the clients", drain)
	}
}

func TestServeForAWhileWithoutClients(t *testing.T) {
	out := runBinary(t, "serve", "--serve-for", "50ms")
	if out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	evs := events(t, loadSchema(t), out.stdout)
	if got := phaseNames(evs); got != "listen,load,drain,end" {
		t.Fatalf("phases %s", got)
	}
	result, counts := serveResult(t, evs)
	if counts["connections_accepted"] != 0 || counts["requests"] != 0 || result["spawned"] != 0.0 {
		t.Fatalf("serve %v", counts)
	}
	if listen, _ := result["phases"].([]any)[0].(map[string]any)["dur_ns"].(float64); listen < 50e6 {
		t.Fatalf("listened %v ns with --serve-for 50ms", listen)
	}
}

func TestServeGuardStopsAcceptingAsData(t *testing.T) {
	// A reserve larger than any machine's memory: the guard refuses a connection at its first
	// check (after 64 spawns); that one is closed, the listener too, the open ones are still
	// served, and the run ends at release with exit 3.
	r := startServe(t, "serve", "--n", "100", "--reserve", "1048576G")
	addr := addrs(r.next(t, "listening"))[0]
	var clients []*client
	for i := 0; i < 100; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			break // the listener is closed
		}
		clients = append(clients, &client{conn, bufio.NewReader(conn)})
	}
	clients[0].get(t, 128)
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after the guard stopped spawning")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range clients {
		c.conn.Close()
	}
	code, evs := r.release(t)
	if code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, r.stderr.String())
	}
	result, counts := serveResult(t, evs)
	spawned := result["spawned"].(float64)
	if result["failure"].(map[string]any)["limit"] != "memory" || spawned < 1 || spawned >= 100 ||
		counts["connections_accepted"] != uint64(spawned) || counts["requests"] != 1 || counts["open_at_end"] != 0 {
		t.Fatalf("failure %v, spawned %v, serve %v", result["failure"], spawned, counts)
	}
}
