//! The one integration test binary: runs the built `tjoin` on real files, one module per topic.

mod containers;
mod directml;
mod early_copy;
mod fixtures;
mod generated;
mod hostile;
mod output_safety;
mod pipelines;
mod property;
mod refusals;
mod reliability;
mod spec;
mod usability;
mod util;
