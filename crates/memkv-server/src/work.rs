//! Work on the database: a place under the in-flight limit ([`Place`], 503 when none is left)
//! and the blocking pool ([`blocking`]). Every route that reaches the database takes a place
//! here, so the limit, its metric and its refusal are one thing.

use std::sync::Arc;

use memkv::Database;
use tokio::sync::OwnedSemaphorePermit;

use crate::AppState;
use crate::error::ApiError;
use crate::metrics::Metrics;

/// A place under the in-flight limit, counted in `memkv_in_flight` while it is held.
pub struct Place {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Place {
    /// A place, or 503 (counted in `memkv_overloaded_total`) when every one is taken: never
    /// queued.
    pub fn take(state: &AppState) -> Result<Place, ApiError> {
        let Ok(permit) = Arc::clone(&state.in_flight).try_acquire_owned() else {
            state.metrics.overloaded.inc();
            return Err(ApiError::overloaded(
                "memkv is answering as many requests as it may; retry shortly",
            ));
        };
        state.metrics.in_flight.inc();
        Ok(Place {
            _permit: permit,
            metrics: Arc::clone(&state.metrics),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
    }
}

/// Runs `work` on the blocking pool in a [`Place`] (503 when none is left).
pub async fn blocking<T: Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&Arc<Database>) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let place = Place::take(state)?;
    let store = Arc::clone(&state.store);
    tokio::task::spawn_blocking(move || {
        let out = work(&store);
        drop(place);
        out
    })
    .await
    .map_err(|_| ApiError::internal("the request failed"))?
}
