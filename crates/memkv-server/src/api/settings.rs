//! `/v1/memory_stores/{memory_store_id}/settings`: a store's own quotas, time-to-live, history
//! retention and secrets policy over the server's defaults ([`memkv::StoreSettings`]). A store
//! key reads its store's; changing them needs an admin key (a store key must not raise its own
//! quota). The store need not exist yet: the tool route makes stores on their first write.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{Error, SecretPolicy, StoreSettings};
use serde_json::{Map, Value, json};

use super::{admin, answer, blocking, failed, json_body, respond, scoped, store_id};
use crate::AppState;
use crate::error::ApiError;

/// `30d`, `12h`, `15m`, `90s`, `250ms`: the largest unit that divides it.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn policy(p: SecretPolicy) -> &'static str {
    match p {
        SecretPolicy::Redact => "redact",
        SecretPolicy::Off => "off",
        _ => "reject",
    }
}

/// A `memory_store_settings` object: the store's own settings (`own`: only those it has) and what
/// its commands are checked against (`effective`; `off`: without limit).
pub fn settings_json(id: &str, own: &StoreSettings, effective: &memkv::EffectiveSettings) -> Value {
    let bound_d = |d: Option<Duration>| d.map_or(json!("off"), |d| json!(duration(d)));
    let bound_n = |n: Option<u64>| n.map_or(json!("off"), |n| json!(n));
    let mut mine = Map::new();
    if let Some(n) = own.max_files {
        mine.insert("max_files".into(), json!(n));
    }
    if let Some(n) = own.max_bytes {
        mine.insert("max_bytes".into(), json!(n));
    }
    if let Some(d) = own.ttl {
        mine.insert("ttl".into(), bound_d(d));
    }
    if let Some(d) = own.history_max_age {
        mine.insert("history_max_age".into(), bound_d(d));
    }
    if let Some(n) = own.history_max_versions {
        mine.insert("history_max_versions".into(), bound_n(n));
    }
    if let Some(n) = own.history_max_bytes {
        mine.insert("history_max_bytes".into(), bound_n(n));
    }
    if let Some(p) = own.secrets {
        mine.insert("secrets".into(), json!(policy(p)));
    }
    json!({
        "type": "memory_store_settings",
        "memory_store_id": id,
        "own": mine,
        "effective": {
            "max_files": effective.max_files,
            "max_bytes": effective.max_bytes,
            "ttl": bound_d(effective.ttl),
            "history_max_age": bound_d(effective.retention.max_age),
            "history_max_versions": bound_n(effective.retention.max_versions),
            "history_max_bytes": bound_n(effective.retention.max_bytes),
            "secrets": policy(effective.secrets),
        }
    })
}

/// A `PATCH` body: each field set to a value becomes the store's own, each set to `null` goes
/// back to the default; returns the change and the names reset.
pub fn parse_patch(
    body: &Map<String, Value>,
) -> Result<(StoreSettings, Vec<&'static str>), String> {
    let mut change = StoreSettings::default();
    let mut reset = Vec::new();
    for (name, value) in body {
        let Some(field) = memkv::SETTINGS.iter().find(|f| **f == name) else {
            return Err(format!(
                "unknown setting {name:?}; the settings are {}",
                memkv::SETTINGS.join(", ")
            ));
        };
        if value.is_null() {
            reset.push(*field);
            continue;
        }
        let count = |off: bool| -> Result<Option<u64>, String> {
            match value {
                Value::String(s) if off && s == "off" => Ok(None),
                Value::Number(n) => n
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("{name} must be a whole number")),
                _ if off => Err(format!("{name} must be a whole number or \"off\"")),
                _ => Err(format!("{name} must be a whole number")),
            }
        };
        let period = || -> Result<Option<Duration>, String> {
            match value.as_str() {
                Some("off") => Ok(None),
                Some(s) => humantime::parse_duration(s).map(Some).map_err(|e| {
                    format!("{name}: {s:?} is not a duration such as 30d or 12h: {e}")
                }),
                None => Err(format!(
                    "{name} must be a duration such as \"30d\", or \"off\""
                )),
            }
        };
        match *field {
            "max_files" => change.max_files = count(false)?,
            "max_bytes" => change.max_bytes = count(false)?,
            "ttl" => change.ttl = Some(period()?),
            "history_max_age" => change.history_max_age = Some(period()?),
            "history_max_versions" => change.history_max_versions = Some(count(true)?),
            "history_max_bytes" => change.history_max_bytes = Some(count(true)?),
            "secrets" => {
                let p = value
                    .as_str()
                    .ok_or_else(|| "secrets must be \"reject\", \"redact\" or \"off\"".to_owned())?
                    .parse::<SecretPolicy>()?;
                change.secrets = Some(p);
            }
            _ => unreachable!("every name of memkv::SETTINGS is handled"),
        }
    }
    Ok((change, reset))
}

fn refused(e: &Error, id: &str) -> ApiError {
    match e {
        Error::InvalidSettings(_) => ApiError::invalid(e.to_string()),
        Error::InvalidUser { .. } => ApiError::not_found(),
        _ => failed(e, id),
    }
}

/// `GET /v1/memory_stores/{memory_store_id}/settings`.
pub async fn retrieve_settings(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            let id = store_id(id)?;
            scoped(&state, &headers, &id)?;
            let key = id.clone();
            let out = blocking(&state, move |db| {
                let own = db.store_settings(&key).map_err(|e| refused(&e, &key))?;
                let effective = db.effective_settings(&key).map_err(|e| refused(&e, &key))?;
                Ok(settings_json(&key, &own, &effective))
            })
            .await?;
            Ok(answer(&id, "memory_stores.settings.retrieve", &out))
        }
        .await,
    )
}

/// `PATCH /v1/memory_stores/{memory_store_id}/settings` (admin): `{"max_files": 100, "ttl":
/// "30d", "secrets": null, ...}`; a value sets, `null` resets to the default.
pub async fn update_settings(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let id = store_id(id)?;
            admin(&state, &headers, "changing a store's settings")?;
            let body: Map<String, Value> = json_body(&state, &headers, body).await?;
            let (change, reset) = parse_patch(&body).map_err(ApiError::invalid)?;
            let key = id.clone();
            let out = blocking(&state, move |db| {
                let own = db
                    .update_store_settings(&key, &change, &reset)
                    .map_err(|e| refused(&e, &key))?;
                let effective = db.effective_settings(&key).map_err(|e| refused(&e, &key))?;
                Ok(settings_json(&key, &own, &effective))
            })
            .await?;
            Ok(answer(&id, "memory_stores.settings.update", &out))
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written() {
        for (d, text) in [
            (Duration::from_secs(30 * 86_400), "30d"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_millis(250), "250ms"),
        ] {
            assert_eq!(duration(d), text);
            assert_eq!(humantime::parse_duration(text).unwrap(), d);
        }
    }

    #[test]
    fn patches_are_parsed_or_refused() {
        let body = json!({"max_files": 5, "ttl": "off", "history_max_versions": "off",
            "history_max_age": "2d", "secrets": "redact", "max_bytes": null});
        let (change, reset) = parse_patch(body.as_object().unwrap()).unwrap();
        assert_eq!(change.max_files, Some(5));
        assert_eq!(change.ttl, Some(None));
        assert_eq!(change.history_max_versions, Some(None));
        assert_eq!(
            change.history_max_age,
            Some(Some(Duration::from_secs(2 * 86_400)))
        );
        assert_eq!(change.secrets, Some(SecretPolicy::Redact));
        assert_eq!(reset, ["max_bytes"]);
        for bad in [
            json!({"max_files": "off"}),
            json!({"max_files": -1}),
            json!({"max_files": 1.5}),
            json!({"ttl": 30}),
            json!({"ttl": "soon"}),
            json!({"secrets": "maybe"}),
            json!({"colour": "blue"}),
        ] {
            assert!(parse_patch(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }
}
