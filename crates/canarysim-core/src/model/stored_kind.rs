//! The kinds canarysim stores and serves without simulating them.
//!
//! A real chart renders ConfigMaps, Deployments, HPAs and CRDs' objects beside its Rollout.
//! Each is kept as the value written, served by `serve --api` under its real group,
//! version, plural and scope, and named once in a warning; none is acted upon. Kubernetes'
//! built-in kinds (and those of the CRDs users install most) are described here as the API
//! server describes them; any other kind gets the names a CRD would most likely give it,
//! unless a CustomResourceDefinition among the manifests says otherwise.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

/// How the API serves a kind canarysim only stores.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindInfo {
    /// API group (`""` for the core group).
    pub group: &'static str,
    pub kind: &'static str,
    /// Versions served, the preferred one first.
    pub versions: &'static [&'static str],
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    /// Whether Kubernetes itself serves the kind (strategic merge patches, no CRD needed).
    pub built_in: bool,
    /// Whether the names were guessed from the kind (no table entry, no CRD among the
    /// manifests): then any version written is served.
    pub guessed: bool,
    /// Whether a CustomResourceDefinition among the manifests declares the `status`
    /// subresource (a described kind's subresources are known: see
    /// [`KindInfo::status_subresource`]).
    pub crd_status: bool,
}

/// The described kinds served with a `status` subresource (Kubernetes 1.32's
/// `kubectl get --raw /apis/GROUP/VERSION`, and the CRDs' own declarations), by group and
/// plural.
const WITH_STATUS: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "replicationcontrollers"),
    ("", "resourcequotas"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("apiregistration.k8s.io", "apiservices"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("certificates.k8s.io", "certificatesigningrequests"),
    ("networking.k8s.io", "ingresses"),
    ("policy", "poddisruptionbudgets"),
    ("gateway.networking.k8s.io", "gateways"),
    ("gateway.networking.k8s.io", "gatewayclasses"),
    ("gateway.networking.k8s.io", "httproutes"),
    ("gateway.networking.k8s.io", "grpcroutes"),
    ("gateway.networking.k8s.io", "tcproutes"),
    ("gateway.networking.k8s.io", "tlsroutes"),
    ("gateway.networking.k8s.io", "udproutes"),
    ("gateway.networking.k8s.io", "backendtlspolicies"),
    ("networking.istio.io", "serviceentries"),
    ("networking.istio.io", "sidecars"),
    ("networking.istio.io", "envoyfilters"),
    ("flagger.app", "canaries"),
];

/// The described kinds served with a `scale` subresource whose Scale reads `spec.replicas`,
/// `status.replicas` and the `spec.selector` label selector, as apps/v1 does.
const WITH_SCALE: &[(&str, &str)] = &[("apps", "deployments"), ("apps", "statefulsets")];

impl KindInfo {
    /// Whether the API serves the kind's `status` subresource: a create or update then
    /// leaves the status as it was, and only `/status` writes it.
    pub fn status_subresource(&self) -> bool {
        self.crd_status || WITH_STATUS.contains(&(self.group, self.plural))
    }

    /// Whether the API serves the kind's `scale` subresource (`kubectl scale`).
    pub fn scale_subresource(&self) -> bool {
        WITH_SCALE.contains(&(self.group, self.plural))
    }
}

/// A kind canarysim stores without simulating: cheap to copy, compared by its names.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoredKind(&'static KindInfo);

impl StoredKind {
    pub fn info(self) -> &'static KindInfo {
        self.0
    }
}

impl fmt::Debug for StoredKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.group {
            "" => write!(f, "{}", self.0.kind),
            group => write!(f, "{}.{group}", self.0.kind),
        }
    }
}

/// Why a kind is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindRefused {
    /// The group is known and the kind looks like one of its kinds (`Deploymnet`).
    Misspelt { known: &'static str },
    /// The kind is known, but not at this version (autoscaling/v2beta2, removed in 1.26).
    VersionNotServed,
    /// The core group is closed: every kind of `v1` is known.
    NotInCoreGroup,
    /// More distinct kinds than a cluster's worth.
    TooMany,
    /// A kind, group or version no CustomResourceDefinition could name.
    Malformed,
}

impl KindRefused {
    /// The message, as kubectl words a kind the server does not serve.
    pub fn message(&self, api_version: &str, kind: &str) -> String {
        let no_match = format!("no matches for kind \"{kind}\" in version \"{api_version}\"");
        match self {
            KindRefused::Misspelt { known } => format!("{no_match}; did you mean {known}?"),
            KindRefused::VersionNotServed => {
                let served = KNOWN
                    .iter()
                    .find(|k| k.kind == kind && Some(k.group) == group_of(api_version))
                    .map(|k| k.versions.join(", "))
                    .unwrap_or_default();
                format!("{no_match} (Kubernetes 1.32 serves {served})")
            }
            KindRefused::NotInCoreGroup => no_match,
            KindRefused::TooMany => format!(
                "more than {MAX_DISTINCT_KINDS} distinct kinds; canarysim stores at most that many"
            ),
            KindRefused::Malformed => format!(
                "{}: a CustomResourceDefinition's kind is a DNS-1035 label in any case (at most \
                 63 letters, digits and '-', starting with a letter), its group a DNS-1123 \
                 subdomain and its version a DNS-1035 label",
                no_match_short(api_version, kind)
            ),
        }
    }
}

/// Distinct unknown kinds kept for a process's life (each is a few names): a bound, since
/// any input may name new ones.
const MAX_DISTINCT_KINDS: usize = 1024;

/// `no matches for kind …` with the kind and version cut to a readable length.
fn no_match_short(api_version: &str, kind: &str) -> String {
    let cut = |s: &str| -> String {
        match s.char_indices().nth(80) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s.to_string(),
        }
    };
    format!(
        "no matches for kind \"{}\" in version \"{}\"",
        cut(kind),
        cut(api_version)
    )
}

/// Whether a CustomResourceDefinition could name this kind (Kubernetes' validation of
/// `spec.names` and `spec.group`): kept for the process's life, so never unbounded text.
fn well_formed(group: &str, version: &str, kind: &str, crd: Option<&CrdNames>) -> bool {
    let label = |s: &str| {
        s.len() <= 63
            && crate::model::kube_validation::matches_dns1123_label(s)
            && s.starts_with(|c: char| c.is_ascii_lowercase())
    };
    let names_ok = crd.is_none_or(|c| {
        label(&c.plural)
            && (c.singular.is_empty() || label(&c.singular))
            && c.short_names.len() <= 16
            && c.short_names.iter().all(|n| label(n))
            && c.versions.len() <= 16
            && c.versions.iter().all(|v| label(v))
    });
    label(&kind.to_lowercase())
        && crate::model::kube_validation::dns1123_subdomain_errors(group).is_empty()
        && label(version)
        && names_ok
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → `""`), if well formed.
fn group_of(api_version: &str) -> Option<&str> {
    match api_version.split_once('/') {
        Some((group, version)) if !group.is_empty() && !version.is_empty() => Some(group),
        Some(_) => None,
        None if !api_version.is_empty() => Some(""),
        None => None,
    }
}

fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

/// A kind of the table canarysim knows (Kubernetes' built-ins among them), by group and kind.
pub fn known(group: &str, kind: &str) -> Option<StoredKind> {
    KNOWN
        .iter()
        .find(|k| k.group == group && k.kind == kind)
        .map(StoredKind)
}

/// The stored kind for `apiVersion`/`kind`, or why it is refused. `crds` are the
/// CustomResourceDefinitions among the manifests, which name their kinds' plural and scope.
pub fn resolve(
    api_version: &str,
    kind: &str,
    crds: &[CrdNames],
    simulated: &[(&'static str, &'static str)],
) -> Result<StoredKind, KindRefused> {
    let Some(group) = group_of(api_version) else {
        return Err(KindRefused::NotInCoreGroup);
    };
    let version = version_of(api_version);
    // Before any comparison: a kind of megabytes is refused at once, and never interned.
    if kind.len() > 63 || api_version.len() > 253 + 64 {
        return Err(KindRefused::Malformed);
    }
    if let Some(info) = KNOWN.iter().find(|k| k.group == group && k.kind == kind) {
        return if info.versions.contains(&version) {
            Ok(StoredKind(info))
        } else {
            Err(KindRefused::VersionNotServed)
        };
    }
    let near = KNOWN
        .iter()
        .map(|k| (k.group, k.kind))
        .chain(simulated.iter().copied())
        .filter(|(g, _)| *g == group)
        .map(|(_, k)| k)
        .find(|known| misspelt(kind, known));
    if let Some(known) = near {
        return Err(KindRefused::Misspelt { known });
    }
    if group.is_empty() {
        return Err(KindRefused::NotInCoreGroup);
    }
    let crd = crds.iter().find(|c| c.group == group && c.kind == kind);
    if !well_formed(group, version, kind, crd) {
        return Err(KindRefused::Malformed);
    }
    intern(group, version, kind, crds)
}

/// Whether canarysim describes `kind` of `group` (a built-in kind, a common CRD's).
pub fn describes(group: &str, kind: &str) -> bool {
    KNOWN.iter().any(|k| k.group == group && k.kind == kind)
}

/// Whether `group` is one whose kinds canarysim describes (Kubernetes' own, Istio's, …).
pub fn is_known_group(group: &str) -> bool {
    KNOWN.iter().any(|k| k.group == group)
}

/// A kind written in other case than a known one, or an edit or two away from it (one for
/// names under six letters: `Role` and `Node` are two apart).
fn misspelt(kind: &str, known: &str) -> bool {
    let allowed = if known.len() < 6 { 1 } else { 2 };
    kind != known
        && strsim::damerau_levenshtein(&kind.to_lowercase(), &known.to_lowercase()) <= allowed
}

/// What a CustomResourceDefinition says of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdNames {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<String>,
    /// Some version declares `subresources.status`.
    pub status_subresource: bool,
}

impl CrdNames {
    /// Reads `spec.group`, `spec.names` and `spec.scope` of a CustomResourceDefinition.
    pub fn of(crd: &serde_json::Value) -> Option<CrdNames> {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        let kind = text(&names["kind"])?;
        Some(CrdNames {
            group: text(&spec["group"])?,
            plural: text(&names["plural"]).unwrap_or_else(|| plural_of(&kind)),
            singular: text(&names["singular"]).unwrap_or_else(|| kind.to_lowercase()),
            short_names: names["shortNames"]
                .as_array()
                .map(|a| a.iter().filter_map(text).collect())
                .unwrap_or_default(),
            namespaced: spec["scope"].as_str() != Some("Cluster"),
            versions: spec["versions"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| text(&v["name"])).collect())
                .unwrap_or_default(),
            status_subresource: spec["versions"]
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v["subresources"]["status"].is_object())),
            kind,
        })
    }
}

/// The plural a CRD most likely declares for `kind` (`Certificate` → `certificates`,
/// `NetworkPolicy` → `networkpolicies`, `Ingress` → `ingresses`).
pub fn plural_of(kind: &str) -> String {
    let lower = kind.to_lowercase();
    let ends_in_consonant_y = lower.ends_with('y')
        && !lower[..lower.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u'])
        && lower.len() > 1;
    if ends_in_consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// The plural in the kind's own case (`NetworkPolicies`, `Ingresses`, `Endpoints`): the
/// kind up to where its lower-case form and the plural part, then the rest of the plural.
pub fn plural_as_written(info: &KindInfo) -> String {
    let lower = info.kind.to_lowercase();
    let common = lower
        .bytes()
        .zip(info.plural.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    match info.kind.get(..common) {
        Some(prefix) if lower.len() == info.kind.len() => {
            format!("{prefix}{}", &info.plural[common..])
        }
        _ => info.plural.to_string(),
    }
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn leak_all(texts: Vec<String>) -> &'static [&'static str] {
    Box::leak(
        texts
            .into_iter()
            .map(leak)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// Unknown kinds met so far, by group and kind. Kept for the process's life so that a
/// `StoredKind` stays `Copy`; bounded by [`MAX_DISTINCT_KINDS`].
fn interned() -> &'static Mutex<BTreeMap<(String, String), &'static KindInfo>> {
    static INTERNED: OnceLock<Mutex<BTreeMap<(String, String), &'static KindInfo>>> =
        OnceLock::new();
    INTERNED.get_or_init(Default::default)
}

fn intern(
    group: &str,
    version: &str,
    kind: &str,
    crds: &[CrdNames],
) -> Result<StoredKind, KindRefused> {
    let key = (group.to_string(), kind.to_string());
    let mut table = interned()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(info) = table.get(&key) {
        return Ok(StoredKind(info));
    }
    if table.len() >= MAX_DISTINCT_KINDS {
        return Err(KindRefused::TooMany);
    }
    let crd = crds.iter().find(|c| c.group == group && c.kind == kind);
    let info = KindInfo {
        group: leak(group.to_string()),
        kind: leak(kind.to_string()),
        versions: match crd {
            Some(c) if !c.versions.is_empty() => leak_all(c.versions.clone()),
            _ => leak_all(vec![version.to_string()]),
        },
        plural: leak(crd.map_or_else(|| plural_of(kind), |c| c.plural.clone())),
        singular: leak(crd.map_or_else(|| kind.to_lowercase(), |c| c.singular.clone())),
        short_names: leak_all(crd.map(|c| c.short_names.clone()).unwrap_or_default()),
        namespaced: crd.is_none_or(|c| c.namespaced),
        built_in: false,
        guessed: crd.is_none(),
        crd_status: crd.is_some_and(|c| c.status_subresource),
    };
    let info: &'static KindInfo = Box::leak(Box::new(info));
    table.insert(key, info);
    Ok(StoredKind(info))
}

/// The stored kinds served whether or not an object of them exists (`kubectl get
/// configmaps` answers "No resources found", not "the server doesn't have a resource
/// type").
pub fn described() -> impl Iterator<Item = StoredKind> {
    KNOWN.iter().map(StoredKind)
}

/// The stored kind served in `group` under `plural`: one Kubernetes or a common CRD
/// describes, else one manifests have named so far.
pub fn served_as(group: &str, plural: &str) -> Option<StoredKind> {
    let of = |k: &&KindInfo| k.group == group && k.plural == plural;
    KNOWN.iter().find(of).map(StoredKind).or_else(|| {
        let table = interned()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        table.values().copied().find(of).map(StoredKind)
    })
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    versions: &'static [&'static str],
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
) -> KindInfo {
    KindInfo {
        group,
        kind,
        versions,
        plural,
        singular,
        short_names,
        namespaced,
        built_in: true,
        guessed: false,
        crd_status: false,
    }
}

/// A CRD's kind: served as a custom resource (JSON and merge patches only).
const fn crd(info: KindInfo) -> KindInfo {
    KindInfo {
        built_in: false,
        ..info
    }
}

const V1: &[&str] = &["v1"];
const NS: bool = true;
const CLUSTER: bool = false;

/// Kubernetes 1.32's kinds (as `kubectl api-resources` lists them), and the CRDs charts
/// render most beside a Rollout. The kinds canarysim simulates are not here.
static KNOWN: &[KindInfo] = &[
    kind("", "Binding", V1, "bindings", "binding", &[], NS),
    kind(
        "",
        "ComponentStatus",
        V1,
        "componentstatuses",
        "componentstatus",
        &["cs"],
        CLUSTER,
    ),
    kind("", "ConfigMap", V1, "configmaps", "configmap", &["cm"], NS),
    kind("", "Endpoints", V1, "endpoints", "endpoints", &["ep"], NS),
    kind("", "Event", V1, "events", "event", &["ev"], NS),
    kind(
        "",
        "LimitRange",
        V1,
        "limitranges",
        "limitrange",
        &["limits"],
        NS,
    ),
    kind(
        "",
        "Namespace",
        V1,
        "namespaces",
        "namespace",
        &["ns"],
        CLUSTER,
    ),
    kind("", "Node", V1, "nodes", "node", &["no"], CLUSTER),
    kind(
        "",
        "PersistentVolume",
        V1,
        "persistentvolumes",
        "persistentvolume",
        &["pv"],
        CLUSTER,
    ),
    kind(
        "",
        "PersistentVolumeClaim",
        V1,
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        &["pvc"],
        NS,
    ),
    kind(
        "",
        "PodTemplate",
        V1,
        "podtemplates",
        "podtemplate",
        &[],
        NS,
    ),
    kind(
        "",
        "ReplicationController",
        V1,
        "replicationcontrollers",
        "replicationcontroller",
        &["rc"],
        NS,
    ),
    kind(
        "",
        "ResourceQuota",
        V1,
        "resourcequotas",
        "resourcequota",
        &["quota"],
        NS,
    ),
    kind("", "Secret", V1, "secrets", "secret", &[], NS),
    kind(
        "",
        "ServiceAccount",
        V1,
        "serviceaccounts",
        "serviceaccount",
        &["sa"],
        NS,
    ),
    kind(
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        V1,
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        &[],
        CLUSTER,
    ),
    kind(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        V1,
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        &[],
        CLUSTER,
    ),
    kind(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        V1,
        "customresourcedefinitions",
        "customresourcedefinition",
        &["crd", "crds"],
        CLUSTER,
    ),
    kind(
        "apiregistration.k8s.io",
        "APIService",
        V1,
        "apiservices",
        "apiservice",
        &[],
        CLUSTER,
    ),
    kind(
        "apps",
        "ControllerRevision",
        V1,
        "controllerrevisions",
        "controllerrevision",
        &[],
        NS,
    ),
    kind(
        "apps",
        "DaemonSet",
        V1,
        "daemonsets",
        "daemonset",
        &["ds"],
        NS,
    ),
    kind(
        "apps",
        "Deployment",
        V1,
        "deployments",
        "deployment",
        &["deploy"],
        NS,
    ),
    kind(
        "apps",
        "StatefulSet",
        V1,
        "statefulsets",
        "statefulset",
        &["sts"],
        NS,
    ),
    kind(
        "autoscaling",
        "HorizontalPodAutoscaler",
        &["v2", "v1"],
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        &["hpa"],
        NS,
    ),
    kind("batch", "CronJob", V1, "cronjobs", "cronjob", &["cj"], NS),
    kind("batch", "Job", V1, "jobs", "job", &[], NS),
    kind(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        V1,
        "certificatesigningrequests",
        "certificatesigningrequest",
        &["csr"],
        CLUSTER,
    ),
    kind(
        "coordination.k8s.io",
        "Lease",
        V1,
        "leases",
        "lease",
        &[],
        NS,
    ),
    kind(
        "discovery.k8s.io",
        "EndpointSlice",
        V1,
        "endpointslices",
        "endpointslice",
        &[],
        NS,
    ),
    kind("events.k8s.io", "Event", V1, "events", "event", &["ev"], NS),
    kind(
        "networking.k8s.io",
        "Ingress",
        V1,
        "ingresses",
        "ingress",
        &["ing"],
        NS,
    ),
    kind(
        "networking.k8s.io",
        "IngressClass",
        V1,
        "ingressclasses",
        "ingressclass",
        &[],
        CLUSTER,
    ),
    kind(
        "networking.k8s.io",
        "NetworkPolicy",
        V1,
        "networkpolicies",
        "networkpolicy",
        &["netpol"],
        NS,
    ),
    kind(
        "node.k8s.io",
        "RuntimeClass",
        V1,
        "runtimeclasses",
        "runtimeclass",
        &[],
        CLUSTER,
    ),
    kind(
        "policy",
        "PodDisruptionBudget",
        V1,
        "poddisruptionbudgets",
        "poddisruptionbudget",
        &["pdb"],
        NS,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        V1,
        "clusterroles",
        "clusterrole",
        &[],
        CLUSTER,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        V1,
        "clusterrolebindings",
        "clusterrolebinding",
        &[],
        CLUSTER,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "Role",
        V1,
        "roles",
        "role",
        &[],
        NS,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        V1,
        "rolebindings",
        "rolebinding",
        &[],
        NS,
    ),
    kind(
        "scheduling.k8s.io",
        "PriorityClass",
        V1,
        "priorityclasses",
        "priorityclass",
        &["pc"],
        CLUSTER,
    ),
    kind(
        "storage.k8s.io",
        "StorageClass",
        V1,
        "storageclasses",
        "storageclass",
        &["sc"],
        CLUSTER,
    ),
    // Gateway API: Gateways, routes and ReferenceGrants are simulated (model::gateway_api).
    crd(kind(
        "gateway.networking.k8s.io",
        "Gateway",
        &["v1", "v1beta1"],
        "gateways",
        "gateway",
        &["gtw"],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "GatewayClass",
        &["v1", "v1beta1"],
        "gatewayclasses",
        "gatewayclass",
        &["gc"],
        CLUSTER,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "HTTPRoute",
        &["v1", "v1beta1"],
        "httproutes",
        "httproute",
        &[],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "GRPCRoute",
        V1,
        "grpcroutes",
        "grpcroute",
        &[],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "ReferenceGrant",
        &["v1beta1", "v1alpha2"],
        "referencegrants",
        "referencegrant",
        &["refgrant"],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "TCPRoute",
        &["v1alpha2"],
        "tcproutes",
        "tcproute",
        &[],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "TLSRoute",
        &["v1alpha2"],
        "tlsroutes",
        "tlsroute",
        &[],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "UDPRoute",
        &["v1alpha2"],
        "udproutes",
        "udproute",
        &[],
        NS,
    )),
    crd(kind(
        "gateway.networking.k8s.io",
        "BackendTLSPolicy",
        &["v1alpha3"],
        "backendtlspolicies",
        "backendtlspolicy",
        &["btlspolicy"],
        NS,
    )),
    // Istio's other networking kinds.
    crd(kind(
        "networking.istio.io",
        "ServiceEntry",
        &["v1", "v1beta1", "v1alpha3"],
        "serviceentries",
        "serviceentry",
        &["se"],
        NS,
    )),
    crd(kind(
        "networking.istio.io",
        "Sidecar",
        &["v1", "v1beta1", "v1alpha3"],
        "sidecars",
        "sidecar",
        &[],
        NS,
    )),
    crd(kind(
        "networking.istio.io",
        "EnvoyFilter",
        &["v1alpha3"],
        "envoyfilters",
        "envoyfilter",
        &[],
        NS,
    )),
    // Prometheus Operator's, which charts render for their metrics.
    crd(kind(
        "monitoring.coreos.com",
        "ServiceMonitor",
        V1,
        "servicemonitors",
        "servicemonitor",
        &["smon"],
        NS,
    )),
    crd(kind(
        "monitoring.coreos.com",
        "PodMonitor",
        V1,
        "podmonitors",
        "podmonitor",
        &["pmon"],
        NS,
    )),
    crd(kind(
        "monitoring.coreos.com",
        "PrometheusRule",
        V1,
        "prometheusrules",
        "prometheusrule",
        &["promrule"],
        NS,
    )),
    // Flagger's canary, which some repositories hold beside (or instead of) a Rollout.
    crd(kind(
        "flagger.app",
        "Canary",
        &["v1beta1"],
        "canaries",
        "canary",
        &[],
        NS,
    )),
];

#[cfg(test)]
mod tests {

    #[test]
    fn a_kind_no_definition_could_name_is_refused_before_it_is_compared_or_kept() {
        let refused = |api_version: &str, kind: &str| resolve(api_version, kind, &[], &[]);
        let huge = "K".repeat(4 << 20);
        assert_eq!(
            refused("example.com/v1", &huge),
            Err(KindRefused::Malformed)
        );
        assert_eq!(
            refused("example.com/v1", "Widget_2"),
            Err(KindRefused::Malformed)
        );
        assert_eq!(
            refused("ex_ample.com/v1", "Widget"),
            Err(KindRefused::Malformed)
        );
        assert_eq!(
            refused("example.com/V1", "Widget"),
            Err(KindRefused::Malformed)
        );
        // (A group of its own: an interned kind is served for the process's life.)
        assert!(refused("kind-test.example/v1", "Thing").is_ok());
        // The message stays readable, however long the kind.
        let message = KindRefused::Malformed.message("example.com/v1", &huge);
        assert!(message.len() < 400, "{} bytes", message.len());
        assert!(message.contains("DNS-1035 label"), "{message}");
    }

    use super::*;

    const SIMULATED: &[(&str, &str)] = &[("argoproj.io", "Rollout"), ("", "Service")];

    fn resolved(api_version: &str, kind: &str) -> Result<&'static KindInfo, String> {
        resolve(api_version, kind, &[], SIMULATED)
            .map(StoredKind::info)
            .map_err(|e| e.message(api_version, kind))
    }

    #[test]
    fn built_in_kinds_have_their_real_names_and_scope() {
        let cm = resolved("v1", "ConfigMap").unwrap();
        assert_eq!(
            (cm.plural, cm.short_names, cm.namespaced),
            ("configmaps", &["cm"][..], true)
        );
        let hpa = resolved("autoscaling/v1", "HorizontalPodAutoscaler").unwrap();
        assert_eq!(hpa.versions[0], "v2");
        assert!(
            !resolved("rbac.authorization.k8s.io/v1", "ClusterRole")
                .unwrap()
                .namespaced
        );
        // The same kind name in two groups is two kinds.
        let gateway_api = resolved("gateway.networking.k8s.io/v1", "Gateway").unwrap();
        assert_eq!(gateway_api.group, "gateway.networking.k8s.io");
        assert_eq!(
            resolved("networking.k8s.io/v1", "Ingress").unwrap().plural,
            "ingresses"
        );
    }

    #[test]
    fn typos_and_unserved_versions_are_refused_in_kubectls_words() {
        assert_eq!(
            resolved("apps/v1", "Deploymnet").unwrap_err(),
            "no matches for kind \"Deploymnet\" in version \"apps/v1\"; did you mean Deployment?"
        );
        assert!(
            resolved("argoproj.io/v1alpha1", "Rolout")
                .unwrap_err()
                .contains("did you mean Rollout?")
        );
        assert!(
            resolved("v1", "Servce")
                .unwrap_err()
                .contains("did you mean Service?")
        );
        assert_eq!(
            resolved("v1", "Widget").unwrap_err(),
            "no matches for kind \"Widget\" in version \"v1\""
        );
        assert_eq!(
            resolved("autoscaling/v2beta2", "HorizontalPodAutoscaler").unwrap_err(),
            "no matches for kind \"HorizontalPodAutoscaler\" in version \"autoscaling/v2beta2\" \
             (Kubernetes 1.32 serves v2, v1)"
        );
        assert!(resolved("/v1", "Thing").is_err());
    }

    #[test]
    fn an_unknown_kind_is_stored_with_the_names_its_crd_gives_or_would_give() {
        let cert = resolved("cert-manager.io/v1", "Certificate").unwrap();
        assert_eq!(
            (cert.plural, cert.singular, cert.namespaced),
            ("certificates", "certificate", true)
        );
        assert!(!cert.built_in);
        // The same kind again is the same stored kind.
        assert_eq!(
            resolve("cert-manager.io/v1", "Certificate", &[], SIMULATED).unwrap(),
            resolve("cert-manager.io/v1", "Certificate", &[], SIMULATED).unwrap()
        );
        let crd = serde_json::json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Mouse", "plural": "mice", "shortNames": ["m"]},
            "versions": [{"name": "v2", "subresources": {"status": {}}},
                         {"name": "v1", "subresources": {"status": {}}}]}});
        let names = CrdNames::of(&crd).unwrap();
        let mouse = resolve("example.com/v1", "Mouse", &[names], SIMULATED)
            .unwrap()
            .info();
        assert_eq!(
            (mouse.plural, mouse.namespaced, mouse.versions),
            ("mice", false, &["v2", "v1"][..])
        );
        assert!(mouse.status_subresource(), "as the CRD declares it");
        assert!(!mouse.scale_subresource());
        for (kind, plural, written) in [
            ("NetworkPolicy", "networkpolicies", "NetworkPolicies"),
            ("Ingress", "ingresses", "Ingresses"),
            ("Endpoints", "endpoints", "Endpoints"),
            ("ConfigMap", "configmaps", "ConfigMaps"),
        ] {
            let info = resolved(
                if kind == "Ingress" || kind == "NetworkPolicy" {
                    "networking.k8s.io/v1"
                } else {
                    "v1"
                },
                kind,
            )
            .unwrap();
            assert_eq!(
                (info.plural, plural_as_written(info).as_str()),
                (plural, written)
            );
        }
        for (kind, plural) in [
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Box", "boxes"),
            ("Mesh", "meshes"),
            ("Status", "statuses"),
            ("Y", "ys"),
        ] {
            assert_eq!(plural_of(kind), plural, "{kind}");
        }
    }
}
