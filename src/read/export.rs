//! The raw export: one device's readings in a time range, oldest first, page by page, with the
//! location left out unless the caller may see it.

use std::task::{Context, Poll};

use crate::domain::{DeviceUuid, ExportQuery, RawReading};
use crate::store::{PageResult, ReadingPages, ReadingStore, StoreError};

/// An export under way: its first page is read already (a store that fails at once fails the
/// request, before anything is sent), the rest are read as they are sent.
#[derive(Debug)]
pub struct Export {
    first: Option<Vec<RawReading>>,
    rest: ReadingPages,
    show_location: bool,
}

/// Starts exporting `device`'s readings in the range `query` names; positions only when
/// `show_location`.
pub async fn readings(
    store: &dyn ReadingStore,
    device: DeviceUuid,
    query: ExportQuery,
    show_location: bool,
) -> Result<Export, StoreError> {
    let mut rest = store.export(device, query.start, query.end);
    let first = rest.next().await.unwrap_or(Err(StoreError::Interrupted))?;
    Ok(Export {
        first: Some(first),
        rest,
        show_location,
    })
}

impl Export {
    /// The next page; `None` after the last.
    pub fn poll_page(&mut self, cx: &mut Context<'_>) -> Poll<Option<PageResult>> {
        let page = match self.first.take() {
            Some(first) => Poll::Ready(Some(Ok(first))),
            None => self.rest.poll_next(cx),
        };
        if self.show_location {
            return page;
        }
        page.map(|page| {
            page.map(|page| {
                page.map(|mut readings| {
                    for reading in &mut readings {
                        reading.position = None;
                    }
                    readings
                })
            })
        })
    }
}
