//! How `canarysim load` reads a response body: as a stream of frames, keeping at most a
//! bounded prefix (what a body classifier reads) and counting and dropping the rest. A
//! gateway that answers a gigabyte, or a body that never ends, costs a frame of memory, not
//! the body: the load is bounded by its time limits (`-t`, `-z`), never by what a peer
//! sends. A body read to its end leaves the connection reusable, as a whole read would.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// Bytes of a body kept for a body classifier (`json:`, `regex:`, the default's JSON
/// field): the version must be in a body's first 64 KiB. Beyond them bytes are counted and
/// dropped as they arrive.
pub const BODY_PREFIX: usize = 64 * 1024;

/// The start of a body, at most the bytes asked for.
#[derive(Debug, Default)]
pub struct Prefix {
    /// A body's first frame is kept as it came (no copy): most bodies are one frame.
    first: Bytes,
    /// Later frames, copied up to the bound.
    more: BytesMut,
    /// The body was longer than what is kept.
    cut: bool,
}

impl Prefix {
    /// The bytes kept.
    pub fn bytes(&self) -> &[u8] {
        if self.more.is_empty() {
            &self.first
        } else {
            &self.more
        }
    }

    /// Whether the bytes kept are the whole body (else a prefix of it).
    pub fn is_whole(&self) -> bool {
        !self.cut
    }

    fn keep(&mut self, data: &Bytes, limit: usize) {
        let held = self.bytes().len();
        let room = limit.saturating_sub(held);
        if data.len() > room {
            self.cut = true;
        }
        if room == 0 {
            return;
        }
        let take = data.len().min(room);
        if held == 0 {
            self.first = data.slice(..take);
        } else {
            if self.more.is_empty() {
                self.more.reserve(limit);
                self.more.extend_from_slice(&self.first);
                self.first = Bytes::new();
            }
            self.more.extend_from_slice(&data[..take]);
        }
    }
}

/// Reads `body` to its end: its first `keep` bytes are returned, every byte is added to
/// `read` as it arrives (so a caller that gives up on a body still knows what it cost).
/// Trailers are read and dropped.
pub async fn read<B>(mut body: B, keep: usize, read: &mut u64) -> Result<Prefix, B::Error>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    let mut prefix = Prefix::default();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            *read += data.len() as u64;
            prefix.keep(&data, keep);
        }
    }
    Ok(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Frame;
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A body of the given frames, all ready at once.
    struct Frames(VecDeque<Bytes>);

    impl hyper::body::Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn read_now(frames: &[&'static [u8]], keep: usize) -> (Prefix, u64) {
        let body = Frames(frames.iter().map(|f| Bytes::from_static(f)).collect());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut n = 0;
        let prefix = rt.block_on(read(body, keep, &mut n)).unwrap();
        (prefix, n)
    }

    #[test]
    fn a_body_within_the_bound_is_kept_whole() {
        let (p, n) = read_now(&[b"{\"version\":", b" \"blue\"}"], 64);
        assert_eq!(p.bytes(), b"{\"version\": \"blue\"}");
        assert!(p.is_whole());
        assert_eq!(n, 19);
    }

    #[test]
    fn beyond_the_bound_bytes_are_counted_not_kept() {
        let (p, n) = read_now(&[b"abcdef", b"ghij", b"klmnop"], 8);
        assert_eq!((p.bytes(), p.is_whole(), n), (&b"abcdefgh"[..], false, 16));
        let (p, n) = read_now(&[b"abcdefghijkl"], 4);
        assert_eq!((p.bytes(), p.is_whole(), n), (&b"abcd"[..], false, 12));
        let (p, n) = read_now(&[b"abc"], 0);
        assert_eq!((p.bytes(), p.is_whole(), n), (&b""[..], false, 3));
        let (p, _) = read_now(&[b"abcd", b"efgh"], 8);
        assert_eq!((p.bytes(), p.is_whole()), (&b"abcdefgh"[..], true));
        let (p, _) = read_now(&[], 8);
        assert_eq!((p.bytes(), p.is_whole()), (&b""[..], true));
    }
}
