//! Backups over HTTP: `GET /v1/memory_stores/{id}/export` (a store key or admin) and
//! `GET /v1/export` (admin, every store, or `?user=` some) stream the export format
//! (`docs/export-format.md`, what `memkv export` writes) from one consistent snapshot while writes
//! go on; `GET /v1/export?since=SEQ` makes an incremental export (of every store: it moves a copy
//! on to its `seq`). `POST /v1/import` (admin) applies an export
//! all or nothing (`?conflict=refuse|skip|replace`, `?user=` some of its stores).
//!
//! An export is written by a blocking thread into a bounded channel that the response body
//! drains, so a slow client holds the snapshot open but no more than a few chunks in memory. A
//! failure before the first chunk is an error status; after it, the body ends without its
//! final chunk, which every HTTP client reports as an error (and the export's own trailer, with
//! its checksums, is missing, so an import refuses it).

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use memkv::{Conflict, Error, ImportSource};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::objects::ImportSummary;
use super::{answer, blocking, failed};
use crate::AppState;
use crate::access::{Admin, Reads};
use crate::error::{ApiError, ErrorBody};
use crate::params::Params;
use crate::routes::{EXPORT, IMPORT, STORE_EXPORT};
use crate::spec::{ApiErrors, Beta, NoRetry};

/// A store in the path, which need not exist yet.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct ExportPath {
    /// The store: its `memstore_…` id or memkv user id (it need not exist yet).
    #[param(min_length = 1)]
    memory_store_id: String,
}

/// What an export of every store holds.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// Only this store (repeatable; not with `since`).
    #[serde(default)]
    #[param(value_type = Option<String>, min_length = 1)]
    user: Vec<String>,
    /// An incremental export of every store: the stores changed after this change-log seq
    /// (the `seq` of the export it follows).
    #[param(value_type = Option<u64>, minimum = 0)]
    since: Option<String>,
}

impl ExportQuery {
    /// `since`, if given.
    fn since(&self) -> Result<Option<u64>, ApiError> {
        self.since
            .as_deref()
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    ApiError::invalid(format!("since must be a change-log seq, not {v:?}"))
                })
            })
            .transpose()
    }
}

/// A store's export takes no `since`: read only to say where an incremental export is taken.
#[derive(Deserialize)]
pub struct StoreExportQuery {
    since: Option<String>,
}

/// What an import applies.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// What a memory that exists already does: refuse the import (default), skip it, or
    /// replace it.
    #[param(value_type = Option<ConflictName>, inline)]
    conflict: Option<String>,
    /// Only this store of the export (repeatable).
    #[serde(default)]
    #[param(value_type = Option<String>, min_length = 1)]
    user: Vec<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum ConflictName {
    Refuse,
    Skip,
    Replace,
}

/// Bytes per chunk of an export's body.
const CHUNK: usize = 64 * 1024;
/// Chunks an export may have written ahead of the client.
const AHEAD: usize = 8;
/// How long an export waits for a client that reads nothing (holding a snapshot open meanwhile)
/// before it gives up.
const STALL: std::time::Duration = std::time::Duration::from_secs(60);

fn refused(e: &Error) -> ApiError {
    match e {
        Error::CursorExpired { .. } => ApiError::new(StatusCode::GONE, e.to_string()),
        // Unsupported: an incremental export limited to some stores (it covers every store).
        Error::InvalidSince { .. }
        | Error::Import { .. }
        | Error::InvalidUser { .. }
        | Error::Unsupported { .. } => ApiError::invalid(e.to_string()),
        Error::UnknownUser { .. } => ApiError::not_found(),
        _ => failed(e, ""),
    }
}

/// `GET /v1/memory_stores/{memory_store_id}/export`.
#[utoipa::path(get, path = STORE_EXPORT, operation_id = "export_store",
    summary = "Export a store",
    description = "The store's memories and versions in the export format, what `memkv export --user` writes; a store key or an admin key. Writes go on meanwhile.",
    params(ExportPath, Beta),
    responses((status = 200, description = "The export, streamed from one consistent snapshot (JSON Lines: header, stores, memories, versions, trailer with checksums)",
            body = String, content_type = "application/x-ndjson"),
        ApiErrors))]
pub async fn export_store(
    Reads { id, state, .. }: Reads,
    Params(query): Params<StoreExportQuery>,
) -> Result<Response, ApiError> {
    if query.since.is_some() {
        return Err(ApiError::invalid(
            "an incremental export covers every store: take it from GET /v1/export?since=SEQ",
        ));
    }
    stream(&state, vec![id], None).await
}

/// `GET /v1/export` (admin).
#[utoipa::path(get, path = EXPORT, operation_id = "export_all",
    summary = "Export every store",
    description = "Admin key. Every store (or those named by `user`) in the export format, what `memkv export` writes. Writes go on meanwhile.",
    params(ExportQuery, Beta),
    responses((status = 200, description = "The export, streamed from one consistent snapshot (JSON Lines: header, stores, memories, versions, trailer with checksums)",
            body = String, content_type = "application/x-ndjson"),
        (status = 410, description = "The change log no longer reaches back to `since`: take a full export (invalid_request_error)",
            body = ErrorBody, headers(("x-should-retry" = inline(NoRetry)))), ApiErrors))]
pub async fn export_all(
    Admin { state, .. }: Admin,
    Params(query): Params<ExportQuery>,
) -> Result<Response, ApiError> {
    let since = query.since()?;
    stream(&state, query.user, since).await
}

/// Writes into the channel in chunks of [`CHUNK`]; the first chunk sent opens the response.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
    opened: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: tokio::runtime::Handle,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(opened) = self.opened.take() {
            let _ = opened.send(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        use tokio::sync::mpsc::error::SendTimeoutError;
        self.runtime
            .block_on(self.tx.send_timeout(Ok(chunk), STALL))
            .map_err(|e| match e {
                SendTimeoutError::Timeout(_) => io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the client read nothing for a minute",
                ),
                SendTimeoutError::Closed(_) => {
                    io::Error::new(io::ErrorKind::BrokenPipe, "the client went away")
                }
            })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

async fn stream(
    state: &Arc<AppState>,
    users: Vec<String>,
    since: Option<u64>,
) -> Result<Response, ApiError> {
    let Ok(permit) = Arc::clone(&state.in_flight).try_acquire_owned() else {
        state.metrics.overloaded.inc();
        return Err(ApiError::overloaded(
            "memkv is answering as many requests as it may; retry shortly",
        ));
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(AHEAD);
    let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
    let db = Arc::clone(&state.store);
    let errors = tx.clone();
    let runtime = tokio::runtime::Handle::current();
    let mut task = tokio::task::spawn_blocking(move || {
        let mut out = ChannelWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
            opened: Some(opened_tx),
            runtime,
        };
        let done = match since {
            Some(seq) => db.export_since(seq, &users, &mut out, &mut |_| {}),
            None => db.export(&users, &mut out, &mut |_| {}),
        }
        .and_then(|summary| {
            out.send().map_err(Error::Output)?;
            Ok(summary)
        });
        drop(permit);
        done
    });
    // Until the first chunk, a failure is the request's answer; after it, the body's end.
    tokio::select! {
        biased;
        // (An error here: the writer is gone, so the export ended; the other branch says how.)
        Ok(()) = opened_rx => {}
        finished = &mut task => {
            let summary = finished.map_err(|_| ApiError::internal("the export failed"))?;
            summary.map_err(|e| refused(&e))?;
        }
    }
    tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => {}
            Ok(Err(Error::Output(e))) if e.kind() == io::ErrorKind::BrokenPipe => {
                tracing::info!(reason = %e, "an export ended before its end: its client");
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "an export failed after it began; its body is cut short");
                let _ = errors.send(Err(io::Error::other(e.to_string()))).await;
            }
            Err(_) => {
                let _ = errors
                    .send(Err(io::Error::other("the export failed")))
                    .await;
            }
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"memkv-export.jsonl\"",
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// The request body as a blocking reader, fed by the async side through a bounded channel.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    chunk: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.chunk.len());
        out[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

/// How an import names its body in errors.
const BODY: &str = "the request body";

/// `POST /v1/import` (admin): the body is an export; `?conflict=refuse|skip|replace` (refuse by
/// default), `?user=` (repeatable) to apply only those stores. All or nothing.
#[utoipa::path(post, path = IMPORT, operation_id = "import",
    summary = "Import an export",
    description = "Admin key. The body is an export (what `memkv export` or the export routes write); it is verified whole, then applied in one transaction, or not at all.",
    params(ImportQuery),
    request_body(content = String, content_type = "application/x-ndjson"),
    responses((status = 200, description = "What was imported", body = ImportSummary), ApiErrors))]
pub async fn import(
    Admin { state, .. }: Admin,
    Params(query): Params<ImportQuery>,
    body: Body,
) -> Result<Response, ApiError> {
    let conflict = match query.conflict.as_deref() {
        None | Some("refuse") => Conflict::Refuse,
        Some("skip") => Conflict::Skip,
        Some("replace") => Conflict::Replace,
        Some(v) => {
            return Err(ApiError::invalid(format!(
                "conflict must be refuse, skip or replace, not {v:?}"
            )));
        }
    };
    let users = query.user;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(AHEAD);
    // The body, frame by frame, into the spool the import reads (a temporary file);
    // a client that sends nothing for the body timeout is cut off.
    let body_timeout = state.config.body_timeout;
    let cap = state.config.max_import_bytes;
    let feeding = tokio::spawn(async move {
        let mut body = body;
        let mut received = 0u64;
        loop {
            let item = match tokio::time::timeout(body_timeout, body.frame()).await {
                Ok(None) => break,
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        received = received.saturating_add(data.len() as u64);
                        if received > cap {
                            Err(io::Error::new(
                                io::ErrorKind::FileTooLarge,
                                format!(
                                    "the export is over the {cap} bytes an import may be (serve --max-import-bytes)"
                                ),
                            ))
                        } else {
                            Ok(data)
                        }
                    }
                    Err(_) => continue,
                },
                Ok(Some(Err(e))) => Err(io::Error::other(e.to_string())),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client sent nothing for the body timeout",
                )),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                break;
            }
        }
    });
    let summary = blocking(&state, move |db| {
        let reader = ChannelReader {
            rx,
            chunk: Bytes::new(),
        };
        let body = Path::new(BODY);
        let mut source = ImportSource::spool(reader, body, db.limits()).map_err(|e| match e {
            Error::Io { path, source }
                if path == body && source.kind() == io::ErrorKind::FileTooLarge =>
            {
                ApiError::too_large(source.to_string())
            }
            Error::Io { path, source } if path == body => {
                ApiError::invalid(format!("the request body could not be read: {source}"))
            }
            // The temporary file's own failure (a full disk, say): the server's.
            e => refused(&e),
        })?;
        db.import_from(&mut source, &users, conflict, &mut |_| {})
            .map_err(|e| refused(&e))
    })
    .await;
    feeding.abort();
    Ok(answer("", "import", &ImportSummary::from(&summary?)))
}
