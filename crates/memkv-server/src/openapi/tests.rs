use super::*;
use crate::error::ApiError;
use crate::routes::ROUTES;

#[test]
fn every_operation_says_how_it_is_authenticated() {
    let doc = document(64, 1 << 20);
    assert_eq!(doc["servers"][0]["url"], "/");
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["name"],
        "x-api-key"
    );
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let security = op["security"].as_array();
            assert!(
                security.is_some_and(|s| !s.is_empty()),
                "{method} {path} has no security"
            );
            assert!(op["operationId"].is_string(), "{method} {path}");
            assert!(op["summary"].is_string(), "{method} {path}");
        }
    }
    // Exactly the health checks and the document itself need no key (their attributes say
    // so); every other operation takes one.
    let mut keyless: Vec<&str> = Vec::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            if op["security"] == json!([{}]) {
                keyless.push(op["operationId"].as_str().unwrap());
            } else {
                assert_eq!(
                    op["security"],
                    json!([{"apiKey": []}, {"bearer": []}, {}]),
                    "{}",
                    op["operationId"]
                );
            }
        }
    }
    keyless.sort_unstable();
    assert_eq!(keyless, ["healthz", "openapi", "readyz"]);
    assert_eq!(
        doc["paths"]["/healthz"]["get"]["responses"]["405"]["description"],
        "Another method than GET"
    );
}

#[test]
fn the_document_lists_exactly_the_routes() {
    let doc = document(64, 1000);
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let mut routes: Vec<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    documented.sort();
    routes.sort();
    assert_eq!(documented, routes);
}

#[test]
fn every_reference_resolves() {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let doc = document(64, 1000);
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(found.len() > 30);
    for r in found {
        let name = r.strip_prefix("#/components/schemas/").expect(&r);
        assert!(doc["components"]["schemas"].get(name).is_some(), "{r}");
    }
}

#[test]
fn every_link_names_an_operation_and_its_parameters() {
    let doc = document(64, 1000);
    let ops: Vec<&Value> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .collect();
    let mut links = 0;
    for op in &ops {
        for response in op["responses"].as_object().unwrap().values() {
            let Some(found) = response.get("links") else {
                continue;
            };
            for link in found.as_object().unwrap().values() {
                links += 1;
                let target = ops
                    .iter()
                    .find(|o| o["operationId"] == link["operationId"])
                    .unwrap_or_else(|| panic!("{link}"));
                for name in link["parameters"].as_object().unwrap().keys() {
                    let params = target["parameters"].as_array().unwrap();
                    assert!(params.iter().any(|p| p["name"] == **name), "{link}");
                }
            }
        }
    }
    assert!(links >= 19, "{links}");
}

/// The tool route's limits are the server's.
#[test]
fn the_tool_route_carries_the_configured_limits() {
    let doc = document(7, 12345);
    let body = &doc["paths"][TOOL_ROUTE]["post"]["requestBody"];
    assert_eq!(body["description"], "At most 12345 bytes.");
    assert_eq!(body["required"], true);
    let forms = doc["components"]["schemas"]["ToolMessage"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(forms.len(), 3);
    let array = forms.iter().find(|f| f["type"] == "array").unwrap();
    assert_eq!(array["maxItems"], 7);
    assert_eq!(array["minItems"], 1);
}

/// Each error type the server sends is one the `Error` schema lists.
#[test]
fn the_error_schema_names_every_error_type() {
    let doc = document(64, 1000);
    let types = &doc["components"]["schemas"]["Error"]["properties"]["error"];
    let types = doc["components"]["schemas"]
        .get("ErrorDetail")
        .map_or(types, |detail| detail)["properties"]["type"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", doc["components"]["schemas"]["Error"]))
        .clone();
    for status in 400..600 {
        let status = axum::http::StatusCode::from_u16(status).unwrap();
        let kind = ApiError::error_type(status);
        assert!(types.iter().any(|t| t == kind), "{kind}");
    }
}

/// Whether `value` has only the properties schema `name` lists (when it allows no others) and
/// every one it requires, recursing into objects given by reference.
fn conforms(schemas: &Value, name: &str, value: &Value) {
    let schema = &schemas[name];
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{name}: {value}"));
    let properties = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no properties: {schema}"));
    if schema["additionalProperties"] == false {
        for key in object.keys() {
            assert!(
                properties.contains_key(key),
                "{name} does not list {key}: {value}"
            );
        }
    }
    for required in schema["required"].as_array().into_iter().flatten() {
        let required = required.as_str().unwrap();
        assert!(
            object.contains_key(required),
            "{name} requires {required}: {value}"
        );
    }
    for (key, field) in object {
        let described = &properties[key];
        if field.is_null() {
            let nullable = described["type"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "null"))
                || described["oneOf"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|s| s["type"] == "null"));
            assert!(
                nullable,
                "{name}.{key} is null but not nullable: {described}"
            );
        }
        if let Some(reference) = described["$ref"].as_str()
            && field.is_object()
        {
            let inner = reference.trim_start_matches("#/components/schemas/");
            if schemas[inner]["properties"].is_object() {
                conforms(schemas, inner, field);
            }
        }
    }
}

/// Each kind of object the API answers, made by the library and serialized by its type, has
/// exactly what its schema says: no property it does not list, every one it requires, `null`
/// only where it allows it.
#[test]
fn objects_send_what_their_schemas_say() {
    use crate::api::objects::{
        ApiKeyCreated, ApiKeyObject, MemoryItem, MemoryObject, MemoryStoreObject,
        MemoryVersionObject, WebhookCreated, WebhookObject,
    };
    use memkv::wire::{ActorObject, ChangeObject};
    let doc = document(64, 1000);
    let schemas = &doc["components"]["schemas"];
    let check = |name: &str, value: &dyn as_json::AsJson| {
        conforms(schemas, name, &value.to_value());
    };
    let db = memkv::Database::in_memory().unwrap();
    let info = db
        .create_store("notes", "", &std::collections::BTreeMap::new())
        .unwrap();
    check("MemoryStore", &MemoryStoreObject::from(&info));
    let (key, secret) = db
        .add_key(&memkv::NewKey::new(memkv::KeyScope::Admin))
        .unwrap();
    check("ApiKey", &ApiKeyObject::from(&key));
    check("ApiKeyCreated", &ApiKeyCreated::new(&key, secret));
    let store = db
        .user(&info.id)
        .unwrap()
        .with_actor(Some(memkv::Actor::ApiKey(key.id.clone())));
    let m = store
        .create_memory("/memories/a/b.md", "one\n")
        .unwrap()
        .unwrap();
    for full in [false, true] {
        check("Memory", &MemoryObject::new(&info.id, &m, full));
    }
    let moved = store
        .update_memory(m.id, Some("two\n"), Some("/memories/c.md"), None)
        .unwrap()
        .unwrap();
    let page = store
        .list_memories("/memories", 1, None, 10, false)
        .unwrap()
        .unwrap();
    for item in &page.items {
        let item = serde_json::to_value(MemoryItem::new(&info.id, item, false)).unwrap();
        let name = if item["type"] == "memory" {
            "Memory"
        } else {
            "MemoryPrefix"
        };
        conforms(schemas, name, &item);
    }
    let versions = store
        .versions(&Default::default(), None, 10, true)
        .unwrap()
        .unwrap()
        .items;
    assert!(versions.len() >= 2);
    let redacted = store.redact(versions[0].id).unwrap().unwrap();
    store.delete_memory(moved.id, None).unwrap().unwrap();
    for v in store
        .versions(&Default::default(), None, 10, true)
        .unwrap()
        .unwrap()
        .items
        .iter()
        .chain([&redacted])
    {
        for full in [false, true] {
            check(
                "MemoryVersion",
                &MemoryVersionObject::new(&info.id, v, full),
            );
        }
    }
    let entries = db.changes(0, 100, None).unwrap().entries;
    let kinds: std::collections::BTreeSet<&str> =
        entries.iter().map(|e| e.change.kind.event_type()).collect();
    assert!(kinds.len() >= 5, "{kinds:?}");
    for entry in &entries {
        check("ChangeEntry", &ChangeObject::from(entry));
    }
    // An actor is one of three objects: each kind matches exactly one branch, by its type.
    for actor in [
        memkv::Actor::ApiKey("key_1".into()),
        memkv::Actor::Session("s".into()),
        memkv::Actor::User("u".into()),
    ] {
        let value = serde_json::to_value(ActorObject::from(&actor)).unwrap();
        let branches: Vec<&Value> = schemas["Actor"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["properties"]["type"]["enum"][0] == value["type"])
            .collect();
        assert_eq!(branches.len(), 1, "{value}");
        let mut sent: Vec<&String> = value.as_object().unwrap().keys().collect();
        let mut described: Vec<&String> = branches[0]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        sent.sort();
        described.sort();
        assert_eq!(sent, described);
    }
    let hook = db
        .add_webhook(
            "https://example.com/hook",
            "whsec_c2VjcmV0",
            &[],
            &[],
            memkv::WebhookFormat::Memkv,
        )
        .unwrap();
    check("Webhook", &WebhookObject::from(&hook));
    check(
        "WebhookCreated",
        &WebhookCreated::new(&hook, "whsec_c2VjcmV0".into()),
    );
    let own = db.store_settings(&info.id).unwrap();
    let effective = db.effective_settings(&info.id).unwrap();
    check(
        "StoreSettings",
        &crate::api::settings::settings_object(&info.id, &own, &effective),
    );
}

/// Any `serde::Serialize` as a trait object, for the checks above.
mod as_json {
    pub trait AsJson {
        fn to_value(&self) -> serde_json::Value;
    }

    impl<T: serde::Serialize> AsJson for T {
        fn to_value(&self) -> serde_json::Value {
            serde_json::to_value(self).expect("an object serializes")
        }
    }
}
