//! The fleet: owner tokens, device registration through the API, and fleet files.
//!
//! Devices are registered with `POST /api/v1/devices` over many connections at once (public, with
//! a public location, outdoor, so they all reach the community map). A fleet can be saved to a
//! file (mode 0600: it holds device keys) and reused by later runs, which skips registering
//! 10,000 devices again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airq::auth::LocalIssuer;
use bytes::Bytes;
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use crate::client::{bearer, Lane, Target};
use crate::rng::Rng;
use crate::BoxError;

/// One registered device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Device {
    /// UUID, the `{id}` of paths.
    pub id: String,
    /// `X-Device-ID`.
    pub device_id: String,
    /// `X-Device-Key`.
    pub device_key: String,
}

/// The devices of one owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fleet {
    /// The owner (`sub`) they were registered for.
    pub owner: String,
    /// In registration order.
    pub devices: Vec<Device>,
}

/// A bearer token for `owner`: `token` when given, else minted with the local issuer of
/// `data_dir` (which must be the server's: its secret file must already exist).
pub fn owner_token(
    token: Option<&str>,
    data_dir: &Path,
    owner: &str,
) -> Result<HeaderValue, BoxError> {
    if let Some(token) = token {
        return bearer(token);
    }
    let secret = data_dir.join(LocalIssuer::FILE);
    if !secret.exists() {
        return Err(format!(
            "{} does not exist: pass the server's --data-dir (or --token for an external identity provider)",
            secret.display()
        )
        .into());
    }
    let token = LocalIssuer::open(data_dir)?.mint(owner, Duration::from_secs(2 * 86_400))?;
    bearer(&token)
}

/// How a fleet came to be.
#[derive(Debug)]
pub struct Obtained {
    /// The fleet.
    pub fleet: Fleet,
    /// Registered now (rather than loaded from a file).
    pub registered: bool,
    /// Registration wall time.
    pub elapsed: Duration,
}

impl Obtained {
    /// For reports.
    pub fn to_json(&self) -> serde_json::Value {
        let secs = self.elapsed.as_secs_f64();
        serde_json::json!({
            "owner": self.fleet.owner,
            "devices": self.fleet.devices.len(),
            "registered_now": self.registered,
            "elapsed_s": secs,
            "registrations_per_s": if self.registered && secs > 0.0 { self.fleet.devices.len() as f64 / secs } else { 0.0 },
        })
    }
}

impl Fleet {
    /// `count` devices with well-formed but unregistered credentials (for the bare endpoint).
    pub fn synthetic(count: usize) -> Self {
        const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut rng = Rng::new(0xC0FFEE);
        let mut text = |length: usize| -> String {
            (0..length)
                .map(|_| BASE62[(rng.next_u64() % 62) as usize] as char)
                .collect()
        };
        let devices = (0..count)
            .map(|index| Device {
                id: format!("00000000-0000-4000-8000-{index:012x}"),
                device_id: format!("dev_{}", text(24)),
                device_key: format!("sk_{}", text(43)),
            })
            .collect();
        Self {
            owner: "synthetic".into(),
            devices,
        }
    }

    /// Reads a fleet file.
    pub fn load(path: &Path) -> Result<Self, BoxError> {
        let text = std::fs::read(path)
            .map_err(|error| format!("reading fleet file {}: {error}", path.display()))?;
        Ok(serde_json::from_slice(&text)?)
    }

    /// Writes a fleet file, readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), BoxError> {
        use std::io::Write as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(path)
            .map_err(|error| format!("writing fleet file {}: {error}", path.display()))?;
        file.write_all(&serde_json::to_vec(self)?)?;
        Ok(())
    }
}

/// Registration settings.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Whose devices.
    pub owner: String,
    /// How many.
    pub count: usize,
    /// Connections used at once.
    pub connections: usize,
    /// Device names are `{prefix}-{n}`.
    pub name_prefix: String,
    /// Per request.
    pub request_timeout: Duration,
}

/// The fleet in `file` when it exists and is big enough (its first `count` devices), else a newly
/// registered one, saved to `file` when given. A file holding another owner's devices is refused:
/// uploading them would go on, but the owner's reads and loss check would look at nothing of it.
pub async fn load_or_register(
    target: &Target,
    token: &HeaderValue,
    file: Option<&PathBuf>,
    registration: &Registration,
) -> Result<Obtained, BoxError> {
    if let Some(path) = file.filter(|path| path.exists()) {
        let mut fleet = Fleet::load(path)?;
        if fleet.owner != registration.owner {
            return Err(format!(
                "the fleet file {} holds devices of {}, not of {}",
                path.display(),
                fleet.owner,
                registration.owner
            )
            .into());
        }
        if fleet.devices.len() >= registration.count {
            fleet.devices.truncate(registration.count);
            eprintln!(
                "fleet: {} devices of {} loaded from {}",
                fleet.devices.len(),
                fleet.owner,
                path.display()
            );
            return Ok(Obtained {
                fleet,
                registered: false,
                elapsed: Duration::ZERO,
            });
        }
        eprintln!(
            "fleet: {} holds {} devices, {} wanted: registering a new fleet",
            path.display(),
            fleet.devices.len(),
            registration.count
        );
    }
    let obtained = register(target, token, registration).await?;
    if let Some(path) = file {
        obtained.fleet.save(path)?;
        eprintln!("fleet: saved to {}", path.display());
    }
    Ok(obtained)
}

#[derive(Deserialize)]
struct Registered {
    data: Device,
}

/// Registers `registration.count` devices in parallel. Fails if any registration fails.
pub async fn register(
    target: &Target,
    token: &HeaderValue,
    registration: &Registration,
) -> Result<Obtained, BoxError> {
    let started = Instant::now();
    eprintln!(
        "fleet: registering {} devices for {} over {} connections",
        registration.count, registration.owner, registration.connections
    );
    let next = Arc::new(AtomicUsize::new(0));
    let slots: Arc<Mutex<Vec<Option<Device>>>> =
        Arc::new(Mutex::new(vec![None; registration.count]));
    let workers: Vec<_> = (0..registration.connections.clamp(1, registration.count.max(1)))
        .map(|_| {
            let next = Arc::clone(&next);
            let slots = Arc::clone(&slots);
            let target = target.clone();
            let token = token.clone();
            let registration = registration.clone();
            tokio::spawn(async move {
                let mut lane = Lane::new(target.addr);
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= registration.count {
                        return Ok::<(), String>(());
                    }
                    let body = serde_json::json!({
                        "name": format!("{}-{:05}", registration.name_prefix, index + 1),
                        "is_public": true,
                        "is_location_public": true,
                        "is_outdoor": true,
                    });
                    let mut request =
                        target.post_json("/api/v1/devices", Bytes::from(body.to_string()), &[]);
                    request.headers_mut().insert(AUTHORIZATION, token.clone());
                    let answer = lane
                        .send(request, registration.request_timeout)
                        .await
                        .map_err(|failure| {
                            format!("registering device {index}: {}", failure.name())
                        })?;
                    if answer.status != StatusCode::CREATED {
                        return Err(format!(
                            "registering device {index}: {} {}",
                            answer.status,
                            String::from_utf8_lossy(&answer.body)
                        ));
                    }
                    let registered: Registered = serde_json::from_slice(&answer.body)
                        .map_err(|error| format!("registration answer: {error}"))?;
                    if let Ok(mut slots) = slots.lock() {
                        slots[index] = Some(registered.data);
                    }
                }
            })
        })
        .collect();
    let mut first_error = None;
    for worker in workers {
        match worker.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                first_error.get_or_insert(error);
            }
            Err(error) => {
                first_error.get_or_insert(error.to_string());
            }
        }
    }
    if let Some(error) = first_error {
        return Err(error.into());
    }
    let devices = std::mem::take(&mut *slots.lock().map_err(|_| "registration lock poisoned")?)
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or("a device was not registered")?;
    let elapsed = started.elapsed();
    eprintln!(
        "fleet: {} devices registered in {:.2} s ({:.0}/s)",
        devices.len(),
        elapsed.as_secs_f64(),
        devices.len() as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    Ok(Obtained {
        fleet: Fleet {
            owner: registration.owner.clone(),
            devices,
        },
        registered: true,
        elapsed,
    })
}

/// The target, the owner's token and the ids of its devices, for the scenarios that read what
/// `seed` loaded; an owner without devices is an error that says to seed first.
pub async fn seeded_owner(
    args: &crate::cli::TargetArgs,
    owner: &str,
) -> Result<(Target, HeaderValue, Vec<String>), BoxError> {
    let target = Target::parse(&args.target).await?;
    let token = owner_token(args.token.as_deref(), &args.data_dir, owner)?;
    let devices = list_devices(&target, &token).await?;
    if devices.is_empty() {
        return Err(format!(
            "owner {owner} has no devices: run `airq-bench seed` first (or pass --owner)"
        )
        .into());
    }
    Ok((target, token, devices))
}

/// The ids of the owner's devices, oldest first (`GET /api/v1/devices`).
pub async fn list_devices(target: &Target, token: &HeaderValue) -> Result<Vec<String>, BoxError> {
    #[derive(Deserialize)]
    struct Listed {
        data: Vec<ListedDevice>,
    }
    #[derive(Deserialize)]
    struct ListedDevice {
        id: String,
    }
    let mut lane = Lane::new(target.addr);
    let answer = lane
        .send(
            target.get("/api/v1/devices", Some(token)),
            Duration::from_secs(30),
        )
        .await
        .map_err(|failure| format!("listing devices: {}", failure.name()))?;
    if answer.status != StatusCode::OK {
        return Err(format!("listing devices: {}", answer.status).into());
    }
    let listed: Listed = serde_json::from_slice(&answer.body)?;
    Ok(listed.data.into_iter().map(|device| device.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet file of `owner` in a fresh directory, and a target nothing listens on.
    async fn saved(owner: &str) -> (tempfile::TempDir, PathBuf, Target) {
        let dir = tempfile::tempdir().expect("temporary dir");
        let path = dir.path().join("fleet.json");
        let mut fleet = Fleet::synthetic(3);
        fleet.owner = owner.into();
        fleet.save(&path).expect("saved");
        let target = Target::parse("http://127.0.0.1:9").await.expect("target");
        (dir, path, target)
    }

    fn registration(owner: &str) -> Registration {
        Registration {
            owner: owner.into(),
            count: 2,
            connections: 1,
            name_prefix: "test".into(),
            request_timeout: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn a_fleet_file_of_another_owner_is_refused() {
        let (_dir, path, target) = saved("fleet").await;
        let token = HeaderValue::from_static("Bearer test");
        let refused = load_or_register(&target, &token, Some(&path), &registration("other"))
            .await
            .expect_err("another owner's fleet");
        assert!(
            refused
                .to_string()
                .contains("holds devices of fleet, not of other"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_fleet_file_of_the_owner_is_loaded_without_registering() {
        let (_dir, path, target) = saved("fleet").await;
        let token = HeaderValue::from_static("Bearer test");
        let obtained = load_or_register(&target, &token, Some(&path), &registration("fleet"))
            .await
            .expect("the owner's fleet");
        assert!(!obtained.registered);
        assert_eq!(obtained.fleet.devices.len(), 2);
    }
}
