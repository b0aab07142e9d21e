//! The result file of one load (`canarysim load URL --out FILE`, with `--shard I/N` one part
//! of a load sent from several places): everything its verdict needs, so that `load merge`
//! can judge the shards as the one load of their union. Its JSON Schema is
//! `schemas/load-result.schema.json`.

use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::http::HttpOutcome;
use super::shape::LoadShape;
use super::tally_record::TallyRecord;

/// The `format` every result file names; another is refused.
pub const FORMAT: &str = "canarysim-load-result/1";

/// One load's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "canarysim load result file",
    description = "Written by `canarysim load URL --out FILE` (with `--shard I/N`: one shard of a load sent from several places), read by `canarysim load merge`."
)]
pub struct ResultFile {
    /// Always `canarysim-load-result/1`.
    pub format: String,
    /// The canarysim that sent the load (`load merge` refuses files of different ones).
    pub canarysim_version: String,
    /// The URL loaded (`load merge` refuses files of different URLs).
    pub url: String,
    /// Where the connections went.
    pub address: String,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: String,
    /// Which part of the load this is (none: a whole load).
    pub shard: Option<Shard>,
    /// When the load began and ended, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    pub ended_unix_ms: u64,
    /// How long the load ran, seconds.
    pub elapsed_seconds: f64,
    /// How it was sent.
    pub load: LoadShape,
    /// What it counted.
    pub tally: TallyRecord,
}

/// Shard `index` (0 to `count` − 1) of a load sent from `count` places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `I/N` (`--shard`), I from 0 as Kubernetes numbers an Indexed Job's pods.
    pub fn parse(text: &str) -> Result<Shard, String> {
        // clap names the flag and the value before this.
        let expected = || {
            "expected I/N with 0 ≤ I < N ≤ 10000, e.g. 0/3 (I counts from 0, as JOB_COMPLETION_INDEX)".to_string()
        };
        let (index, count) = text.split_once('/').ok_or_else(expected)?;
        let index: u32 = index.trim().parse().map_err(|_| expected())?;
        let count: u32 = count.trim().parse().map_err(|_| expected())?;
        if count == 0 || count > 10_000 || index >= count {
            return Err(expected());
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` requests: the shards' parts add up to `total` and differ
    /// by one at most.
    pub fn part_of(self, total: u64) -> u64 {
        let count = u64::from(self.count);
        total / count + u64::from(u64::from(self.index) < total % count)
    }
}

impl ResultFile {
    pub fn new(
        url: &str,
        shard: Option<Shard>,
        (started, ended): (SystemTime, SystemTime),
        load: &LoadShape,
        outcome: &HttpOutcome,
    ) -> ResultFile {
        let unix_ms = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        };
        ResultFile {
            format: FORMAT.to_string(),
            canarysim_version: env!("CARGO_PKG_VERSION").to_string(),
            url: url.to_string(),
            address: outcome.address.clone(),
            protocol: outcome.protocol.to_string(),
            shard,
            started_unix_ms: unix_ms(started),
            ended_unix_ms: unix_ms(ended),
            elapsed_seconds: outcome.elapsed.as_secs_f64(),
            load: load.clone(),
            tally: TallyRecord::of(&outcome.tally),
        }
    }

    /// Writes it as JSON.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }

    /// A result file from its text; the error names the line and column, and what was
    /// expected.
    pub fn parse(name: &str, text: &str) -> Result<ResultFile, String> {
        let file: ResultFile = serde_json::from_str(text).map_err(|e| {
            // serde_json's message ends with the place, which comes first here.
            let message = e.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            format!(
                "{name}:{}:{}: {message} (expected a result file of `canarysim load --out`)",
                e.line(),
                e.column()
            )
        })?;
        if file.format != FORMAT {
            return Err(format!(
                "{name}: format {:?}: this canarysim reads {FORMAT:?}",
                file.format
            ));
        }
        file.tally
            .to_tally()
            .map_err(|e| format!("{name}: tally: {e}"))?;
        Ok(file)
    }

    /// JSON Schema of the file (draft 2020-12).
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(ResultFile)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_from_zero_and_their_parts_add_up() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in ["3/3", "1", "a/3", "0/0", "-1/3", "1/20000"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        for total in [0, 1, 2, 20_000, 20_001, 60_002] {
            let parts: Vec<u64> = (0..3)
                .map(|index| Shard { index, count: 3 }.part_of(total))
                .collect();
            assert_eq!(parts.iter().sum::<u64>(), total);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
    }
}
