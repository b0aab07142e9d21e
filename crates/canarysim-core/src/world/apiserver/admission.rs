//! Validating admission webhooks the simulated cluster runs, as a real cluster with Istio
//! does: istiod's `validation.istio.io` checks every VirtualService write. Argo relies on it
//! (a write it rejects surfaces as the rollout's `TrafficRoutingError`), so the fake API
//! server must refuse the same writes.

use serde_json::Value;

use crate::model::Kind;

/// The webhook's name, as the API server quotes it in a denial.
pub(crate) const ISTIO_WEBHOOK: &str = "validation.istio.io";

/// istiod's rule set for route weights, which changed in Istio 1.15 (istio/istio#39544).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IstioWeightRules {
    /// Istio 1.15 and later: weights are relative; each must be ≥ 0 and, with more than one
    /// destination, not all 0.
    #[default]
    Relative,
    /// Before 1.15: each weight in 0..100, and with more than one destination they must sum
    /// to exactly 100.
    SumTo100,
}

impl IstioWeightRules {
    /// The rules of Istio `major.minor` (e.g. "1.14", "1.22.3").
    pub(crate) fn for_version(version: &str) -> Result<Self, VersionError> {
        let mut parts = version.trim().trim_start_matches('v').split('.');
        let number = |p: Option<&str>| p.and_then(|p| p.parse::<u32>().ok());
        match (number(parts.next()), number(parts.next())) {
            (Some(major), Some(minor)) => Ok(if (major, minor) < (1, 15) {
                IstioWeightRules::SumTo100
            } else {
                IstioWeightRules::Relative
            }),
            _ => Err(VersionError(version.to_string())),
        }
    }
}

/// An Istio version canarysim cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an Istio version such as \"1.14\" or \"1.22.3\", got {0:?}")]
pub(crate) struct VersionError(pub String);

/// A webhook's refusal: the message is what the webhook said.
pub(crate) struct Denial {
    pub webhook: &'static str,
    pub message: String,
}

/// Runs the webhooks that apply to `kind` on the object about to be stored.
pub(crate) fn admit(kind: Kind, object: &Value, rules: IstioWeightRules) -> Result<(), Denial> {
    match kind {
        Kind::VirtualService => {
            let errors: Vec<String> = virtual_service_errors(&object["spec"], rules)
                .into_iter()
                .map(|(_, e)| e)
                .collect();
            if errors.is_empty() {
                return Ok(());
            }
            Err(Denial {
                webhook: ISTIO_WEBHOOK,
                message: format!("configuration is invalid: {}", join_errors(&errors)),
            })
        }
        _ => Ok(()),
    }
}

/// istiod's route-destination checks (pkg/config/validation, validateHTTPRouteDestinations
/// and validateRouteDestinations), per [`IstioWeightRules`]: each error with the JSON
/// pointer (under `spec`) of the route list it is about, e.g. `/http/0/route`.
pub(crate) fn virtual_service_errors(
    spec: &Value,
    rules: IstioWeightRules,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    for section in ["http", "tls", "tcp"] {
        let Some(routes) = spec[section].as_array() else {
            continue;
        };
        for (i, route) in routes.iter().enumerate() {
            let pointer = format!("/{section}/{i}/route");
            let mut push = |e: String| errors.push((pointer.clone(), e));
            let Some(destinations) = route["route"].as_array() else {
                continue;
            };
            // A weight that is not an integer fails istiod's decoding before validation
            // (`lint` reports it with the settable weights); the rules below are for integers.
            if destinations
                .iter()
                .any(|d| !d["weight"].is_null() && !d["weight"].is_i64())
            {
                continue;
            }
            let mut total: i64 = 0;
            for d in destinations {
                let weight = d["weight"].as_i64().unwrap_or(0);
                match rules {
                    IstioWeightRules::Relative if weight < 0 => {
                        push(format!("weight {weight} < 0"));
                    }
                    IstioWeightRules::SumTo100 if !(0..=100).contains(&weight) => {
                        push(format!("percentage {weight} is not in range 0..100"));
                    }
                    _ => {}
                }
                total += weight;
            }
            let several = destinations.len() > 1;
            match rules {
                IstioWeightRules::Relative if several && total == 0 => {
                    push("total destination weight = 0".to_string());
                }
                IstioWeightRules::SumTo100 if several && total != 100 => {
                    push(format!("total destination weight {total} != 100"));
                }
                _ => {}
            }
        }
    }
    errors
}

/// Istio's multierror wording: one error alone, several as a counted list.
fn join_errors(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => {
            let items: String = many.iter().map(|e| format!("\n\t* {e}")).collect();
            format!("{} errors occurred:{items}\n\n", many.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vs(http_weights: &[i64]) -> Value {
        let route: Vec<Value> = http_weights
            .iter()
            .enumerate()
            .map(|(i, w)| json!({"destination": {"host": format!("svc-{i}")}, "weight": w}))
            .collect();
        json!({"spec": {"hosts": ["h"], "http": [{"name": "primary", "route": route}]}})
    }

    fn denial(v: &Value) -> Option<String> {
        admit(Kind::VirtualService, v, IstioWeightRules::Relative)
            .err()
            .map(|d| d.message)
    }

    fn denial_before_1_15(v: &Value) -> Option<String> {
        admit(Kind::VirtualService, v, IstioWeightRules::SumTo100)
            .err()
            .map(|d| d.message)
    }

    #[test]
    fn relative_weights_are_admitted() {
        assert_eq!(denial(&vs(&[80, 20])), None);
        assert_eq!(denial(&vs(&[3, 1])), None, "weights need not sum to 100");
        assert_eq!(denial(&vs(&[0, 200])), None, "nor stay under 100");
        assert_eq!(denial(&vs(&[0])), None, "one destination may have weight 0");
        assert_eq!(denial(&vs(&[100, 0])), None);
    }

    #[test]
    fn negative_and_all_zero_weights_are_denied_as_istiod_words_it() {
        assert_eq!(
            denial(&vs(&[-100, 200])).as_deref(),
            Some("configuration is invalid: weight -100 < 0")
        );
        assert_eq!(
            denial(&vs(&[0, 0])).as_deref(),
            Some("configuration is invalid: total destination weight = 0")
        );
        let both = denial(&vs(&[-5, 5])).unwrap();
        assert_eq!(
            both,
            "configuration is invalid: 2 errors occurred:\n\t* weight -5 < 0\n\t* total destination weight = 0\n\n"
        );
    }

    #[test]
    fn before_istio_1_15_weights_must_sum_to_100() {
        assert_eq!(denial_before_1_15(&vs(&[80, 20])), None);
        assert_eq!(denial_before_1_15(&vs(&[0])), None);
        assert_eq!(
            denial_before_1_15(&vs(&[3, 1])).as_deref(),
            Some("configuration is invalid: total destination weight 4 != 100")
        );
        assert_eq!(
            denial_before_1_15(&vs(&[0, 200])).as_deref(),
            Some(
                "configuration is invalid: 2 errors occurred:\n\t* percentage 200 is not in range 0..100\n\t* total destination weight 200 != 100\n\n"
            )
        );
    }

    #[test]
    fn versions_choose_the_rules() {
        let rules = |v| IstioWeightRules::for_version(v);
        assert_eq!(rules("1.14"), Ok(IstioWeightRules::SumTo100));
        assert_eq!(rules("1.14.6"), Ok(IstioWeightRules::SumTo100));
        assert_eq!(rules("1.15"), Ok(IstioWeightRules::Relative));
        assert_eq!(rules("v1.22.3"), Ok(IstioWeightRules::Relative));
        assert!(
            rules("latest")
                .unwrap_err()
                .to_string()
                .contains("\"latest\"")
        );
    }

    #[test]
    fn tcp_and_tls_routes_are_checked_too_and_other_kinds_pass() {
        let tcp = json!({"spec": {"tcp": [{"route": [
            {"destination": {"host": "a"}, "weight": -1},
            {"destination": {"host": "b"}, "weight": 101}]}]}});
        assert_eq!(
            denial(&tcp).as_deref(),
            Some("configuration is invalid: weight -1 < 0")
        );
        assert!(admit(Kind::Service, &tcp, IstioWeightRules::Relative).is_ok());
    }
}
