//! How many raw exports may stream at once: per client address and on the whole server.
//!
//! Why: an export holds its connection and a page of rows for as long as its client takes to read
//! it, and anyone may export a public device. The write deadline
//! ([`write_deadline`](crate::http::edge::write_deadline)) ends an export whose client stopped
//! reading; these bounds stop one address (or many) from holding many at once meanwhile. A slot is
//! taken once the request is valid and the device found, and given back when the response body is
//! dropped: at its end, or when the connection closes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The bounds (`--exports-per-client`, `--exports-max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportLimits {
    /// Exports one client address may stream at once.
    pub per_client: u32,
    /// Exports the server streams at once.
    pub overall: u32,
}

/// Why no slot was free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ExportsBusy {
    /// The client address streams as many exports as it may.
    #[error("the client address streams {0} exports already")]
    Client(u32),
    /// The server streams as many exports as it may.
    #[error("the server streams {0} exports already")]
    Server(u32),
}

/// The exports under way.
#[derive(Debug)]
pub struct ExportSlots {
    limits: ExportLimits,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: u32,
    by_client: HashMap<IpAddr, u32>,
}

/// One export's place; given back when dropped.
#[derive(Debug)]
pub struct ExportSlot {
    slots: Arc<ExportSlots>,
    client: IpAddr,
}

impl ExportSlots {
    /// No exports yet, within `limits`.
    pub fn new(limits: ExportLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// A slot for one more export of `client`, if both bounds allow it.
    pub fn take(self: &Arc<Self>, client: IpAddr) -> Result<ExportSlot, ExportsBusy> {
        let mut open = self.lock();
        if open.total >= self.limits.overall {
            return Err(ExportsBusy::Server(self.limits.overall));
        }
        let of_client = open.by_client.entry(client).or_insert(0);
        if *of_client >= self.limits.per_client {
            return Err(ExportsBusy::Client(self.limits.per_client));
        }
        *of_client += 1;
        open.total += 1;
        Ok(ExportSlot {
            slots: Arc::clone(self),
            client,
        })
    }

    /// Exports streaming now.
    #[cfg(test)]
    fn open(&self) -> u32 {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // Every change is complete before the guard is dropped.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(of_client) = open.by_client.get_mut(&self.client) {
            *of_client -= 1;
            if *of_client == 0 {
                open.by_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn a_client_streams_at_most_its_share_and_gets_it_back_when_one_ends() {
        let slots = ExportSlots::new(ExportLimits {
            per_client: 2,
            overall: 10,
        });
        let first = slots.take(address(1));
        let second = slots.take(address(1));
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(slots.take(address(1)).err(), Some(ExportsBusy::Client(2)));
        assert!(
            slots.take(address(2)).is_ok(),
            "another client has its own share"
        );
        drop(first);
        assert!(slots.take(address(1)).is_ok());
    }

    #[test]
    fn the_server_streams_at_most_its_bound_whoever_asks() {
        let slots = ExportSlots::new(ExportLimits {
            per_client: 5,
            overall: 2,
        });
        let held: Vec<_> = [1, 2].map(|last| slots.take(address(last))).into();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(slots.take(address(3)).err(), Some(ExportsBusy::Server(2)));
        assert_eq!(slots.open(), 2);
        drop(held);
        assert_eq!(slots.open(), 0);
        assert!(slots.take(address(3)).is_ok());
    }
}
