//! The one integration test binary: runs the built `tjoin` on real files, one module per topic.
#![allow(clippy::disallowed_macros)] // tests print their own notes; only tjoin goes through its gate

mod append;
#[cfg(unix)]
mod append_crashes;
#[cfg(unix)]
mod append_journal;
#[cfg(unix)]
mod attack;
#[cfg(feature = "remote")]
mod azure;
mod builtin_families;
mod checklists;
mod completeness;
mod config_sizes;
mod containers;
mod dcp;
mod dcp_default;
mod dcp_proof;
mod deepspeed;
mod directml;
mod docs;
mod dtensor;
mod early_copy;
#[cfg(feature = "remote")]
mod emulated_inputs;
#[cfg(feature = "remote")]
mod emulators;
#[cfg(unix)]
mod examples;
mod families;
mod family_flags;
mod files_in_use;
mod fixtures;
mod flags;
mod fused;
mod generated;
mod gguf;
mod hostile;
mod many_rules;
mod merge_checks;
mod merge_safety;
mod messages;
#[cfg(feature = "remote")]
mod moto;
#[cfg(unix)]
mod named_files;
#[cfg(unix)]
mod output_paths;
mod output_safety;
#[cfg(target_os = "linux")]
mod peaks;
mod pipelines;
mod print_plan;
mod property;
mod pytorch;
mod pytorch_set;
mod refusals;
mod reliability;
#[cfg(feature = "remote")]
mod remote;
#[cfg(feature = "remote")]
mod remote_ckpt;
#[cfg(feature = "remote")]
mod remote_inputs;
#[cfg(feature = "remote")]
mod remote_open;
mod rules;
mod sharded;
mod sharded_commit;
mod spec;
mod split;
mod split_directml;
mod split_heads;
#[cfg(feature = "remote")]
mod split_remote;
mod split_spec;
mod splitmix;
mod strided;
mod terminal;
mod training;
mod untried;
mod usability;
mod util;
// Jobs run through shells, xargs and links; tjoin's jobs are for Unix clusters.
#[cfg(unix)]
mod workers;
#[cfg(all(unix, feature = "remote"))]
mod workers_parts;
#[cfg(all(unix, feature = "remote"))]
mod workers_s3;
#[cfg(unix)]
mod workers_split;
#[cfg(all(unix, feature = "remote"))]
mod workers_split_s3;
#[cfg(all(unix, feature = "remote"))]
mod workers_urls;
