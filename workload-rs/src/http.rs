//! The HTTP/1.1 that `serve` speaks, parsed by hand (goroutines-go/http.go is the same parser),
//! so that the three binaries do the same protocol work with the same buffers. Pure: it says what
//! the bytes received so far hold, and owns no buffer.

/// A connection's one read buffer: a request line and its headers must fit in it.
pub const BUFFER: usize = 4096;

const END_OF_HEAD: &[u8] = b"\r\n\r\n";
const CRLF: &[u8] = b"\r\n";
const VERSION_PREFIX: &[u8] = b"HTTP/1.";

/// The answers to bad requests; the connection closes after them.
pub const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
pub const HEADERS_TOO_LARGE: &[u8] =
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// One complete request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The request line and headers, blank line included.
    pub head_len: usize,
    /// Content-Length: the body bytes after the head, skipped.
    pub body_len: u64,
    /// The connection stays open after the response.
    pub keep_alive: bool,
}

/// What the bytes at the start of a buffer hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// No blank line yet: read more.
    Incomplete,
    Complete(Request),
    /// 400: a malformed request line, header or Content-Length.
    Bad,
    /// 431: no blank line within [`BUFFER`] bytes.
    TooLarge,
}

/// Reads the request `buf` starts with (pipelined ones follow at head_len + body_len).
pub fn parse_request(buf: &[u8]) -> Head {
    let end = match find(buf, END_OF_HEAD) {
        None if buf.len() < BUFFER => return Head::Incomplete,
        Some(end) if end + END_OF_HEAD.len() <= BUFFER => end,
        _ => return Head::TooLarge,
    };
    let (line, mut headers) = cut(&buf[..end], CRLF).unwrap_or((&buf[..end], &[]));
    let Some(minor) = request_line(line) else {
        return Head::Bad;
    };
    let (mut asked_close, mut asked_keep_alive) = (false, false);
    let mut body_len = None;
    while !headers.is_empty() {
        let (line, rest) = cut(headers, CRLF).unwrap_or((headers, &[]));
        headers = rest;
        let Some((name, value)) = cut(line, b":").filter(|(name, _)| is_token(name)) else {
            return Head::Bad;
        };
        let value = trim(value);
        if name.eq_ignore_ascii_case(b"Content-Length") {
            // Two different lengths make the body's end ambiguous (request smuggling).
            match (parse_length(value), body_len) {
                (Some(n), None) => body_len = Some(n),
                (Some(n), Some(before)) if n == before => {}
                _ => return Head::Bad,
            }
        } else if name.eq_ignore_ascii_case(b"Connection") {
            for option in value.split(|&b| b == b',').map(trim) {
                asked_close |= option.eq_ignore_ascii_case(b"close");
                asked_keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    Head::Complete(Request {
        head_len: end + END_OF_HEAD.len(),
        body_len: body_len.unwrap_or(0),
        // HTTP/1.1 keeps the connection unless asked to close; HTTP/1.0 only when asked to keep it.
        keep_alive: !asked_close && (minor > 0 || asked_keep_alive),
    })
}

/// `METHOD SP TARGET SP HTTP/1.x`: x, or None when malformed.
fn request_line(line: &[u8]) -> Option<u8> {
    let (method, rest) = cut(line, b" ")?;
    let (target, version) = cut(rest, b" ")?;
    let target_ok = !target.is_empty() && target.iter().all(|&c| c > b' ' && c != 0x7f);
    let minor = version.strip_prefix(VERSION_PREFIX)?;
    match minor {
        [x @ b'0'..=b'9'] if is_token(method) && target_ok => Some(x - b'0'),
        _ => None,
    }
}

/// RFC 9110's token: what a method or a header name is made of.
fn is_token(b: &[u8]) -> bool {
    !b.is_empty()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// A Content-Length: digits only, at most 2^64-1.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &c| {
        let digit = c.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The bytes before the first `sep` and those after it (Go's bytes.Cut).
fn cut<'a>(b: &'a [u8], sep: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    let at = find(b, sep)?;
    Some((&b[..at], &b[at + sep.len()..]))
}

/// Without leading and trailing spaces and tabs.
fn trim(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

/// The answer to every good request, headers and body in one buffer so that it goes out in one
/// write; built once per run. `closing`: the connection closes after it.
pub fn ok_response(body_bytes: u64, closing: bool) -> Vec<u8> {
    let mut head =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {body_bytes}\r\nContent-Type: text/plain\r\n");
    if closing {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut response = head.into_bytes();
    response.resize(response.len() + body_bytes as usize, b'x');
    response
}

/// What a connection does next with the bytes it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Every complete request is handled: read more.
    Read,
    /// A request is in, head and body: do the work and answer; the connection closes after the
    /// response unless `keep_alive`.
    Respond { keep_alive: bool },
    /// A bad request: answer with this, then close.
    Reject(&'static [u8]),
}

/// One connection's requests as their bytes arrive: a head is answered once its body is skipped.
#[derive(Debug, Default)]
pub struct Requests {
    /// A head is in: (body bytes still to skip, keep_alive).
    answering: Option<(u64, bool)>,
}

impl Requests {
    /// What the bytes received and not yet consumed (`data`, from the buffer's start once a head
    /// is pending) hold next, and how many of them that consumed.
    pub fn next(&mut self, data: &[u8]) -> (usize, Next) {
        let (head_len, (owed, keep_alive)) = match self.answering {
            Some(pending) => (0, pending),
            None => match parse_request(data) {
                Head::Incomplete => return (0, Next::Read),
                Head::Bad => return (0, Next::Reject(BAD_REQUEST)),
                Head::TooLarge => return (0, Next::Reject(HEADERS_TOO_LARGE)),
                Head::Complete(r) => (r.head_len, (r.body_len, r.keep_alive)),
            },
        };
        let skip = owed.min((data.len() - head_len) as u64);
        let used = head_len + skip as usize;
        if owed > skip {
            self.answering = Some((owed - skip, keep_alive));
            return (used, Next::Read);
        }
        self.answering = None;
        (used, Next::Respond { keep_alive })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse_request(text.as_bytes())
    }

    fn complete(text: &str) -> Request {
        complete_bytes(text.as_bytes())
    }

    #[test]
    fn keep_alive_rules() {
        let keeps = |text: &str| complete(text).keep_alive;
        assert!(keeps("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(!keeps("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
        assert!(!keeps(
            "GET / HTTP/1.1\r\nconnection:  Upgrade, CLOSE \r\n\r\n"
        ));
        assert!(!keeps("GET / HTTP/1.0\r\n\r\n"));
        assert!(keeps("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!keeps(
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"
        ));
        assert!(keeps("GET / HTTP/1.9\r\n\r\n"), "HTTP/1.x: 1.1's rules");
    }

    #[test]
    fn content_length_is_skipped() {
        let text = "POST /x HTTP/1.1\r\ncontent-length: 5\r\n\r\nhelloGET";
        let request = complete(text);
        assert_eq!(request.head_len, text.len() - 8);
        assert_eq!(request.body_len, 5);
        assert_eq!(complete("GET / HTTP/1.1\r\n\r\n").body_len, 0);
        assert_eq!(
            complete("PUT / HTTP/1.1\r\nContent-Length:\t7 \r\nContent-Length: 7\r\n\r\n").body_len,
            7,
            "the same length twice"
        );
        assert_eq!(
            complete("PUT / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n").body_len,
            u64::MAX
        );
    }

    #[test]
    fn pipelined_requests_in_one_buffer() {
        let buffer = b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\nConnection: close\r\n\r\nGET /d";
        let mut requests = Requests::default();
        let mut at = 0;
        let mut seen = Vec::new();
        loop {
            let (used, next) = requests.next(&buffer[at..]);
            at += used;
            seen.push(next);
            if next == Next::Read {
                break;
            }
        }
        assert_eq!(
            seen,
            [
                Next::Respond { keep_alive: true },
                Next::Respond { keep_alive: true },
                Next::Respond { keep_alive: false },
                Next::Read
            ]
        );
        assert_eq!(
            &buffer[at..],
            b"GET /d",
            "the partial request is left in the buffer"
        );
    }

    #[test]
    fn partial_requests_wait_for_more() {
        assert_eq!(head(""), Head::Incomplete);
        assert_eq!(head("GET / HTTP/1.1\r\nHost: a\r\n\r"), Head::Incomplete);
        // A body split across reads: the head is consumed, the body skipped as it comes.
        let mut requests = Requests::default();
        let first = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123";
        assert_eq!(requests.next(first), (first.len(), Next::Read));
        assert_eq!(requests.next(b"45678"), (5, Next::Read));
        assert_eq!(
            requests.next(b"9GET"),
            (1, Next::Respond { keep_alive: true })
        );
        assert_eq!(requests.next(b"GET"), (0, Next::Read));
    }

    #[test]
    fn malformed_requests_are_400() {
        for text in [
            "\r\n\r\n",
            "GET\r\n\r\n",
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1 \r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GET / HTTP/1.x\r\n\r\n",
            "GET / HTTP/1.10\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "GET /\x7f HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nno colon\r\n\r\n",
            "GET / HTTP/1.1\r\n Folded: x\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length:\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert_eq!(head(text), Head::Bad, "{text:?}");
        }
        assert_eq!(
            Requests::default().next(b"BAD\r\n\r\n"),
            (0, Next::Reject(BAD_REQUEST))
        );
    }

    #[test]
    fn headers_over_the_buffer_are_431() {
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(BUFFER, b'a');
        assert_eq!(parse_request(&big[..BUFFER - 1]), Head::Incomplete);
        assert_eq!(parse_request(&big), Head::TooLarge);
        assert_eq!(
            Requests::default().next(&big),
            (0, Next::Reject(HEADERS_TOO_LARGE))
        );
        // A head of exactly BUFFER bytes, blank line included, fits; one more byte does not.
        big.truncate(BUFFER - 4);
        big.extend_from_slice(END_OF_HEAD);
        assert_eq!(complete_bytes(&big).head_len, BUFFER);
        big.insert(20, b'a');
        assert_eq!(parse_request(&big), Head::TooLarge);
    }

    fn complete_bytes(buf: &[u8]) -> Request {
        match parse_request(buf) {
            Head::Complete(request) => request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn responses() {
        let keep = ok_response(3, false);
        assert_eq!(
            keep,
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nxxx"
        );
        let close = ok_response(0, true);
        assert_eq!(
            close,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        );
        let big = ok_response(1 << 20, false);
        let head =
            b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\nContent-Type: text/plain\r\n\r\n";
        assert!(big.starts_with(head));
        assert_eq!(big.len(), head.len() + (1 << 20));
        assert!(big[head.len()..].iter().all(|&b| b == b'x'));
    }
}
