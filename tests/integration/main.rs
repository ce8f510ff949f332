//! The one integration test binary: runs the built `tjoin` on real files, one module per topic.

mod append;
#[cfg(unix)]
mod append_crashes;
mod containers;
mod dcp;
mod directml;
mod docs;
mod early_copy;
#[cfg(unix)]
mod examples;
mod files_in_use;
mod fixtures;
mod flags;
mod generated;
mod hostile;
mod many_rules;
mod merge_safety;
mod messages;
#[cfg(unix)]
mod output_paths;
mod output_safety;
mod pipelines;
mod property;
mod refusals;
mod reliability;
mod sharded;
mod spec;
mod splitmix;
mod usability;
mod util;
