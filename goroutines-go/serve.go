package main

// serve: an HTTP/1.1 keep-alive server on the loopback with a goroutine per connection, the
// same protocol work as threads-rs/src/serve.rs and tokio-rs/src/serve.rs. Main takes every
// accepted connection from the accept loops (one per address), asks the guard and starts its
// goroutine, so the harness stays on one goroutine; the connections only count into atomics.

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// drainFor is how long the drain waits for clients to close their connections.
const drainFor = 10 * time.Second

// serveStats are serve's counts: the connections' goroutines add, main reads.
type serveStats struct {
	open, requests, responseBytes, badRequests, acceptErrors atomic.Uint64
	// main's own: most connections open at once, those still open when the drain gave up, and
	// good requests answered by the release (the end of `load`).
	maxOpen, openAtEnd, requestsInLoad uint64
	idle                               chan struct{} // the last open connection closed
}

// object is the result's `serve`; accepted = connections given a goroutine.
func (s *serveStats) object(accepted uint64) object {
	return object{}.
		with("connections_accepted", accepted).
		with("connections_max_open", s.maxOpen).
		with("requests", s.requests.Load()).
		with("requests_in_load", s.requestsInLoad).
		with("response_bytes", s.responseBytes.Load()).
		with("bad_requests", s.badRequests.Load()).
		with("accept_errors", s.acceptErrors.Load()).
		with("open_at_end", s.openAtEnd)
}

// served is what every connection's goroutine reads and counts into (package-level, as shared).
var served struct {
	spin, sleep               time.Duration
	response, closingResponse []byte // built once per run, shared read-only
	stats                     serveStats
}

// listen binds and listens on every address. It runs before `start`, so that an address that
// cannot be bound is bad usage (exit 2, nothing on stdout) and nothing is left listening.
func listen(cfg *config) ([]*net.TCPListener, error) {
	var listeners []*net.TCPListener
	port := int(cfg.port)
	for k := uint64(1); k <= cfg.addrs; k++ {
		addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(k)), Port: port}
		l, err := net.ListenTCP("tcp4", addr)
		if err == nil {
			listeners = append(listeners, l)
			err = setBacklog(l, int(cfg.backlog))
		}
		if err != nil {
			for _, bound := range listeners {
				bound.Close()
			}
			return nil, fmt.Errorf("--port %d: %s", cfg.port, bindError(addr, err))
		}
		port = l.Addr().(*net.TCPAddr).Port // --port 0: the first bind picks the port for all
	}
	return listeners, nil
}

// setBacklog listens again with --backlog: Go listens with net.core.somaxconn, and Linux updates
// the backlog of a socket that is already listening.
func setBacklog(l *net.TCPListener, backlog int) error {
	raw, err := l.SyscallConn()
	if err != nil {
		return err
	}
	var listenErr error
	if err := raw.Control(func(fd uintptr) { listenErr = syscall.Listen(int(fd), backlog) }); err != nil {
		return err
	}
	return listenErr
}

// bindError says why addr could not be listened on, naming the errno.
func bindError(addr *net.TCPAddr, err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Sprintf("%s cannot be listened on: %v", addr, err)
	}
	why := map[syscall.Errno]string{
		syscall.EADDRINUSE: "is in use", syscall.EACCES: "is not permitted",
		syscall.EADDRNOTAVAIL: "is not available",
	}[errno]
	if why == "" {
		why = "cannot be listened on: " + errno.Error()
	}
	return fmt.Sprintf("%s %s (%s)", addr, why, errnoName(int(errno)))
}

// runServe serves until release: phases listen, load (from the first connection), drain, end.
func runServe(h *harness, listeners []*net.TCPListener) *throughput {
	s := &served.stats
	s.idle = make(chan struct{}, 1)
	h.serve = s
	w := h.cfg.work
	served.spin, served.sleep = time.Duration(w.spinNs), time.Duration(w.sleepNs)
	served.response, served.closingResponse = okResponse(w.bodyBytes, false), okResponse(w.bodyBytes, true)

	h.phase("listen")
	addrs := make([]string, len(listeners))
	for i, l := range listeners {
		addrs[i] = l.Addr().String()
	}
	h.emit(object{}.with("event", "listening").with("t_ns", monotonicNs()).with("addrs", addrs))
	released := make(chan struct{})
	go func() {
		waitForRelease(h.cfg.serveForNs, "serving on "+strings.Join(addrs, ", ")+"; a line or EOF on stdin drains")
		close(released)
	}()
	accepted, stopAccepting := acceptAll(listeners)

	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	incoming, loading, peaked := accepted, false, false
	for serving := true; serving; {
		select {
		case conn, ok := <-incoming:
			if !ok {
				incoming = nil // every listener closed: spawning stopped
				break
			}
			if !loading {
				h.phase("load")
				loading = true
			}
			if !h.maySpawn() {
				conn.Close()
				stopAccepting()
				break
			}
			open := s.open.Add(1)
			h.spawned++
			go serveConn(conn)
			s.maxOpen = maxU64(s.maxOpen, open)
			if !peaked && open >= h.cfg.n {
				peaked = true
				h.emitPeak(h.cfg.n) // and serving goes on
			}
		case <-ticker.C:
			h.tick()
		case <-released:
			serving = false
		}
	}
	if !loading {
		h.phase("load")
	}

	// Per-request figures are of the load phase: what the drain answers is not in it.
	s.requestsInLoad = s.requests.Load()
	h.phase("drain")
	stopAccepting()
	for conn := range accepted { // what the accept loops took before their listener closed
		conn.Close()
	}
	giveUp := time.After(drainFor)
drain:
	for s.open.Load() > 0 {
		select {
		case <-s.idle:
		case <-ticker.C:
			h.tick()
		case <-giveUp:
			break drain
		}
	}
	s.openAtEnd = s.open.Load()
	h.aliveMax = maxU64(h.aliveMax, s.maxOpen)
	h.phase("end")
	return &throughput{"requests/s", s.requestsInLoad, "load"}
}

// acceptAll starts an accept loop per listener. Connections come on accepted, which is closed
// once stop has closed the listeners and every loop has ended.
func acceptAll(listeners []*net.TCPListener) (accepted <-chan net.Conn, stop func()) {
	conns := make(chan net.Conn)
	var loops sync.WaitGroup
	for _, l := range listeners {
		loops.Add(1)
		go acceptLoop(l, conns, &loops)
	}
	go func() {
		loops.Wait()
		close(conns)
	}()
	var once sync.Once
	return conns, func() {
		once.Do(func() {
			for _, l := range listeners {
				l.Close()
			}
		})
	}
}

// acceptLoop hands every connection accepted on l to main until l is closed. A failed accept
// (EMFILE, ENFILE) is counted and retried after 10 ms: running out of descriptors is data.
func acceptLoop(l *net.TCPListener, accepted chan<- net.Conn, loops *sync.WaitGroup) {
	defer loops.Done()
	for {
		conn, err := l.Accept()
		switch {
		case errors.Is(err, net.ErrClosed):
			return
		case err != nil:
			served.stats.acceptErrors.Add(1)
			time.Sleep(10 * time.Millisecond)
		default:
			accepted <- conn
		}
	}
}

// serveConn is a connection's task: read, answer every complete request in the buffer, read
// again; it ends when the client closes, on an error, or after a response that closes.
func serveConn(conn net.Conn) {
	defer closeConn(conn)
	buf := make([]byte, maxHead)
	filled := 0                          // bytes received and not consumed yet, from buf[0]
	answering, keepAlive := false, false // a head is in: answer once its body is skipped
	var owed uint64                      // body bytes still to skip
	for {
		n, err := conn.Read(buf[filled:])
		filled += n
		off := 0
		for {
			if answering {
				skip := minU64(owed, uint64(filled-off))
				off += int(skip)
				if owed -= skip; owed > 0 {
					break
				}
				answering = false
				if !respond(conn, !keepAlive) || !keepAlive {
					return
				}
			}
			req, v := parseRequest(buf[off:filled])
			if v == incomplete {
				break
			}
			if v != complete {
				reject(conn, v)
				return
			}
			off += req.headLen
			answering, owed, keepAlive = true, req.bodyLen, req.keepAlive
		}
		// The start of a request moves to the front, so a head always has maxHead bytes to fit.
		filled = copy(buf, buf[off:filled])
		if err != nil {
			return
		}
	}
}

// respond does the request's work (spin, then sleep) and writes the response in one call.
func respond(conn net.Conn, closing bool) bool {
	if served.spin > 0 {
		spin(served.spin)
	}
	if served.sleep > 0 {
		time.Sleep(served.sleep)
	}
	response := served.response
	if closing {
		response = served.closingResponse
	}
	n, err := conn.Write(response)
	served.stats.responseBytes.Add(uint64(n))
	if err != nil {
		return false
	}
	served.stats.requests.Add(1)
	return true
}

// reject answers a bad request with 400 or 431; the connection then closes.
func reject(conn net.Conn, v verdict) {
	response := badRequestResponse
	if v == headersTooLarge {
		response = headersTooLargeResponse
	}
	n, _ := conn.Write(response)
	served.stats.responseBytes.Add(uint64(n))
	served.stats.badRequests.Add(1)
}

func closeConn(conn net.Conn) {
	conn.Close()
	if served.stats.open.Add(^uint64(0)) == 0 {
		select {
		case served.stats.idle <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// spin busy-loops for d on the monotonic clock (time.Since reads it through the vDSO, no syscall).
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
