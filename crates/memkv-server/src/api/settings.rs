//! `/v1/memory_stores/{memory_store_id}/settings`: a store's own quotas, time-to-live, history
//! retention and secrets policy over the server's defaults ([`memkv::StoreSettings`]). A store
//! key reads its store's; changing them needs an admin key (a store key must not raise its own
//! quota). The store need not exist yet: the tool route makes stores on their first write.

use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{Error, SecretPolicy, StoreSettings};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::objects::{
    Bound, EffectiveSettings, OwnSettings, Period, Secrets, SettingsObject, SettingsType,
};
use super::{answer_on_db, failed, json_body};
use crate::access::{Admin, Item, Reads};
use crate::error::ApiError;
use crate::routes::SETTINGS;
use crate::spec::{ApiErrors, Beta};

/// A store in the path, which need not exist yet.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct SettingsPath {
    /// The store: its `memstore_…` id or memkv user id (it need not exist yet).
    #[param(min_length = 1)]
    memory_store_id: String,
}

/// A `memory_store_settings` object: the store's own settings (`own`: only those it has) and what
/// its commands are checked against (`effective`; `off`: without limit).
pub fn settings_object(
    id: &str,
    own: &StoreSettings,
    effective: &memkv::EffectiveSettings,
) -> SettingsObject {
    SettingsObject {
        r#type: SettingsType::Tag,
        memory_store_id: id.to_owned(),
        own: OwnSettings {
            max_files: own.max_files,
            max_bytes: own.max_bytes,
            ttl: own.ttl.map(Period::of),
            history_max_age: own.history_max_age.map(Period::of),
            history_max_versions: own.history_max_versions.map(Bound::of),
            history_max_bytes: own.history_max_bytes.map(Bound::of),
            secrets: own.secrets.map(Secrets::from),
        },
        effective: EffectiveSettings {
            max_files: effective.max_files,
            max_bytes: effective.max_bytes,
            ttl: Period::of(effective.ttl),
            history_max_age: Period::of(effective.retention.max_age),
            history_max_versions: Bound::of(effective.retention.max_versions),
            history_max_bytes: Bound::of(effective.retention.max_bytes),
            secrets: effective.secrets.into(),
        },
    }
}

/// [`settings_object`] as JSON (what `memkv settings` prints).
pub fn settings_json(id: &str, own: &StoreSettings, effective: &memkv::EffectiveSettings) -> Value {
    serde_json::to_value(settings_object(id, own, effective)).expect("settings serialize")
}

/// The body of `PATCH …/settings`, as documented: each field given with a value becomes the
/// store's own, each given as `null` goes back to the default. [`parse_patch`] reads it.
#[derive(ToSchema)]
#[schema(as = StoreSettingsPatch)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SettingsPatch {
    #[schema(minimum = 1)]
    max_files: Option<u64>,
    #[schema(minimum = 1)]
    max_bytes: Option<u64>,
    ttl: Option<Period>,
    history_max_age: Option<Period>,
    history_max_versions: Option<Bound>,
    history_max_bytes: Option<Bound>,
    secrets: Option<Secrets>,
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
#[utoipa::path(get, path = SETTINGS, operation_id = "settings_retrieve",
    summary = "A store's settings",
    description = "The store's own quotas, time-to-live, history retention and secrets policy (`own`), and what its commands are checked against (`effective`: its own over the server's defaults; `off`: without limit).",
    params(SettingsPath, Beta),
    responses((status = 200, description = "The store's settings", body = SettingsObject), ApiErrors))]
pub async fn retrieve_settings(store: Reads) -> Result<Response, ApiError> {
    store
        .answer_db("memory_stores.settings.retrieve", |db, key| {
            let own = db.store_settings(key).map_err(|e| refused(&e, key))?;
            answer_settings(db, key, &own)
        })
        .await
}

/// `PATCH /v1/memory_stores/{memory_store_id}/settings` (admin): `{"max_files": 100, "ttl":
/// "30d", "secrets": null, ...}`; a value sets, `null` resets to the default.
#[utoipa::path(patch, path = SETTINGS, operation_id = "settings_update",
    summary = "Change a store's settings",
    description = "Admin key. Each field given with a value becomes the store's own; each given as `null` goes back to the server's default; the others stay. This server applies them at once, every other server of the database within milliseconds (told by PostgreSQL's notifications).",
    params(SettingsPath, Beta), request_body = SettingsPatch,
    responses((status = 200, description = "The store's settings", body = SettingsObject), ApiErrors))]
pub async fn update_settings(
    Admin { state, .. }: Admin,
    Item(id): Item<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body: Map<String, Value> = json_body(&state, &headers, body).await?;
    let (change, reset) = parse_patch(&body).map_err(ApiError::invalid)?;
    answer_on_db(
        &state,
        &id,
        "memory_stores.settings.update",
        move |db, key| {
            let own = db
                .update_store_settings(key, &change, &reset)
                .map_err(|e| refused(&e, key))?;
            answer_settings(db, key, &own)
        },
    )
    .await
}

/// The settings object of store `key`, whose own settings are `own`.
fn answer_settings(
    db: &memkv::Database,
    key: &str,
    own: &StoreSettings,
) -> Result<SettingsObject, ApiError> {
    let effective = db.effective_settings(key).map_err(|e| refused(&e, key))?;
    Ok(settings_object(key, own, &effective))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::wire::duration;
    use serde_json::json;

    /// The documented patch, the store's own settings and the effective ones name exactly the
    /// library's settings.
    #[test]
    fn every_setting_is_documented() {
        use utoipa::PartialSchema;
        let names = |schema: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>| {
            let schema = serde_json::to_value(schema).unwrap();
            let mut names: Vec<String> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            names.sort();
            names
        };
        let mut settings: Vec<String> = memkv::SETTINGS.iter().map(|s| (*s).to_owned()).collect();
        settings.sort();
        assert_eq!(names(SettingsPatch::schema()), settings);
        assert_eq!(names(OwnSettings::schema()), settings);
        assert_eq!(names(EffectiveSettings::schema()), settings);
    }

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
