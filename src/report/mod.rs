//! Text for people: the plan `--dry-run` prints (`plan`), progress bars and summaries
//! (`progress`), and the lists of odd inputs out that refusals show (`outliers`).

pub mod outliers;
pub mod plan;
pub mod progress;

pub use plan::*;
