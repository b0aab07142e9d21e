//! The gateways' TLS and TCP routes on the live router: a listener per gateway port that
//! carries such routes (as `envoy-config` exports them), each connection routed once from
//! what it shows, as Envoy's filter chains route it: the SNI of a TLS ClientHello (read, not
//! terminated: the bytes pass through to the pod, which answers TLS itself), or nothing.
//! No route or no healthy upstream: the connection is reset, as Envoy resets it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Picking, State};
use crate::mesh::NoUpstream;

/// How long a TLS port waits for a client's first bytes (Envoy's listener filter timeout).
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(15);

/// A ClientHello larger than this is not read further (it is not TLS, or not one we route).
const MAX_HELLO: usize = 64 << 10;

/// What a connection's first bytes say.
struct Opening {
    /// The bytes read so far, to be sent on to the pod first.
    bytes: Vec<u8>,
    /// A TLS ClientHello (then the SNI it names, if any).
    tls: Option<Option<String>>,
}

/// Serves one gateway port's connections until the task is aborted.
pub(super) fn spawn_listener(
    state: Arc<State>,
    listener: TcpListener,
    gateway: String,
    port: u32,
    reads_hello: bool,
) -> tokio::task::JoinHandle<()> {
    crate::pod_server::spawn_acceptor(listener, move |stream| {
        let (state, gateway) = (state.clone(), gateway.clone());
        async move {
            state
                .proxy_connection(stream, &gateway, port, reads_hello)
                .await;
        }
    })
}

impl State {
    /// Routes one connection and pipes it to the chosen pod (its TLS port for a TLS
    /// connection) until either side closes.
    async fn proxy_connection(
        &self,
        mut client: TcpStream,
        gateway: &str,
        port: u32,
        reads_hello: bool,
    ) {
        let opening = if reads_hello {
            match read_opening(&mut client).await {
                Some(opening) => opening,
                None => return,
            }
        } else {
            Opening {
                bytes: Vec::new(),
                tls: None,
            }
        };
        let published = self
            .published
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(table) = &published.table else {
            return reset(client);
        };
        let sni = opening.tls.as_ref().and_then(|sni| sni.as_deref());
        let Ok(choice) = table.route_connection(gateway, port, sni) else {
            self.stats.not_found.fetch_add(1, Ordering::Relaxed);
            return reset(client);
        };
        let lb = self.data_plane.lock().unwrap_or_else(|p| p.into_inner()).0;
        let endpoint = {
            let mut p = self.picking.lock().unwrap_or_else(|p| p.into_inner());
            let Picking {
                lb: state,
                router,
                balancer,
                ..
            } = &mut *p;
            choice.pick_upstream(table, lb, router, balancer, state)
        };
        let pod = match endpoint {
            Ok(e) => table.endpoint(e),
            Err(NoUpstream::Unresolved) => {
                // The Gateway API's rule for a backendRef that does not resolve: the
                // connection is rejected.
                self.stats
                    .unresolved_backend
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(NoUpstream::NoHealthy) => None,
        };
        let Some(pod) = pod else {
            self.stats
                .no_healthy_upstream
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let addresses = if opening.tls.is_some() {
            &published.tls_addresses
        } else {
            &published.addresses
        };
        let upstream = match addresses.get(&pod.pod) {
            Some(address) => TcpStream::connect(address).await.ok(),
            None => None,
        };
        let Some(mut upstream) = upstream else {
            self.stats.upstream_failed.fetch_add(1, Ordering::Relaxed);
            return reset(client);
        };
        let _ = upstream.set_nodelay(true);
        if upstream.write_all(&opening.bytes).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// Drops a connection with a reset (RST), as Envoy drops one it cannot route.
fn reset(client: TcpStream) {
    let _ = client.set_zero_linger();
}

/// Reads until the first bytes show a whole TLS ClientHello (its SNI, read with rustls's
/// parser) or show that the connection is not TLS. None: the client sent nothing in time.
async fn read_opening(client: &mut TcpStream) -> Option<Opening> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match tokio::time::timeout(FIRST_BYTES_TIMEOUT, client.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return None,
        };
        bytes.extend_from_slice(&chunk[..n]);
        // A TLS connection opens with a handshake record (content type 22).
        let not_tls = || Opening {
            bytes: bytes.clone(),
            tls: None,
        };
        if bytes[0] != 22 || bytes.len() > MAX_HELLO {
            return Some(not_tls());
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            match acceptor.read_tls(&mut rest) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return Some(not_tls()),
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                let sni = accepted.client_hello().server_name().map(str::to_string);
                return Some(Opening {
                    bytes,
                    tls: Some(sni),
                });
            }
            Ok(None) => continue,
            Err(_) => return Some(not_tls()),
        }
    }
}
