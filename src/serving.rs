//! What every server canarysim runs (the API server, `backend`'s pods) does about hostile
//! peers: an accept loop that backs off when the process is out of descriptors, and the
//! header read timeout that closes idle and slowloris connections.

use std::time::Duration;

/// How long an accept loop waits after a failed accept: out of descriptors (EMFILE), a
/// loop that retries at once burns a core and starves the connections it already has.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    next: Duration,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MOST: Duration = Duration::from_secs(1);

    /// Waits, each time twice as long up to a second.
    pub async fn wait(&mut self) {
        self.next = (self.next * 2).clamp(Self::FIRST, Self::MOST);
        tokio::time::sleep(self.next).await;
    }

    pub fn reset(&mut self) {
        self.next = Duration::ZERO;
    }
}

/// A connection that has not sent a whole request head this long after it opened or after
/// its last answer is closed (slowloris, idle keep-alive), as kube-apiserver's
/// ReadHeaderTimeout does.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
