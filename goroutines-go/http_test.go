package main

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseRequest(t *testing.T) {
	long := "GET / HTTP/1.1\r\nX: " + strings.Repeat("y", maxHead) + "\r\n\r\n"
	exactly := "GET / HTTP/1.1\r\nX: " + strings.Repeat("y", maxHead-23) + "\r\n\r\n"
	cases := []struct {
		name, in  string
		verdict   verdict
		headLen   int
		bodyLen   uint64
		keepAlive bool
	}{
		{"1.1 keeps", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", complete, 27, 0, true},
		{"1.1 close", "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", complete, 37, 0, false},
		{"1.1 close, any case", "GET / HTTP/1.1\r\ncOnNeCtIoN:  Keep-Alive , CLOSE\t\r\n\r\n", complete, 52, 0, false},
		{"1.0 closes", "GET / HTTP/1.0\r\n\r\n", complete, 18, 0, false},
		{"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", complete, 42, 0, true},
		{"1.0 keep-alive, any case", "GET / HTTP/1.0\r\nconnection:KEEP-ALIVE\r\n\r\n", complete, 41, 0, true},
		{"body skipped", "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", complete, 39, 5, true},
		{"length, any case", "POST /p HTTP/1.1\r\ncontent-length:  12 \r\n\r\n", complete, 42, 12, true},
		{"the same length twice", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", complete, 57, 3, true},
		{"head of exactly maxHead", exactly, complete, maxHead, 0, true},
		{"nothing yet", "", incomplete, 0, 0, false},
		{"partial line", "GET / HT", incomplete, 0, 0, false},
		{"partial headers", "GET / HTTP/1.1\r\nHost: a\r\n", incomplete, 0, 0, false},
		{"partial end", "GET / HTTP/1.1\r\nHost: a\r\n\r", incomplete, 0, 0, false},
		{"no method", " / HTTP/1.1\r\n\r\n", badRequest, 0, 0, false},
		{"no target", "GET  HTTP/1.1\r\n\r\n", badRequest, 0, 0, false},
		{"two parts", "GET /\r\n\r\n", badRequest, 0, 0, false},
		{"four parts", "GET / HTTP/1.1 x\r\n\r\n", badRequest, 0, 0, false},
		{"HTTP/2", "GET / HTTP/2.0\r\n\r\n", badRequest, 0, 0, false},
		{"not HTTP", "GET / FTP/1.1\r\n\r\n", badRequest, 0, 0, false},
		{"bad method", "G(T / HTTP/1.1\r\n\r\n", badRequest, 0, 0, false},
		{"garbage", "GARBAGE\r\n\r\n", badRequest, 0, 0, false},
		{"header without colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", badRequest, 0, 0, false},
		{"space before colon", "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", badRequest, 0, 0, false},
		{"negative length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", badRequest, 0, 0, false},
		{"empty length", "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", badRequest, 0, 0, false},
		{"length not a number", "POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", badRequest, 0, 0, false},
		{"length overflows", "POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", badRequest, 0, 0, false},
		{"two lengths", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", badRequest, 0, 0, false},
		{"head over maxHead, no end", long[:maxHead], headersTooLarge, 0, 0, false},
		{"head over maxHead, end beyond", long, headersTooLarge, 0, 0, false},
	}
	for _, c := range cases {
		req, v := parseRequest([]byte(c.in))
		want := request{c.headLen, c.bodyLen, c.keepAlive}
		if v != c.verdict || (v == complete && req != want) {
			t.Errorf("%s: got %+v, verdict %d; want %+v, verdict %d", c.name, req, v, want, c.verdict)
		}
	}
}

func TestPipelinedRequestsInOneBuffer(t *testing.T) {
	buf := []byte("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\nConnection: close\r\n\r\nGET /d")
	var got []request
	for off := 0; ; {
		req, v := parseRequest(buf[off:])
		if v == incomplete {
			break
		}
		if v != complete {
			t.Fatalf("verdict %d at %d", v, off)
		}
		got = append(got, req)
		off += req.headLen + int(req.bodyLen)
	}
	want := []request{{19, 0, true}, {39, 3, true}, {38, 0, false}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOkResponse(t *testing.T) {
	if got := string(okResponse(3, false)); got != "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nxxx" {
		t.Errorf("keep-alive response %q", got)
	}
	if got := string(okResponse(0, true)); got != "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" {
		t.Errorf("closing response %q", got)
	}
}

// resetServed sets serve's shared state up for one connection answered with a body of "xx".
func resetServed() {
	served.response, served.closingResponse = okResponse(2, false), okResponse(2, true)
	served.stats = serveStats{idle: make(chan struct{}, 1)}
	served.stats.open.Store(1)
}

// TestServeConn drives one connection's task over an in-memory pipe: requests split across
// writes, a body larger than the read buffer, pipelining, and the close a request asks for.
func TestServeConn(t *testing.T) {
	resetServed()
	server, client := net.Pipe()
	done := make(chan struct{})
	go func() {
		serveConn(server)
		close(done)
	}()
	go func() {
		for _, part := range []string{
			"GET / HT", "TP/1.1\r\n\r\n",
			"POST / HTTP/1.1\r\nContent-Length: 10000\r\n\r\n" + strings.Repeat("b", 10000),
			"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\n\r\n",
		} {
			if _, err := client.Write([]byte(part)); err != nil {
				return // the server closed before reading the last request: as it should
			}
		}
	}()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	ok := string(served.response)
	want := ok + ok + ok + string(served.closingResponse)
	if string(got) != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	<-done
	if served.stats.open.Load() != 0 || served.stats.requests.Load() != 4 {
		t.Fatalf("open %d, requests %d", served.stats.open.Load(), served.stats.requests.Load())
	}
	if n := served.stats.responseBytes.Load(); n != uint64(len(want)) {
		t.Fatalf("response bytes %d, want %d", n, len(want))
	}
}

func TestServeConnRejects(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []byte
	}{
		{"BAD\r\n\r\n", badRequestResponse},
		{"GET / HTTP/1.1\r\nX: " + strings.Repeat("y", maxHead), headersTooLargeResponse},
	} {
		resetServed()
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() {
			serveConn(server)
			close(done)
		}()
		go client.Write([]byte(c.in))
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(client)
		<-done
		if !bytes.Equal(got, c.want) || served.stats.badRequests.Load() != 1 {
			t.Errorf("%.20q: got %q, want %q; bad requests %d", c.in, got, c.want, served.stats.badRequests.Load())
		}
	}
}
