//! `POST /data`: a device uploads one reading.

use hyper::StatusCode;

use crate::domain::Reading;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::views::ReceiptView;
use crate::http::{authenticate, body, respond, Request, Response};

/// Authenticates the device, parses the reading, and answers 201 once the batch writer committed it.
pub async fn upload(request: Request, state: &AppState) -> Result<Response, ApiError> {
    let device = authenticate::device(&request, state).await?;
    let body = body::json(request).await?;
    let now = state.clock.now();
    let reading = Reading::parse(&body, now)?;
    let at = reading.measured_at.unwrap_or(now);
    let receipt = state.writer.submit(device.id, at, reading).await?;
    respond::json(
        StatusCode::CREATED,
        &respond::Data {
            data: ReceiptView::from(&receipt),
        },
    )
}
