//! What a run tells a person or a script: the plan `--dry-run` prints, as one typed report
//! (`plan`) rendered as text (`text`) or JSON, and a split's (`split_plan`); the warnings (`warning`); progress bars and
//! summaries (`progress`); and the lists of odd inputs out that refusals show (`outliers`).

pub(crate) mod plan;
pub(crate) mod split_plan;
pub(crate) mod text;
pub(crate) mod warning;

pub use plan::{PlanReport, ShareReport};
pub use split_plan::SplitReport;
pub use warning::{Warning, Warnings};

use crate::error::Result;
use plan::PlanForm;

/// Choosing a renderer lives here, above both: `plan` builds the report and knows nothing of
/// its text, `text` renders it.
impl PlanReport {
    /// The report in `form`.
    pub fn render(&self, form: PlanForm) -> String {
        match form {
            PlanForm::Text => text::render(self),
            PlanForm::Json => self.json(),
        }
    }

    /// Prints the report in `form` on standard output: the text through the gate that quotes
    /// what acts on a terminal, the JSON exactly.
    pub fn print(&self, form: PlanForm) -> Result<()> {
        match form {
            PlanForm::Text => crate::messages::print(&self.render(form)),
            PlanForm::Json => crate::messages::print_exact(&self.render(form)),
        }
        .map_err(|e| crate::error::Error::io("write", std::path::Path::new("standard output"), e))
    }
}
