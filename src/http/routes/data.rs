//! `POST /data` and `POST /data/batch`: a device uploads one reading, or many at once.
//!
//! Both count once against the device's upload rate limit, after its credentials and before the
//! body is read (401 before 429, a wrong key costs the device nothing).
//!
//! Both answer 201 only once every reading of the request is committed, and both key a reading
//! that carries `measured_at` by (device, `measured_at`): uploading it again replaces it, so a
//! device may retry an upload whose answer it never saw.

use hyper::StatusCode;
use serde::Serialize;

use crate::domain::{MeasuredWindow, Reading, ReadingBatch};
use crate::http::edge::body;
use crate::http::encodings::respond;
use crate::http::encodings::views::ReceiptView;
use crate::http::error::ApiError;
use crate::http::guards::authenticate;
use crate::http::state::AppState;
use crate::http::{Request, Response};

/// Authenticates the device, counts the upload, parses the reading, and answers 201 once the
/// batch writer committed it.
pub async fn upload(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let device = authenticate::device(&request, state).await?;
    state.limits.upload(device.id)?;
    let body = body::json(request, body::MAX_BODY, state.body_timeout).await?;
    let now = state.clock.now();
    let reading = Reading::parse(&body, MeasuredWindow::at(now, state.raw_retention))?;
    let at = reading.measured_at.unwrap_or(now);
    let receipt = state
        .writer
        .submit((device.id, device.owner), at, reading)
        .await?;
    respond::json(
        StatusCode::CREATED,
        &respond::Data {
            data: ReceiptView::from(&receipt),
        },
    )
}

/// The answer to a batch upload.
#[derive(Debug, Serialize)]
struct BatchReceiptView {
    count: usize,
    receipts: Vec<ReceiptView>,
}

/// Authenticates the device, counts the upload (once for the whole batch), parses every reading
/// (all or nothing), and answers 201 once the whole batch is committed, receipts in request order.
pub async fn upload_batch(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let device = authenticate::device(&request, state).await?;
    state.limits.upload(device.id)?;
    let body = body::json(request, body::MAX_BATCH_BODY, state.body_timeout).await?;
    let now = state.clock.now();
    let readings = ReadingBatch::parse(&body, MeasuredWindow::at(now, state.raw_retention))?
        .into_readings()
        .into_iter()
        .map(|reading| (reading.measured_at.unwrap_or(now), reading))
        .collect();
    let receipts = state
        .writer
        .submit_all((device.id, device.owner), readings)
        .await?;
    respond::json(
        StatusCode::CREATED,
        &respond::Data {
            data: BatchReceiptView {
                count: receipts.len(),
                receipts: receipts.iter().map(ReceiptView::from).collect(),
            },
        },
    )
}
