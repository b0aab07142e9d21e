//! What the traffic showed and what it means: the statistics that judge an observed split
//! and the run's outcome that reports render. Re-exported at the crate root
//! (`crate::verify`, `crate::outcome`).

pub mod outcome;
pub mod verify;
