use super::*;
use serde_json::json;

fn request<'a>(method: &'a str, path: &'a str, query: &'a str, body: &'a [u8]) -> Request<'a> {
    Request {
        method,
        path,
        query,
        content_type: "application/json",
        accept: "application/json",
        body,
    }
}

fn call(api: &mut ApiServer, method: &str, path: &str, query: &str, body: &Value) -> Reply {
    let bytes = body.to_string();
    execute(api, parse(&request(method, path, query, bytes.as_bytes())))
}

fn patch(api: &mut ApiServer, path: &str, content_type: &str, body: &Value) -> Reply {
    let bytes = body.to_string();
    let mut r = request("PATCH", path, "", bytes.as_bytes());
    r.content_type = content_type;
    execute(api, parse(&r))
}

const RO: &str = "/apis/argoproj.io/v1alpha1/namespaces/demo/rollouts";

fn rollout() -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
           "metadata": {"name": "ro", "labels": {"app": "demo"}},
           "spec": {"replicas": 2, "userField": {"kept": true}},
           "status": {"phase": "ignored on create"}})
}

#[test]
fn create_get_list_in_the_requested_version() {
    let mut api = ApiServer::new();
    let created = call(&mut api, "POST", RO, "", &rollout());
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(created.wrote);
    assert_eq!(created.body["metadata"]["namespace"], "demo");
    assert!(
        created.body.get("status").is_none(),
        "status is the subresource's"
    );
    let got = call(&mut api, "GET", &format!("{RO}/ro"), "", &Value::Null);
    assert_eq!(got.body["spec"]["userField"]["kept"], true);
    let list = call(
        &mut api,
        "GET",
        RO,
        "labelSelector=app%3Ddemo",
        &Value::Null,
    );
    assert_eq!(list.body["kind"], "RolloutList");
    assert_eq!(list.body["items"].as_array().unwrap().len(), 1);
    let none = call(
        &mut api,
        "GET",
        RO,
        "labelSelector=app%3Dother",
        &Value::Null,
    );
    assert_eq!(none.body["items"], json!([]));
    // An Istio object written as v1alpha3 is read back in the version asked for.
    let vs = json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "VirtualService",
                    "metadata": {"name": "vs"}, "spec": {"hosts": ["a"]}});
    let path = "/apis/networking.istio.io/v1beta1/namespaces/demo/virtualservices";
    assert_eq!(call(&mut api, "POST", path, "", &vs).code, 201);
    let got = call(&mut api, "GET", &format!("{path}/vs"), "", &Value::Null);
    assert_eq!(got.body["apiVersion"], "networking.istio.io/v1beta1");
}

#[test]
fn errors_are_kubernetes_status_objects() {
    let mut api = ApiServer::new();
    let missing = call(&mut api, "GET", &format!("{RO}/nope"), "", &Value::Null);
    assert_eq!(missing.code, 404);
    assert_eq!(missing.body["kind"], "Status");
    assert_eq!(missing.body["reason"], "NotFound");
    assert_eq!(
        missing.body["message"],
        "rollouts.argoproj.io \"nope\" not found"
    );
    assert_eq!(missing.body["details"]["kind"], "rollouts");
    let unknown = call(
        &mut api,
        "GET",
        "/apis/example.com/v1/widgets",
        "",
        &Value::Null,
    );
    assert_eq!(unknown.code, 404);
    let malformed = execute(&mut api, parse(&request("POST", RO, "", b"{not json")));
    assert_eq!(malformed.code, 400);
    assert!(
        malformed.body["message"]
            .as_str()
            .unwrap()
            .contains("at line 1 column 2"),
        "{}",
        malformed.body
    );
    let wrong_kind = call(
        &mut api,
        "POST",
        RO,
        "",
        &json!({"kind": "Service", "metadata": {"name": "x"}}),
    );
    assert_eq!(wrong_kind.code, 400);
    call(&mut api, "POST", RO, "", &rollout());
    let again = call(&mut api, "POST", RO, "", &rollout());
    assert_eq!(
        (again.code, again.body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    let smp = patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/strategic-merge-patch+json",
        &json!({}),
    );
    assert_eq!(
        smp.code, 415,
        "custom resources take no strategic merge patch"
    );
    let bad = patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/json-patch+json",
        &json!([{"op": "remove", "path": "/spec/none"}]),
    );
    assert_eq!(bad.code, 400, "{}", bad.body);
    let rename = patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/merge-patch+json",
        &json!({"metadata": {"name": "other"}}),
    );
    assert_eq!(rename.code, 422, "{}", rename.body);
    assert_eq!(rename.body["details"]["kind"], "Rollout");
    assert_eq!(rename.body["details"]["causes"][0]["field"], "metadata");
    // The API server's own validation, in its words.
    let bad_name = call(
        &mut api,
        "POST",
        RO,
        "",
        &json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                "metadata": {"name": "a/b"}, "spec": {"replicas": 1}}),
    );
    assert_eq!(bad_name.code, 422, "{}", bad_name.body);
    assert!(
        bad_name.body["message"]
            .as_str()
            .unwrap()
            .contains("metadata.name: Invalid value: \"a/b\": may not contain '/'"),
        "{}",
        bad_name.body
    );
    let typed = patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": "many"}}),
    );
    assert_eq!(
        typed.code, 422,
        "a spec of the wrong type is refused as the CRD schema refuses it"
    );
    assert!(
        typed.body["message"]
            .as_str()
            .unwrap()
            .contains("expected a whole number from -2,147,483,648 to 2,147,483,647"),
        "{}",
        typed.body
    );
    let put = call(&mut api, "PUT", RO, "", &rollout());
    assert_eq!(put.code, 405);
}

#[test]
fn stale_resource_version_gets_409_and_the_status_subresource_is_separate() {
    let mut api = ApiServer::new();
    let created = call(&mut api, "POST", RO, "", &rollout()).body;
    let mut first = created.clone();
    first["spec"]["replicas"] = json!(3);
    first["status"] = json!({"phase": "not through the main resource"});
    let ok = call(&mut api, "PUT", &format!("{RO}/ro"), "", &first);
    assert_eq!(ok.code, 200);
    assert!(ok.body.get("status").is_none());
    let mut stale = created;
    stale["spec"]["replicas"] = json!(4);
    let conflict = call(&mut api, "PUT", &format!("{RO}/ro"), "", &stale);
    assert_eq!(
        (conflict.code, conflict.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let status = patch(
        &mut api,
        &format!("{RO}/ro/status"),
        "application/merge-patch+json",
        &json!({"status": {"pauseConditions": null, "phase": "Paused"}, "spec": {"replicas": 9}}),
    );
    assert_eq!(status.code, 200);
    assert_eq!(status.body["status"]["phase"], "Paused");
    assert_eq!(
        status.body["spec"]["replicas"], 3,
        "a status write leaves spec alone"
    );
}

#[test]
fn strategic_merge_patch_on_a_service_and_dry_run() {
    let mut api = ApiServer::new();
    let path = "/api/v1/namespaces/demo/services";
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                     "spec": {"ports": [{"port": 80}], "selector": {"app": "a"}}});
    call(&mut api, "POST", path, "", &svc);
    let r = patch(
        &mut api,
        &format!("{path}/s"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ports": [{"port": 443}]}}),
    );
    assert_eq!(
        r.body["spec"]["ports"],
        json!([{"port": 80}, {"port": 443}])
    );
    let before = api.resource_version();
    let dry = call(
        &mut api,
        "DELETE",
        &format!("{path}/s"),
        "dryRun=All",
        &Value::Null,
    );
    assert_eq!(dry.code, 200);
    assert!(!dry.wrote);
    assert_eq!(api.resource_version(), before);
    assert!(api.get(Kind::Service, "demo", "s").is_ok());
}

#[test]
fn delete_takes_what_the_object_owns() {
    let mut api = ApiServer::new();
    let ro = call(&mut api, "POST", RO, "", &rollout()).body;
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": "ro-1", "ownerReferences": [{"uid": ro["metadata"]["uid"]}]}});
    let rs = call(
        &mut api,
        "POST",
        "/apis/apps/v1/namespaces/demo/replicasets",
        "",
        &rs,
    )
    .body;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "ro-1-a", "ownerReferences": [{"uid": rs["metadata"]["uid"]}]}});
    call(&mut api, "POST", "/api/v1/namespaces/demo/pods", "", &pod);
    let gone = call(&mut api, "DELETE", &format!("{RO}/ro"), "", &Value::Null);
    assert_eq!(gone.body["status"], "Success");
    assert!(api.list(Kind::ReplicaSet, None, None).is_empty());
    assert!(api.list(Kind::Pod, None, None).is_empty());
}

#[test]
fn watches_replay_from_a_resource_version_and_410_once_compacted() {
    let mut api = ApiServer::new();
    call(&mut api, "POST", RO, "", &rollout());
    let Call::Watch(w) = parse(&request("GET", RO, "watch=1&resourceVersion=1", b"")) else {
        panic!("a watch")
    };
    assert!(w.start(&api).unwrap().is_empty());
    patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 5}}),
    );
    let events = w.start(&api).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(events[0]["object"]["spec"]["replicas"], 5);
    let Call::Watch(all) = parse(&request("GET", RO, "watch=true", b"")) else {
        panic!("a watch")
    };
    assert_eq!(all.start(&api).unwrap()[0]["type"], "ADDED");
    api.compact_log(0, usize::MAX);
    let expired = w.start(&api).unwrap_err();
    assert_eq!(
        (expired.code, expired.body["reason"].as_str()),
        (410, Some("Expired"))
    );
    assert_eq!(expired.body["message"], "too old resource version: 1 (2)");
}

#[test]
fn discovery_lists_groups_and_short_names() {
    let mut api = ApiServer::new();
    let groups = call(&mut api, "GET", "/apis", "", &Value::Null).body;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for group in [
        "apps",
        "argoproj.io",
        "networking.istio.io",
        "autoscaling",
        "rbac.authorization.k8s.io",
        "gateway.networking.k8s.io",
    ] {
        assert!(names.contains(&group), "{group}: {names:?}");
    }
    assert!(names.is_sorted(), "{names:?}");
    // A kind nothing describes is served by the store that holds one, not by any other.
    let certificate = crate::model::yaml::load_str(
        "c.yaml",
        "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: c}\n",
        "demo",
    )
    .unwrap()
    .remove(0);
    let mut holder = ApiServer::new();
    holder.create(certificate.object).unwrap();
    let listed = |api: &mut ApiServer| call(api, "GET", "/apis", "", &Value::Null).body.to_string();
    assert!(listed(&mut holder).contains("\"cert-manager.io/v1\""));
    assert!(!listed(&mut api).contains("cert-manager.io"));
    let certificates = call(
        &mut holder,
        "GET",
        "/apis/cert-manager.io/v1/namespaces/demo/certificates",
        "",
        &Value::Null,
    );
    assert_eq!(
        certificates.body["items"][0]["metadata"]["name"], "c",
        "{}",
        certificates.body
    );
    let configmaps = call(
        &mut api,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        "",
        &Value::Null,
    );
    assert_eq!(
        (configmaps.code, &configmaps.body["items"]),
        (200, &json!([]))
    );
    let argo = call(
        &mut api,
        "GET",
        "/apis/argoproj.io/v1alpha1",
        "",
        &Value::Null,
    )
    .body;
    assert!(
        argo["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["shortNames"] == json!(["ro"]))
    );
    assert_eq!(call(&mut api, "POST", "/apis", "", &Value::Null).code, 405);
}

#[test]
fn a_rollouts_scale_takes_every_patch_type_and_refuses_a_count_that_is_not_one() {
    let mut api = ApiServer::new();
    assert_eq!(call(&mut api, "POST", RO, "", &rollout()).code, 201);
    let scale = format!("{RO}/ro/scale");
    let got = call(&mut api, "GET", &scale, "", &Value::Null);
    assert_eq!(got.code, 200, "{}", got.body);
    assert_eq!(got.body["spec"]["replicas"], 2);
    // No controller ran: no status yet, so none counted.
    assert_eq!(got.body["status"], json!({"replicas": 0, "selector": ""}));
    // A Scale is a built-in type: strategic merge patch too, though a Rollout's own
    // patches are JSON and merge only.
    let strategic = "application/strategic-merge-patch+json";
    let reply = patch(
        &mut api,
        &scale,
        strategic,
        &json!({"spec": {"replicas": 7}}),
    );
    assert_eq!(reply.code, 200, "{}", reply.body);
    assert!(reply.wrote);
    let own = patch(
        &mut api,
        &format!("{RO}/ro"),
        strategic,
        &json!({"spec": {}}),
    );
    assert_eq!(own.code, 415);
    let reply = patch(
        &mut api,
        &scale,
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
    );
    assert_eq!(reply.body["spec"]["replicas"], 3, "{}", reply.body);
    let ro = call(&mut api, "GET", &format!("{RO}/ro"), "", &Value::Null);
    assert_eq!(ro.body["spec"]["replicas"], 3);
    assert_eq!(
        ro.body["spec"]["userField"]["kept"], true,
        "only the count changed"
    );
    for bad in [json!("many"), json!(1.5), json!(-2), Value::Null] {
        let reply = patch(
            &mut api,
            &scale,
            "application/merge-patch+json",
            &json!({"spec": {"replicas": bad}}),
        );
        assert_eq!(reply.code, 422, "{bad}: {}", reply.body);
        assert!(!reply.wrote);
        let message = reply.body["message"].as_str().unwrap();
        assert!(
            message.starts_with("Scale.autoscaling \"ro\" is invalid: spec.replicas: "),
            "{message}"
        );
    }
    // A PUT of something else than a Scale, or of another object's.
    let wrong_kind = json!({"kind": "Rollout", "spec": {"replicas": 1}});
    assert_eq!(call(&mut api, "PUT", &scale, "", &wrong_kind).code, 400);
    let other = json!({"kind": "Scale", "metadata": {"name": "other"}, "spec": {"replicas": 1}});
    assert_eq!(call(&mut api, "PUT", &scale, "", &other).code, 400);
    // A resource without a scale subresource: NotFound, naming what it has.
    let svc = "/api/v1/namespaces/demo/services/s/scale";
    let reply = call(&mut api, "GET", svc, "", &Value::Null);
    assert_eq!(reply.code, 404);
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("services/scale: the subresources served are: status"),
        "{}",
        reply.body
    );
    let missing = call(
        &mut api,
        "GET",
        &format!("{RO}/nope/scale"),
        "",
        &Value::Null,
    );
    assert_eq!(missing.code, 404);
    assert_eq!(missing.body["reason"], "NotFound");
}

#[test]
fn a_json_patch_whose_move_fails_halfway_is_refused_and_changes_nothing() {
    // Found by the api_request fuzzer: "/sPUT /tatus" has a parent "/sPUT " that does not
    // exist, so the move fails after removing "/spec", and json-patch's own undo of the
    // earlier replace then panicked.
    let mut api = ApiServer::new();
    assert_eq!(call(&mut api, "POST", RO, "", &rollout()).code, 201);
    let body = json!([{"op": "replace", "path": "/spec/replicas", "value": "x"},
                      {"op": "move", "from": "/spec", "path": "/sPUT /tatus"}]);
    let reply = patch(
        &mut api,
        &format!("{RO}/ro"),
        "application/json-patch+json",
        &body,
    );
    assert_eq!(reply.code, 400, "{}", reply.body);
    assert!(!reply.wrote);
    let got = call(&mut api, "GET", &format!("{RO}/ro"), "", &Value::Null);
    assert_eq!(got.body["spec"]["replicas"], 2, "{}", got.body);
}

#[test]
fn a_protobuf_body_is_refused_with_what_to_do_instead() {
    let mut api = ApiServer::new();
    let mut r = request(
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        "",
        b"k8s\0\x0a",
    );
    r.content_type = "application/vnd.kubernetes.protobuf";
    let reply = execute(&mut api, parse(&r));
    assert_eq!(reply.code, 415, "{}", reply.body);
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap()
            .contains("kubectl apply -f")
    );
    // As JSON, the same ConfigMap is stored and listed.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"a": "b"}});
    let created = call(
        &mut api,
        "POST",
        "/api/v1/namespaces/demo/configmaps",
        "",
        &cm,
    );
    assert_eq!(created.code, 201, "{}", created.body);
    let listed = call(
        &mut api,
        "GET",
        "/api/v1/namespaces/demo/configmaps",
        "",
        &Value::Null,
    );
    assert_eq!(listed.body["items"][0]["data"]["a"], "b");
}

#[test]
fn a_stored_deployment_has_status_and_scale_subresources_and_a_config_map_neither() {
    let mut api = ApiServer::new();
    let deployments = "/apis/apps/v1/namespaces/demo/deployments";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "custom": 1, "selector": {
            "matchLabels": {"zone": "a", "app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}]}},
        "status": {"readyReplicas": 2}});
    let created = call(&mut api, "POST", deployments, "", &deployment);
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(
        created.body.get("status").is_none(),
        "a create starts with no status"
    );
    let status = patch(
        &mut api,
        &format!("{deployments}/web/status"),
        "application/merge-patch+json",
        &json!({"status": {"replicas": 2, "readyReplicas": 1}, "spec": {"replicas": 9}}),
    );
    assert_eq!(status.code, 200, "{}", status.body);
    assert_eq!(status.body["status"]["readyReplicas"], 1);
    assert_eq!(
        status.body["spec"]["replicas"], 2,
        "a status write leaves spec alone"
    );
    let main = patch(
        &mut api,
        &format!("{deployments}/web"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 7}}),
    );
    assert_eq!(main.code, 200, "{}", main.body);
    assert_eq!(
        main.body["status"]["readyReplicas"], 1,
        "status is the subresource's"
    );
    // `kubectl scale deployment web --replicas 5`.
    let scale = format!("{deployments}/web/scale");
    let got = call(&mut api, "GET", &scale, "", &Value::Null);
    assert_eq!(
        (got.code, &got.body["spec"], &got.body["status"]),
        (
            200,
            &json!({"replicas": 3}),
            // Kubernetes' requirements, sorted by key.
            &json!({"replicas": 2, "selector": "app=web,tier in (api,web),zone=a"})
        ),
        "{}",
        got.body
    );
    let scaled = patch(
        &mut api,
        &scale,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 5}}),
    );
    assert_eq!(scaled.code, 200, "{}", scaled.body);
    let web = call(
        &mut api,
        "GET",
        &format!("{deployments}/web"),
        "",
        &Value::Null,
    );
    assert_eq!(web.body["spec"]["replicas"], 5);
    assert_eq!(web.body["spec"]["custom"], 1, "unknown fields survive");
    // A ConfigMap has neither: its status (none in Kubernetes) is the object's.
    let config_maps = "/api/v1/namespaces/demo/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(call(&mut api, "POST", config_maps, "", &cm).code, 201);
    let reply = call(
        &mut api,
        "GET",
        &format!("{config_maps}/c/status"),
        "",
        &Value::Null,
    );
    assert_eq!(reply.code, 404, "{}", reply.body);
}

#[test]
fn discovery_lists_the_subresources_of_stored_kinds() {
    let mut api = ApiServer::new();
    let apps = call(&mut api, "GET", "/apis/apps/v1", "", &Value::Null);
    let names: Vec<&str> = apps.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for name in [
        "deployments/status",
        "deployments/scale",
        "statefulsets/scale",
        "daemonsets/status",
        "replicasets/scale",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert!(!names.contains(&"daemonsets/scale"), "{names:?}");
    assert!(!names.contains(&"controllerrevisions/status"), "{names:?}");
}

#[test]
fn an_httproute_the_gateway_api_crds_refuse_gets_422_on_create_and_patch() {
    let mut api = ApiServer::new();
    let routes = "/apis/gateway.networking.k8s.io/v1/namespaces/demo/httproutes";
    let route = |weight: i64| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [
                {"name": "stable", "port": 80, "weight": 100 - weight},
                {"name": "canary", "port": 80, "weight": weight}]}]}})
    };
    let refused = call(&mut api, "POST", routes, "", &route(-5));
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert!(
        refused.body["message"].as_str().unwrap().contains(
            "spec.rules[0].backendRefs[1].weight: Invalid value: -5: spec.rules[0].backendRefs[1].weight in body should be greater than or equal to 0"
        ),
        "{}",
        refused.body
    );
    let created = call(&mut api, "POST", routes, "", &route(20));
    assert_eq!(created.code, 201, "{}", created.body);
    // A patch that would drop the canary's port is refused and leaves the route as it was.
    let patched = patch(
        &mut api,
        &format!("{routes}/web"),
        "application/json-patch+json",
        &json!([{"op": "remove", "path": "/spec/rules/0/backendRefs/1/port"}]),
    );
    assert_eq!(patched.code, 422, "{}", patched.body);
    assert!(
        patched.body["message"]
            .as_str()
            .unwrap()
            .contains("Must have port for Service reference"),
        "{}",
        patched.body
    );
    let kept = call(&mut api, "GET", &format!("{routes}/web"), "", &Value::Null);
    assert_eq!(kept.body["spec"]["rules"][0]["backendRefs"][1]["port"], 80);
}
