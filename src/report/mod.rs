//! What a run tells a person or a script: the plan `--dry-run` prints, as one typed report
//! (`plan`) rendered as text (`text`) or JSON; the warnings (`warning`); progress bars and
//! summaries (`progress`); and the lists of odd inputs out that refusals show (`outliers`).

pub(crate) mod plan;
pub(crate) mod text;
pub(crate) mod warning;

pub use plan::PlanReport;
pub use warning::{Warning, Warnings};
