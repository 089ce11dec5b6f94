//! The durable ceiling's storage: each request body appended to one file, and the request
//! answered only once an `fdatasync` that began after its append has returned.
//!
//! Why: a 201 from airq means the reading survives power loss, so no server can answer an upload
//! before a sync of the disk; the bare ceiling measures HTTP alone. This is the least a durable
//! server must add to it: every connection's task hands its body to one thread, which writes
//! everything handed over since its last sync with one `write` and syncs once for all of it (a
//! group commit, as airq's ingestion log makes). So `ceiling --durable` shows what share of the
//! bare ceiling durability itself leaves on this machine's disk, and airq can be read against
//! both.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use bytes::Bytes;
use tokio::sync::oneshot;

/// An append-only file written and synced in groups by a thread of its own; stops after
/// syncing what was handed over when dropped.
#[derive(Debug)]
pub struct DurableAppend {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    waiting: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Waiting {
    /// Bodies handed over and not written yet, with who waits for each.
    bodies: Vec<(Bytes, oneshot::Sender<()>)>,
    stop: bool,
}

impl DurableAppend {
    /// Creates (or truncates) `path` and starts its syncing thread.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut file = File::create(path)?;
        let shared = Arc::new(Shared {
            waiting: Mutex::new(Waiting::default()),
            wake: Condvar::new(),
        });
        let syncing = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bare-sync".into())
            .spawn(move || syncing.run(&mut file))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Appends `body` and returns once it is on the disk; an error when the write or the sync
    /// failed (then the request must not be answered as stored).
    pub async fn append(&self, body: Bytes) -> std::io::Result<()> {
        let (answer, durable) = oneshot::channel();
        self.shared.lock().bodies.push((body, answer));
        self.shared.wake.notify_one();
        durable
            .await
            .map_err(|_| std::io::Error::other("the sync failed or stopped"))
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self, file: &mut File) {
        let mut group = Vec::new();
        loop {
            let due = {
                let mut waiting = self.lock();
                while waiting.bodies.is_empty() && !waiting.stop {
                    waiting = self
                        .wake
                        .wait(waiting)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if waiting.bodies.is_empty() {
                    return;
                }
                std::mem::take(&mut waiting.bodies)
            };
            group.clear();
            for (body, _) in &due {
                group.extend_from_slice(body);
            }
            // A failure drops the answers, which fails those appends; later ones try again.
            if file
                .write_all(&group)
                .and_then(|()| file.sync_data())
                .is_ok()
            {
                for (_, answer) in due {
                    let _ = answer.send(());
                }
            }
        }
    }
}

impl Drop for DurableAppend {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_append_returns_once_the_file_holds_it_whole() {
        let dir = tempfile::tempdir().expect("temporary dir");
        let path = dir.path().join("bodies");
        let log = Arc::new(DurableAppend::create(&path).expect("created"));
        let tasks: Vec<_> = (0..200u8)
            .map(|index| {
                let log = Arc::clone(&log);
                tokio::spawn(async move { log.append(Bytes::from(vec![index; 100])).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("task").expect("durable");
        }
        let written = std::fs::read(&path).expect("read back");
        assert_eq!(written.len(), 200 * 100);
        let mut bodies: Vec<u8> = written
            .chunks(100)
            .map(|body| {
                assert!(body.iter().all(|byte| *byte == body[0]), "a torn body");
                body[0]
            })
            .collect();
        bodies.sort_unstable();
        assert_eq!(bodies, (0..200u8).collect::<Vec<_>>());
    }
}
