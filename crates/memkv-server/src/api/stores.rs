//! `/v1/memory_stores` and `/v1/memory_stores/{memory_store_id}[/archive]`: create, list,
//! retrieve, update, archive and delete stores. Creating and listing need an admin key (or no
//! keys, on loopback); a store key reaches its own store only.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};
use utoipa::{IntoParams, ToSchema};

use super::objects::{DeletedMemoryStore, MemoryStoreObject, MemoryStorePage};
use super::{answer, bad_page, blocking, existing, failed, json_body, refused, settled};
use crate::access::{Admin, Reads, Writes};
use crate::error::ApiError;
use crate::params::{Created, Paging, Params, flag};
use crate::routes::{ARCHIVE, STORE, STORES};
use crate::spec::{ApiErrors, Beta, StorePath};

use memkv::stores::{MAX_METADATA_KEY_CHARS, MAX_METADATA_PAIRS, MAX_METADATA_VALUE_CHARS};

/// A new memory store.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryStoreCreate)]
#[serde(deny_unknown_fields)]
struct CreateStore {
    /// 1 to 255 characters, no control characters.
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    name: String,
    /// At most 1,024 characters.
    #[serde(default)]
    #[schema(value_type = String, max_length = 1024)]
    description: Option<String>,
    /// At most 16 pairs: keys of 1 to 64 characters, values of at most 512.
    #[serde(default)]
    #[schema(schema_with = metadata_to_create, required = false)]
    metadata: Option<BTreeMap<String, String>>,
}

/// Changes to a memory store; what is not given stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryStoreUpdate)]
#[serde(deny_unknown_fields)]
struct UpdateStore {
    /// 1 to 255 characters, no control characters.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    name: Option<String>,
    /// At most 1,024 characters.
    #[serde(default)]
    #[schema(max_length = 1024)]
    description: Option<String>,
    /// Pairs to set; a key set to `null` is removed. At most 16 pairs in all afterwards.
    #[serde(default)]
    #[schema(schema_with = metadata_to_update, required = false)]
    metadata: Option<BTreeMap<String, Option<String>>>,
}

/// A store's metadata as a request gives it: at most [`MAX_METADATA_PAIRS`] pairs, keys of 1 to
/// [`MAX_METADATA_KEY_CHARS`] characters, values of `values`' type of at most
/// [`MAX_METADATA_VALUE_CHARS`].
fn metadata_schema(values: SchemaType) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .max_properties(Some(MAX_METADATA_PAIRS))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_METADATA_KEY_CHARS)),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(values)
                .max_length(Some(MAX_METADATA_VALUE_CHARS)),
        ))
        .build()
}

fn metadata_to_create() -> Object {
    metadata_schema(SchemaType::Type(Type::String))
}

/// An update's metadata: a value of `null` removes its key; the whole may be `null`.
fn metadata_to_update() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::OneOfBuilder::new()
        .item(metadata_schema(SchemaType::Array(vec![
            Type::String,
            Type::Null,
        ])))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .into()
}

/// The filters of the store listing.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StoreFilter {
    /// Include archived stores.
    #[param(value_type = Option<bool>)]
    include_archived: Option<String>,
}

// The rules are the library's (`memkv::stores::fields`), which an import applies too.

fn check(problem: Option<String>) -> Result<(), ApiError> {
    problem.map_or(Ok(()), |why| Err(ApiError::invalid(why)))
}

fn check_name(name: &str) -> Result<(), ApiError> {
    check(memkv::stores::fields::name(name))
}

fn check_description(description: &str) -> Result<(), ApiError> {
    check(memkv::stores::fields::description(description))
}

fn check_pair(key: &str, value: Option<&str>) -> Result<(), ApiError> {
    check(memkv::stores::fields::pair(key, value))
}

fn check_count(pairs: usize) -> Result<(), ApiError> {
    check(memkv::stores::fields::count(pairs))
}

/// `POST /v1/memory_stores`.
#[utoipa::path(post, path = STORES, operation_id = "memory_stores_create",
    summary = "Create a memory store",
    description = "Admin key (or keyless on loopback). The store's id is a memkv user id: the tool route and MCP serve it at once.",
    params(Beta), request_body = CreateStore,
    responses((status = 200, description = "The new store", body = MemoryStoreObject), ApiErrors))]
pub async fn create_store(
    Admin { caller, state }: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let actor = caller.actor();
    let req: CreateStore = json_body(&state, &headers, body).await?;
    let description = req.description.unwrap_or_default();
    let metadata = req.metadata.unwrap_or_default();
    check_name(&req.name)?;
    check_description(&description)?;
    check_count(metadata.len())?;
    for (k, v) in &metadata {
        check_pair(k, Some(v))?;
    }
    let info = blocking(&state, move |store| {
        store
            .acting_as(actor)
            .create_store(&req.name, &description, &metadata)
            .map_err(|e| failed(&e, ""))
    })
    .await?;
    Ok(answer(
        &info.id,
        "memory_stores.create",
        &MemoryStoreObject::from(&info),
    ))
}

/// `GET /v1/memory_stores`: by id, archived stores only with `include_archived=true`,
/// `created_at[gte]`/`created_at[lte]` inclusive.
#[utoipa::path(get, path = STORES, operation_id = "memory_stores_list",
    summary = "List memory stores",
    description = "Admin key (or keyless on loopback). In id order; archived stores only with `include_archived=true`.",
    params(StoreFilter, Created, Paging, Beta),
    responses((status = 200, description = "A page of stores", body = MemoryStorePage), ApiErrors))]
pub async fn list_stores(
    Admin { state, .. }: Admin,
    Params(paging): Params<Paging>,
    Params(q): Params<StoreFilter>,
    Params(created): Params<Created>,
) -> Result<Response, ApiError> {
    let limit = paging.limit(false)?;
    let archived = flag("include_archived", q.include_archived.as_deref())?.unwrap_or(false);
    let (gte, lte) = created.range()?;
    let after = paging.page().map(decode_page).transpose()?;
    let (stores, next) = blocking(&state, move |store| {
        let wanted = |ms: i64| gte.is_none_or(|t| ms >= t) && lte.is_none_or(|t| ms <= t);
        let mut found = Vec::new();
        let mut after = after;
        loop {
            let (batch, more) = store
                .list_stores(archived, after.as_deref(), limit)
                .map_err(|e| failed(&e, ""))?;
            let batch_len = batch.len();
            for (i, info) in batch.into_iter().enumerate() {
                after = Some(info.id.clone());
                if wanted(info.created_ms) {
                    found.push(info);
                    if found.len() == limit {
                        let rest = more || i + 1 < batch_len;
                        return Ok((found, after.filter(|_| rest)));
                    }
                }
            }
            if !more || batch_len == 0 {
                return Ok((found, None));
            }
        }
    })
    .await?;
    let page = MemoryStorePage {
        data: stores.iter().map(MemoryStoreObject::from).collect(),
        next_page: next.map(|id| encode_page(&id)),
    };
    Ok(answer("", "memory_stores.list", &page))
}

/// A page token of the store listing: the last id listed, hex-encoded behind `msp_`.
fn encode_page(id: &str) -> String {
    format!("msp_{}", hex::encode(id))
}

fn decode_page(token: &str) -> Result<String, ApiError> {
    let hex = token.strip_prefix("msp_").ok_or_else(bad_page)?;
    if hex.is_empty() || hex.len() % 2 != 0 || !hex.is_ascii() {
        return Err(bad_page());
    }
    let bytes = hex::decode(hex).map_err(|_| bad_page())?;
    String::from_utf8(bytes).map_err(|_| bad_page())
}

/// `GET /v1/memory_stores/{memory_store_id}`.
#[utoipa::path(get, path = STORE, operation_id = "memory_stores_retrieve",
    summary = "Retrieve a memory store", params(StorePath, Beta),
    responses((status = 200, description = "The store", body = MemoryStoreObject), ApiErrors))]
pub async fn retrieve_store(store: Reads) -> Result<Response, ApiError> {
    store
        .answer_db("memory_stores.retrieve", |db, id| {
            Ok(MemoryStoreObject::from(&existing(db, id)?))
        })
        .await
}

/// `POST /v1/memory_stores/{memory_store_id}`: name, description, metadata changes (a key
/// set to `null` is removed). 400 on an archived store, as the SDK documents.
#[utoipa::path(post, path = STORE, operation_id = "memory_stores_update",
    summary = "Update a memory store",
    description = "Name, description, and metadata changes (a key set to null is removed). 400 on an archived store.",
    params(StorePath, Beta), request_body = UpdateStore,
    responses((status = 200, description = "The store as changed", body = MemoryStoreObject), ApiErrors))]
pub async fn update_store(
    store: Writes,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let actor = store.caller.actor();
    let req: UpdateStore = json_body(&store.state, &headers, body).await?;
    if let Some(name) = &req.name {
        check_name(name)?;
    }
    if let Some(description) = &req.description {
        check_description(description)?;
    }
    let patch = req.metadata.unwrap_or_default();
    for (k, v) in &patch {
        check_pair(k, v.as_deref())?;
    }
    store
        .answer_db("memory_stores.update", move |db, key| {
            let current = existing(db, key)?;
            let mut merged = current.metadata;
            for (k, v) in &patch {
                match v {
                    Some(v) => merged.insert(k.clone(), v.clone()),
                    None => merged.remove(k),
                };
            }
            check_count(merged.len())?;
            let info = db
                .acting_as(actor)
                .update_store(key, req.name.as_deref(), req.description.as_deref(), &patch)
                .map_err(|e| failed(&e, key))?
                .map_err(|r| refused(&r, true))?;
            Ok(MemoryStoreObject::from(&info))
        })
        .await
}

/// `POST /v1/memory_stores/{memory_store_id}/archive`: once archived, a store is read-only
/// (its memories may still be deleted and its versions redacted); archiving again changes
/// nothing.
#[utoipa::path(post, path = ARCHIVE, operation_id = "memory_stores_archive",
    summary = "Archive a memory store",
    description = "Afterwards the store is read-only: its memories can still be read and deleted, its versions redacted, the store deleted. Archiving again changes nothing.",
    params(StorePath, Beta),
    responses((status = 200, description = "The archived store", body = MemoryStoreObject), ApiErrors))]
pub async fn archive_store(store: Writes) -> Result<Response, ApiError> {
    let actor = store.caller.actor();
    store
        .answer_db("memory_stores.archive", move |db, key| {
            existing(db, key)?;
            let info = settled(db.acting_as(actor).archive_store(key), key)?;
            Ok(MemoryStoreObject::from(&info))
        })
        .await
}

/// `DELETE /v1/memory_stores/{memory_store_id}`: the store, its memories and every version.
#[utoipa::path(delete, path = STORE, operation_id = "memory_stores_delete",
    summary = "Delete a memory store",
    description = "The store, every memory and every version; it cannot be undone.",
    params(StorePath, Beta),
    responses((status = 200, description = "The store is deleted", body = DeletedMemoryStore), ApiErrors))]
pub async fn delete_store(store: Writes) -> Result<Response, ApiError> {
    let actor = store.caller.actor();
    store
        .answer_db("memory_stores.delete", move |db, key| {
            existing(db, key)?;
            let gone = db.acting_as(actor).delete_store(key);
            let gone = gone.map_err(|e| failed(&e, key))?;
            gone.then(|| DeletedMemoryStore::new(key.to_owned()))
                .ok_or_else(ApiError::not_found)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_refuse_others() {
        for id in ["memstore_0a", "alice", "Zoë Ng", "team/a"] {
            assert_eq!(decode_page(&encode_page(id)).unwrap(), id);
        }
        for bad in ["", "msp_", "msp_0", "msp_zz", "x_61", "msp_ff"] {
            assert_eq!(decode_page(bad).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn store_fields_are_checked() {
        assert!(check_name("n").is_ok());
        assert!(check_name(&"é".repeat(255)).is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"a".repeat(256)).is_err());
        assert!(check_name("a\nb").is_err());
        assert!(check_description(&"d".repeat(1024)).is_ok());
        assert!(check_description(&"d".repeat(1025)).is_err());
        assert!(check_pair("k", Some(&"v".repeat(512))).is_ok());
        assert!(check_pair("k", Some(&"v".repeat(513))).is_err());
        assert!(check_pair("", None).is_err());
        assert!(check_pair(&"k".repeat(65), None).is_err());
        assert!(check_count(16).is_ok());
        assert!(check_count(17).is_err());
        // Nothing that could reach a terminal as an escape sequence; line breaks and tabs
        // where text is prose.
        assert!(check_description("line one\n\tline two").is_ok());
        assert!(check_description("red \u{1b}[31m").is_err());
        assert!(check_pair("k", Some("a\nb")).is_ok());
        assert!(check_pair("k", Some("\u{7}")).is_err());
        assert!(check_pair("k\t", None).is_err());
    }
}
