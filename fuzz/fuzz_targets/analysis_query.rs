//! An analysis measurement's inputs: any PromQL query against a small Istio-like series
//! set, and any condition over a vector result.
#![no_main]

use canarysim::analysis::condition::{ResultValue, eval_condition};
use canarysim::analysis::promql::{Labels, Series, SeriesSource, query};
use libfuzzer_sys::fuzz_target;

struct Source;

impl SeriesSource for Source {
    fn series(&self, metric: &str) -> Vec<Series> {
        ["200", "500"]
            .iter()
            .enumerate()
            .map(|(i, code)| {
                let mut labels = Labels::new();
                labels.insert("__name__".into(), metric.into());
                labels.insert("response_code".into(), (*code).into());
                labels.insert("le".into(), if i == 0 { "5".into() } else { "+Inf".into() });
                Series {
                    labels,
                    samples: (0..40)
                        .map(|k| (k * 15_000, (k * (i as i64 + 1)) as f64))
                        .collect(),
                }
            })
            .collect()
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = query(&Source, text, 600_000);
        let _ = eval_condition(&ResultValue::List(vec![0.97, f64::NAN]), text);
    }
});
