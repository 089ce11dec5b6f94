//! A TCP relay owned by a test, to make an outage real: QuestDB's ILP traffic goes through it, and
//! the test cuts and restores it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP relay to QuestDB's HTTP port that can be cut (open connections are dropped and new ones
/// refused) and restored.
pub struct Relay {
    /// The relay's port on 127.0.0.1.
    pub port: u16,
    up: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Relay {
    /// A relay to `target` (host:port), up.
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("relay port");
        let port = listener.local_addr().expect("address").port();
        let up = Arc::new(AtomicBool::new(true));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (flag, tasks) = (Arc::clone(&up), Arc::clone(&connections));
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !flag.load(Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tasks.lock().expect("lock").push(relay);
            }
        });
        Self {
            port,
            up,
            connections,
            accept,
        }
    }

    /// Drops the open connections and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for connection in self.connections.lock().expect("lock").drain(..) {
            connection.abort();
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// QuestDB's ILP/HTTP address (host:port) from `AIRQ_TEST_QUESTDB_ILP`.
pub fn questdb_http_address() -> String {
    let ilp = std::env::var("AIRQ_TEST_QUESTDB_ILP").expect("AIRQ_TEST_QUESTDB_ILP");
    ilp.split(';')
        .find_map(|part| part.trim().strip_prefix("http::addr="))
        .expect("an http::addr= in AIRQ_TEST_QUESTDB_ILP")
        .to_owned()
}
