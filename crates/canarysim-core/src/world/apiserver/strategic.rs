//! Strategic merge patch (`application/strategic-merge-patch+json`), what `kubectl apply`,
//! `kubectl patch` and `kubectl edit` send for built-in kinds: a merge patch in which lists
//! with a merge key (containers by `name`, Service ports by `port`, …) merge element by
//! element instead of being replaced, with the directives `$patch` (`replace`, `delete`,
//! `merge`), `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`.
//! The merge keys are those of core/v1's `patchMergeKey` tags for the fields canarysim's
//! kinds (Pod, Service, ReplicaSet) carry.

use serde_json::{Map, Value};

/// The merge key of the list `field` under `parent`, or None when the list is replaced.
/// `Some("")` is a list of primitives merged as a set (finalizers).
fn merge_key(parent: &str, field: &str) -> Option<&'static str> {
    Some(match field {
        "containers" | "initContainers" | "ephemeralContainers" => "name",
        "ports"
            if matches!(
                parent,
                "containers" | "initContainers" | "ephemeralContainers"
            ) =>
        {
            "containerPort"
        }
        "ports" => "port",
        "env" | "volumes" | "imagePullSecrets" | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "finalizers" => "",
        _ => return None,
    })
}

/// Applies `patch` to `original`. The error says what in the patch is malformed.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, String> {
    match patch {
        Value::Object(p) => merge_map(original.as_object(), p, ""),
        _ => Err("a strategic merge patch must be a JSON object".into()),
    }
}

fn merge_map(
    original: Option<&Map<String, Value>>,
    patch: &Map<String, Value>,
    parent: &str,
) -> Result<Value, String> {
    match patch.get("$patch").map(|v| v.as_str()) {
        Some(Some("replace")) => {
            let mut replaced = patch.clone();
            replaced.remove("$patch");
            return Ok(Value::Object(replaced));
        }
        Some(Some("delete")) => return Ok(Value::Null),
        Some(Some("merge")) | None => {}
        Some(other) => {
            return Err(format!(
                "unknown patch type: {}",
                other.map_or("a non-string".to_string(), str::to_string)
            ));
        }
    }
    let mut out = original.cloned().unwrap_or_default();
    if let Some(keep) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep
            .as_array()
            .ok_or("$retainKeys must be a list of field names")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        out.retain(|k, _| keep.contains(&k.as_str()) || patch.contains_key(k));
    }
    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?;
            if let Some(Value::Array(list)) = out.get_mut(field) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        match value {
            Value::Null => {
                out.remove(key);
            }
            Value::Object(p) => {
                let merged = merge_map(out.get(key).and_then(Value::as_object), p, key)?;
                if merged.is_null() {
                    out.remove(key);
                } else {
                    out.insert(key.clone(), merged);
                }
            }
            Value::Array(items) => {
                let merged = match merge_key(parent, key) {
                    Some(merge_key) => merge_list(
                        out.get(key).and_then(Value::as_array),
                        items,
                        key,
                        merge_key,
                    )?,
                    None => items.clone(),
                };
                out.insert(key.clone(), Value::Array(merged));
            }
            other => {
                out.insert(key.clone(), other.clone());
            }
        }
    }
    for (key, order) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            let order = order
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?;
            if let Some(Value::Array(list)) = out.get_mut(field) {
                let merge_key = merge_key(parent, field).unwrap_or("");
                reorder(list, order, merge_key);
            }
        }
    }
    Ok(Value::Object(out))
}

fn identity<'a>(item: &'a Value, merge_key: &str) -> &'a Value {
    if merge_key.is_empty() {
        item
    } else {
        &item[merge_key]
    }
}

fn merge_list(
    original: Option<&Vec<Value>>,
    patch: &[Value],
    field: &str,
    merge_key: &str,
) -> Result<Vec<Value>, String> {
    // `{"$patch": "replace"}` as an element: the other elements are the whole list.
    if patch.iter().any(|i| i["$patch"] == "replace") {
        return Ok(patch
            .iter()
            .filter(|i| i["$patch"] != "replace")
            .cloned()
            .collect());
    }
    let mut out = original.cloned().unwrap_or_default();
    for item in patch {
        if merge_key.is_empty() {
            if !out.contains(item) {
                out.push(item.clone());
            }
            continue;
        }
        let Some(map) = item.as_object() else {
            return Err(format!(
                "the elements of {field} must be objects merged by {merge_key}"
            ));
        };
        let id = &item[merge_key];
        if id.is_null() {
            return Err(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            ));
        }
        let at = out.iter().position(|o| &o[merge_key] == id);
        if item["$patch"] == "delete" {
            if let Some(i) = at {
                out.remove(i);
            }
            continue;
        }
        match at {
            Some(i) => {
                let merged = merge_map(out[i].as_object(), map, field)?;
                out[i] = merged;
            }
            None => {
                let mut clean = map.clone();
                clean.remove("$patch");
                out.push(merge_map(None, &clean, field)?);
            }
        }
    }
    Ok(out)
}

/// Puts the elements named in `order` first, in that order; the rest keep theirs after.
fn reorder(list: &mut Vec<Value>, order: &[Value], merge_key: &str) {
    let mut rest = std::mem::take(list);
    for wanted in order {
        let id = identity(wanted, merge_key);
        if let Some(i) = rest.iter().position(|o| identity(o, merge_key) == id) {
            list.push(rest.remove(i));
        }
    }
    list.extend(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_other_lists_are_replaced() {
        let pod = json!({"spec": {
            "containers": [{"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}]},
                           {"name": "sidecar", "image": "s"}],
            "tolerations": [{"key": "a"}]}});
        let patched = apply(
            &pod,
            &json!({"spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                "containers": [{"name": "app", "image": "v2", "env": [{"name": "B", "value": "2"}]}],
                "tolerations": [{"key": "b"}]}}),
        )
        .unwrap();
        assert_eq!(
            patched["spec"]["containers"],
            json!([{"name": "app", "image": "v2", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                   {"name": "sidecar", "image": "s"}])
        );
        assert_eq!(patched["spec"]["tolerations"], json!([{"key": "b"}]));
    }

    #[test]
    fn directives_delete_replace_and_retain() {
        let svc = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
                         "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}],
                                  "type": "NodePort", "externalTrafficPolicy": "Local"}});
        let patched = apply(
            &svc,
            &json!({"metadata": {"finalizers": ["b"], "labels": {"$patch": "replace", "z": "3"}},
                    "spec": {"ports": [{"port": 443, "$patch": "delete"}, {"port": 8080, "name": "alt"}],
                             "$retainKeys": ["ports", "type"], "type": "ClusterIP"}}),
        )
        .unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(patched["metadata"]["labels"], json!({"z": "3"}));
        assert_eq!(
            patched["spec"],
            json!({"ports": [{"port": 80, "name": "http"}, {"port": 8080, "name": "alt"}], "type": "ClusterIP"})
        );
        let replaced = apply(
            &svc,
            &json!({"spec": {"ports": [{"$patch": "replace"}, {"port": 1}]}}),
        )
        .unwrap();
        assert_eq!(replaced["spec"]["ports"], json!([{"port": 1}]));
        let pruned = apply(
            &svc,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        )
        .unwrap();
        assert_eq!(pruned["metadata"]["finalizers"], json!([]));
    }

    #[test]
    fn malformed_patches_are_refused_with_a_reason() {
        let err = apply(&json!({}), &json!({"spec": {"ports": [{"name": "x"}]}})).unwrap_err();
        assert!(err.contains("merge key: port"), "{err}");
        assert!(apply(&json!({}), &json!([1])).is_err());
        assert!(apply(&json!({}), &json!({"$patch": "explode"})).is_err());
    }
}
