//! A bare HTTP/1.1 client for the API server's REST paths (std sockets, no runtime), and a
//! watch reader that decodes the chunked event stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// One request; the status code and the JSON body (Null when the body is not JSON).
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let mut s = TcpStream::connect(address).expect("the API server accepts");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    answer(s)
}

/// A request that declares a body of `length` bytes and sends none of it: the answer to
/// its headers alone.
pub fn declared_only(address: SocketAddr, method: &str, path: &str, length: usize) -> (u16, Value) {
    let mut s = TcpStream::connect(address).expect("the API server accepts");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    answer(s)
}

/// The status and JSON body of the answer on `s` (read to its end).
fn answer(mut s: TcpStream) -> (u16, Value) {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

pub fn get(address: SocketAddr, path: &str) -> (u16, Value) {
    request(address, "GET", path, "application/json", b"")
}

pub fn send(address: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    request(
        address,
        method,
        path,
        "application/json",
        body.to_string().as_bytes(),
    )
}

pub fn merge_patch(address: SocketAddr, path: &str, patch: &Value) -> (u16, Value) {
    request(
        address,
        "PATCH",
        path,
        "application/merge-patch+json",
        patch.to_string().as_bytes(),
    )
}

/// An open watch: events as they come.
pub struct WatchStream {
    reader: BufReader<TcpStream>,
}

impl WatchStream {
    /// Opens `path?watch=1...`; panics unless the server answers 200.
    pub fn open(address: SocketAddr, path: &str) -> WatchStream {
        let mut s = TcpStream::connect(address).expect("the API server accepts");
        write!(s, "GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
        // A watchdog, not a race: on a starved machine the world may take many seconds
        // between two changes (each new live pod generates its TLS key), and only a watch
        // that never delivers should fail a test.
        s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        let mut reader = BufReader::new(s);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "watch answered {status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        WatchStream { reader }
    }

    /// The next event (None: the stream ended or nothing came within the read timeout).
    pub fn next(&mut self) -> Option<Value> {
        loop {
            let mut size = String::new();
            if self.reader.read_line(&mut size).ok()? == 0 {
                return None;
            }
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                return None;
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).ok()?;
            let text = String::from_utf8_lossy(&chunk[..size]).into_owned();
            if let Some(line) = text.lines().find(|l| !l.trim().is_empty()) {
                return serde_json::from_str(line).ok();
            }
        }
    }
}
