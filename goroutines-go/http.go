package main

// The HTTP/1.1 that serve speaks, parsed by hand rather than with net/http, so that the three
// binaries do the same protocol work with the same buffers (workload-rs/src/http.rs is the same
// parser). Pure: it says what the bytes received so far hold, and owns no buffer.

import (
	"bytes"
	"strconv"
	"strings"
)

// maxHead is the size of a connection's read buffer: a request line and its headers must fit.
const maxHead = 4096

type verdict int

const (
	incomplete      verdict = iota // no blank line yet: read more
	complete                       // a whole head: answer once its body is skipped
	badRequest                     // 400: a malformed request line, header or Content-Length
	headersTooLarge                // 431: no blank line within maxHead bytes
)

// request is one complete request head.
type request struct {
	headLen   int    // the request line and headers, blank line included
	bodyLen   uint64 // Content-Length: bytes after the head, skipped
	keepAlive bool
}

var (
	crlf       = []byte("\r\n")
	endOfHead  = []byte("\r\n\r\n")
	httpPrefix = []byte("HTTP/1.")
)

// parseRequest reads the request buf starts with (pipelined ones follow at headLen + bodyLen).
func parseRequest(buf []byte) (request, verdict) {
	end := bytes.Index(buf, endOfHead)
	switch {
	case end < 0 && len(buf) < maxHead:
		return request{}, incomplete
	case end < 0 || end+len(endOfHead) > maxHead:
		return request{}, headersTooLarge
	}
	req := request{headLen: end + len(endOfHead)}
	line, headers, _ := bytes.Cut(buf[:end], crlf)
	minor, ok := requestLine(line)
	if !ok {
		return request{}, badRequest
	}
	askedClose, askedKeepAlive, hasLength := false, false, false
	for len(headers) > 0 {
		line, headers, _ = bytes.Cut(headers, crlf)
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !isToken(name) {
			return request{}, badRequest
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseLength(value)
			// Two different lengths make the body's end ambiguous (request smuggling).
			if !ok || (hasLength && n != req.bodyLen) {
				return request{}, badRequest
			}
			req.bodyLen, hasLength = n, true
		case bytes.EqualFold(name, []byte("Connection")):
			for rest := value; len(rest) > 0; {
				var option []byte
				option, rest, _ = bytes.Cut(rest, []byte(","))
				option = bytes.Trim(option, " \t")
				askedClose = askedClose || bytes.EqualFold(option, []byte("close"))
				askedKeepAlive = askedKeepAlive || bytes.EqualFold(option, []byte("keep-alive"))
			}
		}
	}
	// HTTP/1.1 keeps the connection unless asked to close; HTTP/1.0 only when asked to keep it.
	req.keepAlive = !askedClose && (minor > 0 || askedKeepAlive)
	return req, complete
}

// requestLine checks `METHOD SP TARGET SP HTTP/1.x` and returns x.
func requestLine(line []byte) (minor byte, ok bool) {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || !isToken(method) || len(target) == 0 || len(version) != len(httpPrefix)+1 ||
		!bytes.HasPrefix(version, httpPrefix) {
		return 0, false
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			return 0, false
		}
	}
	x := version[len(httpPrefix)]
	if x < '0' || x > '9' {
		return 0, false
	}
	return x - '0', true
}

// isToken is RFC 9110's token: what a method or a header name is made of.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		isAlnum := (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !isAlnum && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return false
		}
	}
	return true
}

// parseLength is a Content-Length: digits only, at most 2^64-1.
func parseLength(value []byte) (uint64, bool) {
	if len(value) == 0 {
		return 0, false
	}
	n := uint64(0)
	for _, c := range value {
		if c < '0' || c > '9' || n > (^uint64(0)-uint64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// okResponse is the answer to every good request, headers and body in one slice so that it goes
// out in one write; built once per run. closing: the connection closes after it.
func okResponse(bodyBytes uint64, closing bool) []byte {
	head := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.FormatUint(bodyBytes, 10) +
		"\r\nContent-Type: text/plain\r\n"
	if closing {
		head += "Connection: close\r\n"
	}
	head += "\r\n"
	return append([]byte(head), bytes.Repeat([]byte("x"), int(bodyBytes))...)
}

// The answers to bad requests; the connection closes after them.
var (
	badRequestResponse      = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	headersTooLargeResponse = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)
