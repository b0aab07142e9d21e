//! Tests of the parent module.
use super::*;
use serde_json::json;

const L: GoJsonFlavor = GoJsonFlavor::Legacy;
const M: GoJsonFlavor = GoJsonFlavor::Modern;

/// argo-rollouts utils/hash/hash_test.go `generatePodTemplate("red")`, keys deliberately
/// out of Go order.
fn red_template() -> Value {
    json!({
        "spec": {
            "securityContext": {},
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "containers": [{
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "Always",
                "image": "red",
                "name": "red"
            }]
        },
        "metadata": { "labels": { "name": "red" } }
    })
}

const RED_LEGACY_JSON: &str = concat!(
    r#"{"metadata":{"creationTimestamp":null,"labels":{"name":"red"}},"#,
    r#""spec":{"containers":[{"name":"red","image":"red","resources":{},"#,
    r#""terminationMessagePath":"/dev/termination-log","imagePullPolicy":"Always"}],"#,
    r#""restartPolicy":"Always","dnsPolicy":"ClusterFirst","securityContext":{}}}"#
);

/// docs/getting-started/{basic,istio}/rollout.yaml pod template.
fn demo_template(image: &str, istio: bool) -> Value {
    let mut labels = json!({ "app": "rollouts-demo" });
    if istio {
        labels["istio-injection"] = json!("enabled");
    }
    json!({
        "metadata": { "labels": labels },
        "spec": {
            "containers": [{
                "name": "rollouts-demo",
                "image": image,
                "ports": [{ "name": "http", "containerPort": 8080, "protocol": "TCP" }],
                "resources": { "requests": { "memory": "32Mi", "cpu": "5m" } }
            }]
        }
    })
}

#[test]
fn fnv1a32_known_vectors() {
    assert_eq!(fnv1a32(b""), 0x811c_9dc5);
    assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
    assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
}

#[test]
fn safe_encode_maps_digits() {
    assert_eq!(safe_encode("0123456789"), "456789bcdf");
    assert_eq!(safe_encode(""), "");
    assert_eq!(safe_encode("a"), "v"); // 97 % 27 = 16 -> alphabet[16]
}

#[test]
fn argo_hash_test_red_template_legacy() {
    // hash_test.go: "7bb4fbc896 is the value produced by controller versions <= 1.8.x".
    let t = red_template();
    assert_eq!(go_json_pod_template(&t, L), RED_LEGACY_JSON);
    assert_eq!(pod_template_hash(&t, None, L), "7bb4fbc896");
}

#[test]
fn modern_flavour_omits_zero_creation_timestamp() {
    let t = red_template();
    let modern = go_json_pod_template(&t, M);
    assert_eq!(
        modern,
        RED_LEGACY_JSON.replace(r#""creationTimestamp":null,"#, "")
    );
    assert_eq!(pod_template_hash(&t, None, M), "5f78d78c4d");
    // A set timestamp is kept by both flavours.
    let mut t2 = t.clone();
    t2["metadata"]["creationTimestamp"] = json!("2024-01-02T03:04:05Z");
    assert!(go_json_pod_template(&t2, M).contains(r#""creationTimestamp":"2024-01-02T03:04:05Z""#));
}

#[test]
fn getting_started_basic_demo_hashes() {
    // `kubectl argo rollouts get rollout rollouts-demo` in the basic getting-started guide.
    let blue = demo_template("argoproj/rollouts-demo:blue", false);
    let yellow = demo_template("argoproj/rollouts-demo:yellow", false);
    assert_eq!(pod_template_hash(&blue, None, L), "687d76d795");
    assert_eq!(pod_template_hash(&yellow, None, L), "6cf78c66c5");
}

#[test]
fn getting_started_istio_demo_hashes() {
    // Istio getting-started walkthrough on helm chart 2.39.6 (Argo Rollouts v1.8).
    let blue = demo_template("argoproj/rollouts-demo:blue", true);
    assert_eq!(
        go_json_pod_template(&blue, L),
        concat!(
            r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"rollouts-demo","#,
            r#""istio-injection":"enabled"}},"spec":{"containers":[{"name":"rollouts-demo","#,
            r#""image":"argoproj/rollouts-demo:blue","ports":[{"name":"http","#,
            r#""containerPort":8080,"protocol":"TCP"}],"resources":{"requests":"#,
            r#"{"cpu":"5m","memory":"32Mi"}}}]}}"#
        )
    );
    assert_eq!(pod_template_hash(&blue, None, L), "76c569d8b");
    let yellow = demo_template("argoproj/rollouts-demo:yellow", true);
    assert_eq!(pod_template_hash(&yellow, None, L), "5cf4fb69f8");
}

#[test]
fn collision_count_appends_eight_bytes() {
    let t = red_template();
    let json = go_json_pod_template(&t, L);
    let mut bytes = json.clone().into_bytes();
    bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    let expected = safe_encode(&fnv1a32(&bytes).to_string());
    assert_eq!(pod_template_hash(&t, Some(1), L), expected);
    assert_eq!(expected, "7db7d79d7c");
    assert_eq!(pod_template_hash(&t, Some(0), L), "66fc5c7848");
    assert_ne!(pod_template_hash(&t, Some(0), L), "7bb4fbc896");
    assert_eq!(hash_go_json(&json, Some(-1)), "7f7df448c6"); // uint32(-1) = 0xffffffff
}

#[test]
fn steps_hash_published_value() {
    // A live Rollout dump: steps as below, status.currentStepHash 84d4b665cd.
    let steps = json!([
        { "setWeight": 25 },
        { "analysis": {
            "analysisRunMetadata": {},
            "templates": [
                { "templateName": "random-fail" },
                { "templateName": "always-pass" }
            ]
        } }
    ]);
    assert_eq!(
        go_json_steps(&steps),
        concat!(
            r#"[{"setWeight":25},{"analysis":{"templates":[{"templateName":"random-fail"},"#,
            r#"{"templateName":"always-pass"}],"analysisRunMetadata":{}}}]"#
        )
    );
    assert_eq!(steps_hash(&steps), "84d4b665cd");
    // analysisRunMetadata is a non-pointer struct: written even when the user omits it.
    let without = json!([{ "setWeight": 25 }, { "analysis": { "templates": [
        { "templateName": "random-fail" }, { "templateName": "always-pass" }
    ] } }]);
    assert_eq!(steps_hash(&without), "84d4b665cd");
}

#[test]
fn steps_field_order_and_pause_forms() {
    let steps = json!([
        { "pause": {} },
        { "pause": { "duration": 10 } },
        { "pause": { "duration": "1m" } },
        { "setCanaryScale": { "matchTrafficWeight": true, "weight": 0 } },
        { "plugin": { "config": { "b": 1, "a": "x" }, "name": "step/e2e" } },
        { "setHeaderRoute": { "match": [{ "headerName": "x" }], "name": "h" } }
    ]);
    assert_eq!(
        go_json_steps(&steps),
        concat!(
            r#"[{"pause":{}},{"pause":{"duration":10}},{"pause":{"duration":"1m"}},"#,
            r#"{"setCanaryScale":{"weight":0,"matchTrafficWeight":true}},"#,
            r#"{"plugin":{"name":"step/e2e","config":{"a":"x","b":1}}},"#,
            r#"{"setHeaderRoute":{"name":"h","match":[{"headerName":"x","headerValue":null}]}}]"#
        )
    );
    assert_eq!(go_json_steps(&Value::Null), "null");
    assert_eq!(go_json_steps(&json!([])), "[]");
    assert_ne!(
        steps_hash(&json!([{ "setWeight": 20 }])),
        steps_hash(&json!([{ "setWeight": 21 }]))
    );
}

#[test]
fn reorders_and_applies_omitempty_rules() {
    let t = json!({
        "spec": {
            "hostNetwork": false,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": { "zone": "b", "arch": "amd64" },
            "serviceAccountName": "",
            "tolerations": [],
            "containers": [{
                "ports": [{ "protocol": "TCP" }],
                "env": [{ "value": "1", "name": "A" }, { "name": "B", "value": "" }],
                "bogusField": 1,
                "readinessProbe": {
                    "periodSeconds": 5,
                    "httpGet": { "port": "http", "path": "/" },
                    "initialDelaySeconds": 0
                },
                "stdin": false
            }]
        }
    });
    assert_eq!(
        go_json_pod_template(&t, M),
        concat!(
            r#"{"metadata":{},"spec":{"containers":[{"name":"","ports":[{"containerPort":0,"#,
            r#""protocol":"TCP"}],"env":[{"name":"A","value":"1"},{"name":"B"}],"#,
            r#""resources":{},"readinessProbe":{"httpGet":{"path":"/","port":"http"},"#,
            r#""periodSeconds":5}}],"terminationGracePeriodSeconds":0,"#,
            r#""nodeSelector":{"arch":"amd64","zone":"b"},"#,
            r#""automountServiceAccountToken":false}}"#
        )
    );
}

#[test]
fn required_and_nullable_fields_get_zero_values() {
    let t = json!({ "spec": { "containers": [{
        "name": "c",
        "livenessProbe": { "grpc": { "port": 9000 }, "tcpSocket": {} },
        "env": [{ "name": "X", "valueFrom": { "resourceFieldRef": { "resource": "limits.cpu" } } }]
    }] } });
    assert_eq!(
        go_json_pod_template(&t, M),
        concat!(
            r#"{"metadata":{},"spec":{"containers":[{"name":"c","env":[{"name":"X","#,
            r#""valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}}],"#,
            r#""resources":{},"livenessProbe":{"tcpSocket":{"port":0},"#,
            r#""grpc":{"port":9000,"service":null}}}]}}"#
        )
    );
    // No spec at all: containers is a nil slice.
    assert_eq!(
        go_json_pod_template(&json!({}), L),
        r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":null}}"#
    );
}

#[test]
fn volumes_inline_source_and_unmodelled_objects_sorted() {
    let t = json!({ "spec": { "containers": [], "volumes": [
        { "configMap": { "name": "cm", "defaultMode": 420 }, "name": "cfg" },
        { "nfs": { "server": "s", "path": "/p" }, "name": "n" },
        { "name": "tmp", "emptyDir": {} }
    ] } });
    assert_eq!(
        go_json_pod_template(&t, M),
        concat!(
            r#"{"metadata":{},"spec":{"volumes":[{"name":"cfg","configMap":{"name":"cm","#,
            r#""defaultMode":420}},{"name":"n","nfs":{"path":"/p","server":"s"}},"#,
            r#"{"name":"tmp","emptyDir":{}}],"containers":[]}}"#
        )
    );
}

#[test]
fn modern_only_fields_dropped_by_legacy() {
    let t = json!({ "spec": { "containers": [], "resources": { "limits": { "cpu": "1" } } } });
    assert_eq!(
        go_json_pod_template(&t, L),
        r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":[]}}"#
    );
    assert_eq!(
        go_json_pod_template(&t, M),
        r#"{"metadata":{},"spec":{"containers":[],"resources":{"limits":{"cpu":"1"}}}}"#
    );
}

#[test]
fn go_string_escaping() {
    let t = json!({ "metadata": { "annotations": { "a&b": "<x>\"\\\n\u{1}\u{2028}é" } },
                    "spec": { "containers": [] } });
    assert_eq!(
        go_json_pod_template(&t, M),
        concat!(
            r#"{"metadata":{"annotations":{"a\u0026b":"\u003cx\u003e\"\\\n\u0001\u2028é"}},"#,
            r#""spec":{"containers":[]}}"#
        )
    );
}

#[test]
fn quantities_follow_apimachinery_serialisation() {
    let cases = [
        ("5m", "5m"),
        ("32Mi", "32Mi"),
        ("100Mi", "100Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5", "500m"),
        ("1000m", "1"),
        ("1000", "1k"),
        ("2", "2"),
        ("0", "0"),
        ("0m", "0"),
        ("1e3", "1e3"),
        ("100n", "100n"),
        ("0.1m", "100u"),
        ("512Ki", "512Ki"),
        ("1536", "1536"),
        ("-5m", "-5m"),
        ("0.0000000001", "1n"),
    ];
    for (written, want) in cases {
        assert_eq!(
            canonical_quantity(written).as_deref(),
            Some(want),
            "{written}"
        );
    }
    assert_eq!(canonical_quantity("-1.5Gi").as_deref(), Some("-1536Mi"));
    assert_eq!(canonical_quantity("05m").as_deref(), Some("05m")); // Go caches it verbatim
    assert_eq!(canonical_quantity("1e5000"), None);
    assert_eq!(
        canonical_quantity("0.000000000000000000000000000000000000000001"),
        Some("1n".to_string())
    );
    assert_eq!(canonical_quantity("abc"), None);
    assert_eq!(canonical_quantity(""), None);
    // Numbers written without quotes in YAML become strings.
    let t = json!({ "spec": { "containers": [{ "name": "c",
        "resources": { "limits": { "cpu": 1, "memory": "1024Mi" }, "requests": { "cpu": 0.25 } } }] } });
    assert!(go_json_pod_template(&t, M).contains(
        r#""resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"250m"}}"#
    ));
}

#[test]
fn odd_input_never_panics() {
    for v in [
        Value::Null,
        json!("template"),
        json!(42),
        json!([1, 2]),
        json!({ "spec": "x", "metadata": [] }),
        json!({ "spec": { "containers": { "not": "a list" } } }),
        json!({ "spec": { "containers": [null, 3, { "ports": [null] }] } }),
    ] {
        let s = go_json_pod_template(&v, L);
        assert!(!s.is_empty());
        let h = pod_template_hash(&v, Some(3), M);
        assert!(!h.is_empty() && h.len() <= 10);
        let _ = steps_hash(&v);
    }
    assert_eq!(go_json_pod_template(&json!("t<"), L), r#""t\u003c""#);
}
