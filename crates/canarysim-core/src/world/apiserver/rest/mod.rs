//! The Kubernetes REST API over the store, as data: a request (method, path, query, content
//! type, accept header, body) becomes a [`Call`], and a call against the store becomes a
//! [`Reply`] (status code, JSON body, `Warning` headers). Paths, verbs, content types, the
//! Status error shape, the `status` and `scale` subresources and `Table` output follow the API
//! server, so that `kubectl` works unchanged. The HTTP server (`http.rs`) only moves bytes and
//! keeps watches open; everything here runs without a socket.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::discovery::{self, Resource};
use super::selector::Selector;
use super::table::{self, IncludeObject};
use super::{ApiError, ApiServer, EventType, WatchEvent};
use crate::model::yaml::SourceMap;
use crate::model::{Kind, Manifest, Object};

/// Largest request body read (Kubernetes' own limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// An HTTP request, as far as the API reads it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: &'a str,
    pub content_type: &'a str,
    pub accept: &'a str,
    pub body: &'a [u8],
}

/// An answer: status code, JSON body, and warnings (sent as `Warning: 299 - "..."`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
    /// Whether the store changed (the controllers then reconcile).
    pub wrote: bool,
}

impl Reply {
    fn ok(code: u16, body: Value) -> Reply {
        Reply {
            code,
            body,
            warnings: Vec::new(),
            wrote: false,
        }
    }

    /// A `Status` failure, as the API server sends it.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Reply {
        Reply::ok(
            code,
            json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message.into(),
                "reason": reason,
                "code": code,
            }),
        )
    }

    fn from_api_error(e: &ApiError, resource: &Resource) -> Reply {
        let reason = match e {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::Denied { .. } => "",
            ApiError::TooLarge => "RequestEntityTooLarge",
        };
        let mut reply = Reply::failure(e.code(), reason, e.to_string());
        let name = match e {
            ApiError::NotFound { name, .. }
            | ApiError::AlreadyExists { name, .. }
            | ApiError::Conflict { name, .. }
            | ApiError::Invalid { name, .. } => Some(name),
            ApiError::Denied { .. } | ApiError::TooLarge => None,
        };
        if let Some(name) = name {
            reply.body["details"] = json!({
                "name": name,
                "group": resource.group(),
                "kind": resource.kind.plural(),
            });
        }
        if let ApiError::Invalid { kind, message, .. } = e {
            // kubectl prints `The Rollout "x" is invalid: <field>: <cause>` from these.
            let (field, cause) = match message.split_once(": ") {
                Some((f, c)) if !f.contains(' ') => (f, c),
                _ => ("<body>", message.as_str()),
            };
            reply.body["details"]["kind"] = json!(kind.as_str());
            reply.body["details"]["causes"] =
                json!([{"reason": "FieldValueInvalid", "message": cause, "field": field}]);
        }
        reply
    }

    fn not_found_path() -> Reply {
        Reply::failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    fn bad_request(message: impl Into<String>) -> Reply {
        Reply::failure(400, "BadRequest", message)
    }
}

/// What a request asks of the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Answered without the store (an error in the request itself).
    Answer(Reply),
    /// A discovery document: the kinds served include those the store holds.
    Discovery(Discovery),
    Read(Read),
    Watch(Watch),
    Write(Write),
    /// Namespaces: every one exists (objects need no Namespace object here); a list shows
    /// those in use, and a create is accepted without storing anything.
    Namespaces {
        name: Option<String>,
        create: bool,
        table: bool,
    },
}

/// The discovery documents kubectl reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    Version,
    CoreVersions,
    Groups,
    Group(String),
    Resources { group: String, version: String },
    OpenApiRoot,
    OpenApi(String),
}

impl Discovery {
    fn answer(&self, api: &ApiServer) -> Reply {
        let stored: Vec<Kind> = api.kinds().filter(|k| k.is_stored_only()).collect();
        let document = match self {
            Discovery::Version => Some(discovery::version()),
            Discovery::CoreVersions => Some(discovery::core_versions()),
            Discovery::Groups => Some(discovery::group_list(&stored)),
            Discovery::Group(name) => discovery::group(name, &stored),
            Discovery::Resources { group, version } => {
                discovery::resource_list(group, version, &stored)
            }
            Discovery::OpenApiRoot => Some(discovery::openapi_root(&stored)),
            Discovery::OpenApi(path) => discovery::openapi_group_version(path, &stored),
        };
        document.map_or_else(Reply::not_found_path, |d| Reply::ok(200, d))
    }
}

/// The resource a request names, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub resource: Resource,
    /// The version in the path: objects are answered in it.
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The `status` subresource.
    pub status: bool,
    /// The `scale` subresource: an autoscaling/v1 Scale stands for the object.
    pub scale: bool,
}

impl Target {
    fn api_version(&self) -> String {
        self.resource.api_version(&self.version)
    }

    fn kind(&self) -> Kind {
        self.resource.kind
    }

    /// The object as it is answered: in the version the request named.
    fn present(&self, object: &Object) -> Value {
        let mut value = object.value.clone();
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), json!(self.api_version()));
        }
        value
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub target: Target,
    pub selector: Selector,
    pub table: Option<IncludeObject>,
}

/// A watch: events on objects of one resource, from a resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    pub target: Target,
    pub selector: Selector,
    /// Events after this resourceVersion; None: the current objects first, as ADDED.
    pub since: Option<u64>,
    pub table: Option<IncludeObject>,
    /// `timeoutSeconds`: the server ends the watch after it.
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub target: Target,
    pub op: WriteOp,
    /// `dryRun=All`: validated and answered, not stored.
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    Create(Value),
    Update(Value),
    Patch(PatchBody),
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PatchBody {
    Merge(Value),
    Json(Value),
    Strategic(Value),
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Query(Vec<(String, String)>);

impl Query {
    fn parse(text: &str) -> Query {
        Query(
            text.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("1" | "true"))
    }
}

/// Reads a request into what it asks.
pub fn parse(request: &Request) -> Call {
    match parse_inner(request) {
        Ok(call) => call,
        Err(reply) => Call::Answer(reply),
    }
}

// Long: one match over the API's URL shapes (discovery, collections, objects, subresources,
// watches), in the order the Kubernetes API server routes them.
fn parse_inner(request: &Request) -> Result<Call, Reply> {
    let segments: Vec<&str> = request
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let query = Query::parse(request.query);
    let get = request.method == "GET";
    // Discovery and version.
    let discovery = match segments.as_slice() {
        ["version"] => Some(Discovery::Version),
        ["api"] => Some(Discovery::CoreVersions),
        ["apis"] => Some(Discovery::Groups),
        ["api", version] => Some(Discovery::Resources {
            group: String::new(),
            version: version.to_string(),
        }),
        ["apis", group] => Some(Discovery::Group(group.to_string())),
        ["apis", group, version] => Some(Discovery::Resources {
            group: group.to_string(),
            version: version.to_string(),
        }),
        ["openapi", "v3"] => Some(Discovery::OpenApiRoot),
        ["openapi", "v3", rest @ ..] => Some(Discovery::OpenApi(rest.join("/"))),
        _ => None,
    };
    if let Some(document) = discovery {
        if !get {
            return Err(method_not_allowed(request.method));
        }
        return Ok(Call::Discovery(document));
    }
    if let ["api", "v1", "namespaces", rest @ ..] = segments.as_slice() {
        if rest.len() <= 1 {
            let create = match request.method {
                "GET" => false,
                "POST" if rest.is_empty() => true,
                other => return Err(method_not_allowed(other)),
            };
            let name = match (create, rest.first()) {
                (false, name) => name.map(|n| decode(n)),
                (true, _) => Some(
                    json_body(request.body)?["metadata"]["name"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| Reply::bad_request("a Namespace needs metadata.name"))?
                        .to_string(),
                ),
            };
            return Ok(Call::Namespaces {
                name,
                create,
                table: request.accept.contains("as=Table"),
            });
        }
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(Reply::not_found_path()),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(decode(ns)), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(decode(name)), None),
        [plural, name, sub] => (*plural, Some(decode(name)), Some(*sub)),
        _ => return Err(Reply::not_found_path()),
    };
    let resource = discovery::find(group, version, plural).ok_or_else(Reply::not_found_path)?;
    let (status, scale) = match subresource {
        None => (false, false),
        Some("status") if resource.status_subresource => (true, false),
        Some("scale") if resource.scale_subresource => (false, true),
        Some(other) => return Err(no_such_subresource(&resource, other)),
    };
    if !resource.namespaced && namespace.is_some() {
        return Err(Reply::not_found_path());
    }
    let target = Target {
        resource,
        version: version.to_string(),
        namespace,
        name,
        status,
        scale,
    };
    let table = request
        .accept
        .contains("as=Table")
        .then(|| match query.get("includeObject") {
            Some(v) => IncludeObject::parse(v).ok_or_else(|| {
                Reply::bad_request(format!(
                    "includeObject: unsupported value \"{v}\": expected None, Metadata or Object"
                ))
            }),
            None => Ok(IncludeObject::Metadata),
        })
        .transpose()?;
    let selector = Selector::parse(query.get("labelSelector"), query.get("fieldSelector"))
        .map_err(Reply::bad_request)?;
    let dry_run = match query.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(Reply::bad_request(format!(
                "dryRun: unsupported value \"{other}\": expected All"
            )));
        }
    };
    let needs_name = |target: &Target| -> Result<(), Reply> {
        match target.name {
            Some(_) => Ok(()),
            None => Err(method_not_allowed(request.method)),
        }
    };
    match request.method {
        // As the API server: a Scale is read and written, never watched.
        "GET" if query.flag("watch") && target.scale => Err(method_not_allowed("watch")),
        "GET" if query.flag("watch") => {
            let mut selector = selector;
            if let Some(name) = &target.name {
                selector = Selector::named(name);
            }
            let since = match query.get("resourceVersion") {
                None | Some("") | Some("0") => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    Reply::bad_request(format!(
                        "invalid resourceVersion \"{rv}\": expected a number"
                    ))
                })?),
            };
            let timeout = match query.get("timeoutSeconds") {
                None => None,
                Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
                    Reply::bad_request(format!("timeoutSeconds \"{t}\": expected a whole number"))
                })?)),
            };
            Ok(Call::Watch(Watch {
                target,
                selector,
                since,
                table,
                timeout,
            }))
        }
        "GET" => Ok(Call::Read(Read {
            target,
            selector,
            table,
        })),
        "POST" => {
            if target.name.is_some() || target.status || target.scale {
                return Err(method_not_allowed("POST"));
            }
            let body = object_body(request)?;
            Ok(Call::Write(Write {
                target,
                op: WriteOp::Create(body),
                dry_run,
            }))
        }
        "PUT" => {
            needs_name(&target)?;
            let body = object_body(request)?;
            Ok(Call::Write(Write {
                target,
                op: WriteOp::Update(body),
                dry_run,
            }))
        }
        "PATCH" => {
            needs_name(&target)?;
            let media = request.content_type.split(';').next().unwrap_or("").trim();
            let patch = match media {
                "application/merge-patch+json" => PatchBody::Merge(json_body(request.body)?),
                "application/json-patch+json" => PatchBody::Json(json_body(request.body)?),
                // A Scale is a built-in type, whichever resource it scales.
                "application/strategic-merge-patch+json"
                    if !target.resource.custom || target.scale =>
                {
                    PatchBody::Strategic(json_body(request.body)?)
                }
                "application/apply-patch+yaml" => {
                    return Err(Reply::failure(
                        415,
                        "UnsupportedMediaType",
                        "canarysim does not implement server-side apply: use client-side `kubectl apply` (without --server-side), or kubectl patch",
                    ));
                }
                other => {
                    let accepted = if target.resource.custom && !target.scale {
                        "application/json-patch+json, application/merge-patch+json"
                    } else {
                        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                    };
                    return Err(Reply::failure(
                        415,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format ({other}) - accepted media types include: {accepted}"
                        ),
                    ));
                }
            };
            Ok(Call::Write(Write {
                target,
                op: WriteOp::Patch(patch),
                dry_run,
            }))
        }
        "DELETE" => {
            needs_name(&target)?;
            if target.status || target.scale {
                return Err(method_not_allowed("DELETE"));
            }
            Ok(Call::Write(Write {
                target,
                op: WriteOp::Delete,
                dry_run,
            }))
        }
        other => Err(method_not_allowed(other)),
    }
}

/// A subresource the resource does not have: NotFound, as the API server answers, naming
/// those it has.
fn no_such_subresource(resource: &Resource, subresource: &str) -> Reply {
    let served: Vec<&str> = [
        (resource.status_subresource, "status"),
        (resource.scale_subresource, "scale"),
    ]
    .into_iter()
    .filter_map(|(has, name)| has.then_some(name))
    .collect();
    let served = match served.as_slice() {
        [] => "none".to_string(),
        names => names.join(", "),
    };
    Reply::failure(
        404,
        "NotFound",
        format!(
            "the server could not find the requested resource ({}/{subresource}: the subresources served are: {served})",
            resource.kind.plural()
        ),
    )
}

fn method_not_allowed(method: &str) -> Reply {
    Reply::failure(
        405,
        "MethodNotAllowed",
        format!("the server does not allow this method on the requested resource ({method})"),
    )
}

/// A created or replaced object. kubectl's typed commands (`create configmap`, `create
/// secret`) send Kubernetes' protobuf, which canarysim does not read: a 415 in the API
/// server's words, with what to use instead.
fn object_body(request: &Request) -> Result<Value, Reply> {
    let media = request.content_type.split(';').next().unwrap_or("").trim();
    if media == "application/vnd.kubernetes.protobuf" {
        return Err(Reply::failure(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format (application/vnd.kubernetes.protobuf) - accepted media types include: application/json; canarysim does not read protobuf: write the object as YAML and `kubectl apply -f` it (kubectl create configmap NAME --from-literal=K=V --dry-run=client -o yaml | kubectl apply -f -)",
        ));
    }
    json_body(request.body)
}

fn json_body(body: &[u8]) -> Result<Value, Reply> {
    if body.len() > MAX_BODY {
        return Err(Reply::failure(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY}"),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| Reply::bad_request(format!("the body of the request is not valid JSON: {e}")))
}

/// Answers a read or write against the store. (A watch is started with [`Watch::start`].)
pub fn execute(api: &mut ApiServer, call: Call) -> Reply {
    match call {
        Call::Answer(reply) => reply,
        Call::Discovery(document) => document.answer(api),
        Call::Read(read) => execute_read(api, &read),
        Call::Watch(watch) => Reply::bad_request(format!(
            "a watch of {} is streamed, not answered at once",
            watch.target.resource.kind.plural()
        )),
        Call::Write(write) if write.dry_run => {
            let mut scratch = api.clone();
            let mut reply = execute_write(&mut scratch, &write);
            reply.wrote = false;
            reply
        }
        Call::Write(write) => execute_write(api, &write),
        Call::Namespaces {
            name,
            create,
            table,
        } => namespaces(api, name, create, table),
    }
}

fn namespace_object(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "creationTimestamp": crate::clock::SimTime::ZERO.rfc3339()},
           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

fn namespaces(api: &ApiServer, name: Option<String>, create: bool, table: bool) -> Reply {
    let single = name.is_some();
    let names: Vec<String> = match name {
        Some(n) => vec![n],
        None => {
            let mut in_use: std::collections::BTreeSet<String> = api
                .kinds()
                .flat_map(|k| api.list(k, None, None))
                .map(|o| match o.kind.as_str() {
                    // A Namespace the manifests hold (stored, cluster-scoped).
                    "Namespace" if o.kind.group().is_empty() => o.name().to_string(),
                    _ => o.namespace().to_string(),
                })
                .filter(|ns| !ns.is_empty())
                .collect();
            in_use.insert("default".into());
            in_use.into_iter().collect()
        }
    };
    let objects: Vec<Value> = names.iter().map(|n| namespace_object(n)).collect();
    if table {
        let rows: Vec<Value> = objects
            .iter()
            .map(|o| {
                json!({"cells": [o["metadata"]["name"], "Active",
                                 crate::go::human_duration(api.now().since(crate::clock::SimTime::ZERO))],
                       "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                  "metadata": o["metadata"]}})
            })
            .collect();
        let columns = json!([
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Status", "type": "string", "format": "", "description": "", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0},
        ]);
        return Reply::ok(
            200,
            json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"resourceVersion": api.resource_version().to_string()},
                   "columnDefinitions": columns, "rows": rows}),
        );
    }
    match (create, single) {
        (true, _) => Reply::ok(201, objects[0].clone()),
        (false, true) => Reply::ok(200, objects[0].clone()),
        (false, false) => Reply::ok(
            200,
            json!({"kind": "NamespaceList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": api.resource_version().to_string()},
                   "items": objects}),
        ),
    }
}

fn execute_read(api: &ApiServer, read: &Read) -> Reply {
    let target = &read.target;
    let kind = target.kind();
    if let Some(name) = &target.name {
        let namespace = target.namespace.as_deref().unwrap_or("");
        return match api.get(kind, namespace, name) {
            Ok(object) if target.scale => Reply::ok(200, scale_of(object)),
            Ok(object) => match read.table {
                Some(include) => Reply::ok(
                    200,
                    table::table(kind, &[object], api.now(), api.resource_version(), include),
                ),
                None => Reply::ok(200, target.present(object)),
            },
            Err(e) => Reply::from_api_error(&e, &target.resource),
        };
    }
    let objects: Vec<&Object> = api
        .list(kind, target.namespace.as_deref(), None)
        .into_iter()
        .filter(|o| read.selector.matches(o))
        .collect();
    if let Some(include) = read.table {
        return Reply::ok(
            200,
            table::table(kind, &objects, api.now(), api.resource_version(), include),
        );
    }
    let items: Vec<Value> = objects.iter().map(|o| target.present(o)).collect();
    Reply::ok(
        200,
        json!({
            "kind": format!("{}List", kind.as_str()),
            "apiVersion": target.api_version(),
            "metadata": {"resourceVersion": api.resource_version().to_string()},
            "items": items,
        }),
    )
}

fn execute_write(api: &mut ApiServer, write: &Write) -> Reply {
    let target = &write.target;
    let kind = target.kind();
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut warnings = Vec::new();
    if target.scale {
        let name = target.name.as_deref().unwrap_or_default();
        return match write_scale(api, target, &namespace, name, &write.op, &mut warnings) {
            Ok(object) => Reply {
                code: 200,
                body: scale_of(&object),
                warnings,
                wrote: true,
            },
            Err(reply) => reply,
        };
    }
    let result = match &write.op {
        WriteOp::Create(body) => {
            prepare(body, target, &namespace, None).and_then(|mut object| {
                if target.resource.status_subresource {
                    // The status subresource: a create starts with no status.
                    object.value.as_object_mut().map(|m| m.remove("status"));
                }
                review(&object, &mut warnings)?;
                api.create(object)
                    .map(|o| (201, o))
                    .map_err(|e| Reply::from_api_error(&e, &target.resource))
            })
        }
        WriteOp::Update(body) => {
            let name = target.name.as_deref().unwrap_or_default();
            prepare(body, target, &namespace, Some(name))
                .and_then(|object| store_replacement(api, target, object, &mut warnings))
                .map(|o| (200, o))
        }
        WriteOp::Patch(patch) => {
            let name = target.name.as_deref().unwrap_or_default();
            patched(api, target, &namespace, name, patch)
                .and_then(|object| store_replacement(api, target, object, &mut warnings))
                .map(|o| (200, o))
        }
        WriteOp::Delete => {
            let name = target.name.as_deref().unwrap_or_default();
            return match api.delete_cascading(kind, &namespace, name) {
                Ok(gone) => {
                    let details = json!({
                        "name": name,
                        "group": target.resource.group(),
                        "kind": kind.plural(),
                        "uid": gone.value["metadata"]["uid"],
                    });
                    let mut reply = Reply::ok(
                        200,
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": details}),
                    );
                    reply.wrote = true;
                    reply
                }
                Err(e) => Reply::from_api_error(&e, &target.resource),
            };
        }
    };
    match result {
        Ok((code, object)) => Reply {
            code,
            body: target.present(&object),
            warnings,
            wrote: true,
        },
        Err(reply) => reply,
    }
}

/// The object a create or update body carries, checked against the path.
fn prepare(
    body: &Value,
    target: &Target,
    namespace: &str,
    name: Option<&str>,
) -> Result<Object, Reply> {
    if !body.is_object() {
        return Err(Reply::bad_request(
            "the body of the request must be a JSON object (a Kubernetes object)",
        ));
    }
    let kind = target.kind();
    if let Some(k) = body.get("kind").and_then(Value::as_str) {
        if k != kind.as_str() {
            return Err(Reply::bad_request(format!(
                "the kind in the data ({k}) does not match the resource {} ({})",
                kind.plural(),
                kind.as_str()
            )));
        }
    }
    if let Some(v) = body.get("apiVersion").and_then(Value::as_str) {
        if !target
            .resource
            .versions
            .iter()
            .any(|ver| target.resource.api_version(ver) == v)
        {
            return Err(Reply::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({})",
                target.api_version()
            )));
        }
    }
    let mut object = Object::new(kind, body.clone());
    let given = object.namespace().to_string();
    if target.resource.namespaced {
        if !given.is_empty() && given != namespace {
            return Err(Reply::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        object
            .metadata_mut()
            .insert("namespace".into(), json!(namespace));
    }
    if let Some(name) = name {
        if object.name() != name {
            return Err(Reply::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                object.name()
            )));
        }
    }
    Ok(object)
}

/// The stored object with a patch applied (not yet stored).
fn patched(
    api: &ApiServer,
    target: &Target,
    namespace: &str,
    name: &str,
    patch: &PatchBody,
) -> Result<Object, Reply> {
    let kind = target.kind();
    let current = api
        .get(kind, namespace, name)
        .map_err(|e| Reply::from_api_error(&e, &target.resource))?;
    let invalid = |message: String| {
        Reply::from_api_error(
            &ApiError::Invalid {
                kind,
                name: name.to_string(),
                message,
            },
            &target.resource,
        )
    };
    let value = apply_patch(&current.value, patch)?;
    let mut next = Object::new(kind, value);
    if next.name() != name || next.namespace() != namespace {
        return Err(invalid(
            "metadata: Invalid value: name and namespace cannot be changed by a patch".into(),
        ));
    }
    if next.resource_version().is_empty() {
        next.metadata_mut()
            .insert("resourceVersion".into(), json!(current.resource_version()));
    }
    Ok(next)
}

/// `value` with a patch applied.
fn apply_patch(value: &Value, patch: &PatchBody) -> Result<Value, Reply> {
    let mut value = value.clone();
    match patch {
        PatchBody::Merge(p) => {
            if !p.is_object() {
                return Err(Reply::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut value, p);
        }
        PatchBody::Json(p) => {
            super::apply_json_patch(&mut value, p).map_err(Reply::bad_request)?;
        }
        PatchBody::Strategic(p) => {
            value = super::strategic::apply(&value, p).map_err(Reply::bad_request)?;
        }
    }
    Ok(value)
}

/// The autoscaling/v1 Scale of a Rollout or ReplicaSet, read where the Rollout CRD's scale
/// subresource reads it (specReplicasPath `.spec.replicas`, statusReplicasPath
/// `.status.HPAReplicas`, labelSelectorPath `.status.selector`) and where apps/v1 reads a
/// ReplicaSet's.
fn scale_of(object: &Object) -> Value {
    let status = object.status();
    let (spec_replicas, status_replicas, selector) = match object.kind {
        Kind::Rollout => (
            // The CRD's reading of an absent path is 0.
            object.spec()["replicas"].as_i64().unwrap_or(0),
            // Argo sets HPAReplicas to the count in `status.replicas`; canarysim's
            // controller writes only the latter.
            status
                .get("HPAReplicas")
                .or_else(|| status.get("replicas"))
                .and_then(Value::as_i64)
                .unwrap_or(0),
            status["selector"].as_str().unwrap_or_default().to_string(),
        ),
        _ => (
            // apps/v1 defaults an absent count to 1.
            object.spec()["replicas"].as_i64().unwrap_or(1),
            status["replicas"].as_i64().unwrap_or(0),
            super::selector::label_selector_string(&object.spec()["selector"]).unwrap_or_default(),
        ),
    };
    let mut metadata = serde_json::Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = object.metadata().and_then(|m| m.get(key)) {
            metadata.insert(key.into(), v.clone());
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": spec_replicas},
        "status": {"replicas": status_replicas, "selector": selector},
    })
}

/// A write to `/scale`: the Scale sent (PUT) or the current one patched (PATCH) gives the
/// new `spec.replicas`, and only that is stored, through the ordinary update (the
/// controllers then scale). A `metadata.resourceVersion` in the Scale is a precondition, as
/// on the object.
fn write_scale(
    api: &mut ApiServer,
    target: &Target,
    namespace: &str,
    name: &str,
    op: &WriteOp,
    warnings: &mut Vec<String>,
) -> Result<Object, Reply> {
    let current = api
        .get(target.kind(), namespace, name)
        .map_err(|e| Reply::from_api_error(&e, &target.resource))?
        .clone();
    let wanted = match op {
        WriteOp::Update(body) => {
            check_scale_body(body, name)?;
            body.clone()
        }
        WriteOp::Patch(patch) => apply_patch(&scale_of(&current), patch)?,
        // `parse` refuses these on a subresource; answered the same here all the same.
        WriteOp::Create(_) => return Err(method_not_allowed("POST")),
        WriteOp::Delete => return Err(method_not_allowed("DELETE")),
    };
    let replicas = match &wanted["spec"]["replicas"] {
        Value::Number(n)
            if n.as_i64()
                .is_some_and(|r| (0..=i64::from(i32::MAX)).contains(&r)) =>
        {
            n.clone()
        }
        other => {
            let shown = if other.is_null() {
                "null".to_string()
            } else {
                other.to_string()
            };
            return Err(invalid_scale(
                name,
                &format!(
                    "spec.replicas: Invalid value: {shown}: must be a whole number from 0 to {}",
                    i32::MAX
                ),
            ));
        }
    };
    let mut next = current.clone();
    crate::model::object::ensure_object(crate::model::object::object_entry(
        &mut next.value,
        "spec",
    ))
    .insert("replicas".into(), Value::Number(replicas));
    let precondition = wanted["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
        .unwrap_or(current.resource_version())
        .to_string();
    next.metadata_mut()
        .insert("resourceVersion".into(), json!(precondition));
    let object_target = Target {
        scale: false,
        ..target.clone()
    };
    store_replacement(api, &object_target, next, warnings)
}

/// A Scale sent whole (PUT) must be one, for the object in the path.
fn check_scale_body(body: &Value, name: &str) -> Result<(), Reply> {
    if !body.is_object() {
        return Err(Reply::bad_request(
            "the body of the request must be a JSON object (an autoscaling/v1 Scale)",
        ));
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str) {
        if kind != "Scale" {
            return Err(Reply::bad_request(format!(
                "the kind in the data ({kind}) does not match the subresource scale (Scale)"
            )));
        }
    }
    if let Some(v) = body.get("apiVersion").and_then(Value::as_str) {
        if v != "autoscaling/v1" {
            return Err(Reply::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version (autoscaling/v1)"
            )));
        }
    }
    match body["metadata"]["name"].as_str() {
        Some(given) if given != name => Err(Reply::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// A Scale the API server refuses (422), as kubectl prints it: `The Scale "x" is invalid`.
fn invalid_scale(name: &str, message: &str) -> Reply {
    let (field, cause) = message
        .split_once(": ")
        .unwrap_or(("spec.replicas", message));
    let mut reply = Reply::failure(
        422,
        "Invalid",
        format!("Scale.autoscaling \"{name}\" is invalid: {message}"),
    );
    reply.body["details"] = json!({
        "name": name,
        "group": "autoscaling",
        "kind": "Scale",
        "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": field}],
    });
    reply
}

/// Stores a replacement: through `/status` only its status; otherwise all but its status
/// (when the kind has a status subresource).
fn store_replacement(
    api: &mut ApiServer,
    target: &Target,
    mut object: Object,
    warnings: &mut Vec<String>,
) -> Result<Object, Reply> {
    let kind = target.kind();
    let current = api
        .get(kind, object.namespace(), object.name())
        .map_err(|e| Reply::from_api_error(&e, &target.resource))?
        .clone();
    let result = if target.status {
        api.update_status(object)
    } else {
        if target.resource.status_subresource {
            match current.value.get("status") {
                Some(s) => object.value["status"] = s.clone(),
                None => {
                    object.value.as_object_mut().map(|m| m.remove("status"));
                }
            }
        }
        review(&object, warnings)?;
        api.update(object)
    };
    result.map_err(|e| Reply::from_api_error(&e, &target.resource))
}

/// What canarysim does with the object's fields: unsimulated ones are warned about (the
/// `Warning` header kubectl prints); one canarysim cannot run honestly refuses the write.
fn review(object: &Object, warnings: &mut Vec<String>) -> Result<(), Reply> {
    let manifest = Manifest {
        object: object.clone(),
        source: Arc::new(SourceMap::synthetic("request")),
    };
    // What the API server's own validation refuses (names, labels, ports, replicas).
    let invalid = crate::model::kube_validation::validate(object);
    if !invalid.is_empty() {
        return Err(Reply::from_api_error(
            &ApiError::Invalid {
                kind: object.kind,
                name: object.name().to_string(),
                message: invalid
                    .iter()
                    .map(|i| i.message.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            },
            &discovery::resource(object.kind),
        ));
    }
    // What the CRDs' schemas would refuse: a spec whose fields have the wrong types.
    if let Err(e) = crate::model::typed::check_spec(object.kind, object.spec()) {
        return Err(Reply::from_api_error(
            &ApiError::Invalid {
                kind: object.kind,
                name: object.name().to_string(),
                message: format!("spec.{}: {}", e.path, e.message),
            },
            &discovery::resource(object.kind),
        ));
    }
    let review = crate::model::support::review(&manifest);
    if let Some(r) = review.rejections.first() {
        return Err(Reply::from_api_error(
            &ApiError::Invalid {
                kind: object.kind,
                name: object.name().to_string(),
                message: format!("canarysim cannot simulate it: {}", r.message),
            },
            &discovery::resource(object.kind),
        ));
    }
    warnings.extend(
        review
            .warnings
            .iter()
            .map(|w| format!("canarysim: {}", w.text())),
    );
    Ok(())
}

impl Watch {
    /// The events a new watch sends first: the matching objects as ADDED (no
    /// resourceVersion given) or the logged events after it; `410 Expired` when the log no
    /// longer reaches back that far.
    pub fn start(&self, api: &ApiServer) -> Result<Vec<Value>, Reply> {
        match self.since {
            None => {
                let namespace = self.target.namespace.as_deref();
                Ok(api
                    .list(self.target.kind(), namespace, None)
                    .into_iter()
                    .filter(|o| self.selector.matches(o))
                    .map(|o| self.event_json(EventType::Added, o, api))
                    .collect())
            }
            Some(since) if !api.watchable_since(since) => Err(Reply::failure(
                410,
                "Expired",
                format!(
                    "too old resource version: {since} ({})",
                    api.oldest_watchable()
                ),
            )),
            Some(since) => Ok(api
                .events_since(since)
                .iter()
                .filter_map(|e| self.render(e, api))
                .collect()),
        }
    }

    /// The event as this watch sends it, or None if it does not select it.
    pub fn render(&self, event: &WatchEvent, api: &ApiServer) -> Option<Value> {
        let o = &event.object;
        let selected = o.kind == self.target.kind()
            && self
                .target
                .namespace
                .as_deref()
                .is_none_or(|ns| o.namespace() == ns)
            && self.selector.matches(o);
        selected.then(|| self.event_json(event.event_type, o, api))
    }

    fn event_json(&self, event_type: EventType, object: &Object, api: &ApiServer) -> Value {
        let body = match self.table {
            Some(include) => table::table(
                object.kind,
                &[object],
                api.now(),
                object.resource_version().parse().unwrap_or(0),
                include,
            ),
            None => self.target.present(object),
        };
        json!({"type": event_type.as_str(), "object": body})
    }
}

#[cfg(test)]
mod tests;
