//! DeepSpeed ZeRO checkpoints as one input: the folder `engine.save_checkpoint(dir, tag)`
//! writes (`dir/latest` names the tag; or the tag's folder itself), consolidated into the
//! tensors DeepSpeed's `zero_to_fp32.py` writes, read in place.
//!
//! The tag's folder holds `mp_rank_00_model_states.pt` (stages 1 and 2) or every rank's
//! `zero_pp_rank_R_mp_rank_00_model_states.pt` (stage 3), and every data-parallel rank's
//! `(bf16_)zero_pp_rank_R_mp_rank_00_optim_states.pt`. Their pickles are read as records
//! (`records.rs`, through the restricted pickle machine); `layout.rs` finds where each
//! tensor's elements lie in the files. The input's tensors are then runs of the ranks' flat
//! fp32 partitions (or whole tensors: buffers, frozen parameters), each placed at its offset
//! in its flattened tensor and viewed in the tensor's shape: the path of a distributed
//! checkpoint's blocks (`src/plan/grid.rs`), which checks that they tile each tensor. The
//! optimizer's moments are never located, and their bytes never read.
//!
//! Refused, naming the files: a rank's file missing, a partition count other than the files
//! found, `bf16_` and plain optimizer files mixed, tensor-parallel (`mp_rank_01`) and MoE
//! (`expp_rank_`) files, pipeline layer files, records that do not add up.

mod layout;
mod records;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::{Format, Layout, TensorInfo, pickle};
use crate::input::objects::{self, Readable};
use crate::input::source::Version;
use crate::input::sources;
use crate::input::{DataFile, Extras, Input, OpenOptions, Tensor, Watched};
use crate::location::Location;
use crate::messages::excerpt;
use crate::sys;
use layout::{Entry, Kind, Origin};
use records::{ModelStates, OptimStates};

/// The file that names the latest tag.
const LATEST: &str = "latest";

/// How messages name the form.
const FORM: &str = "DeepSpeed ZeRO checkpoint";

/// Whether `path` is a folder DeepSpeed saved a checkpoint in: one whose `latest` file names
/// a folder beside it, or a tag's folder holding model-states files.
pub fn is_checkpoint(path: &Path, is_dir: bool) -> bool {
    if !is_dir {
        return false;
    }
    // Asked of its source: a prefix's `latest` is an object.
    let latest = Location::new(path.join(LATEST).as_path());
    if objects::is_object(&latest) {
        return true;
    }
    sources::list(&Location::new(path)).is_ok_and(|entries| {
        entries.iter().any(|e| {
            let name = e.name.to_string_lossy();
            name.ends_with("_model_states.pt") || name.ends_with("_optim_states.pt")
        })
    })
}

/// One file of the tag's folder, as its name classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// `mp_rank_00_model_states.pt`, or stage 3's `zero_pp_rank_R_..._model_states.pt`.
    Model(Option<u64>),
    /// `(bf16_)zero_pp_rank_R_mp_rank_00_optim_states.pt`; whether `bf16_`.
    Optim(u64, bool),
    /// A tensor-parallel rank's file (`mp_rank_01` and beyond).
    TensorParallel,
    /// A mixture-of-experts file (`expp_rank_`).
    Experts,
    /// A pipeline layer's file (`layer_NN-model_states.pt`).
    Pipeline,
    /// A name ending like a checkpoint file's that DeepSpeed does not write.
    Unknown,
}

/// Classifies a file of the tag's folder; `None` for files that are not checkpoint files.
fn classify(name: &str) -> Option<Named> {
    if name.starts_with("layer_") && name.ends_with("model_states.pt") {
        return Some(Named::Pipeline);
    }
    let (stem, optim) = if let Some(stem) = name.strip_suffix("_optim_states.pt") {
        (stem, true)
    } else {
        (name.strip_suffix("_model_states.pt")?, false)
    };
    if stem.contains("expp_rank_") {
        return Some(Named::Experts);
    }
    let (bf16, stem) = match stem.strip_prefix("bf16_") {
        Some(rest) => (true, rest),
        None => (false, stem),
    };
    let number = |text: &str| -> Option<u64> {
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    };
    let (rank, mp) = match stem.strip_prefix("zero_pp_rank_") {
        Some(rest) => {
            let Some((rank, mp)) = rest.split_once("_mp_rank_") else {
                return Some(Named::Unknown);
            };
            let Some(rank) = number(rank) else {
                return Some(Named::Unknown);
            };
            (Some(rank), mp)
        }
        None => match stem.strip_prefix("mp_rank_") {
            Some(mp) => (None, mp),
            None => return Some(Named::Unknown),
        },
    };
    let Some(mp) = number(mp) else {
        return Some(Named::Unknown);
    };
    if mp != 0 {
        return Some(Named::TensorParallel);
    }
    Some(match (optim, rank, bf16) {
        (true, Some(rank), bf16) => Named::Optim(rank, bf16),
        (false, rank, false) => Named::Model(rank),
        _ => Named::Unknown,
    })
}

fn refusal(headline: String, details: Vec<String>, hint: &str) -> Error {
    Error::Refused(vec![Refusal {
        headline,
        details: capped(details, 12),
        hint: Some(hint.to_string()),
    }])
}

/// The limit on `latest`: a tag's name.
const LATEST_LIMIT: sys::Limit = sys::Limit {
    bytes: 4096,
    of: "a DeepSpeed `latest` file",
    advice: "DeepSpeed writes the tag's name there (global_step500): check the file",
};

/// The tag's folder: the one `latest` names, or `folder` itself.
fn tag_folder(name: &InputRef) -> Result<PathBuf> {
    let folder = name.location.as_path().to_path_buf();
    let latest = folder.join(LATEST);
    if !objects::is_object(&Location::new(latest.as_path())) {
        return Ok(folder);
    }
    let latest_ref = InputRef {
        location: latest.as_path().into(),
        ..name.clone()
    };
    let (bytes, _) = objects::read_whole(&latest_ref.location, &LATEST_LIMIT)
        .map_err(|(action, e)| latest_ref.io_error(action, e))?;
    let tag = String::from_utf8_lossy(&bytes).trim().to_string();
    let plain = !tag.is_empty()
        && tag != "."
        && tag != ".."
        && !tag.contains(['/', '\\', '\0'])
        && !tag.chars().any(char::is_control);
    if !plain {
        return Err(refusal(
            format!(
                "{latest_ref} names the tag `{}`, which is not the name of a folder beside it",
                excerpt(&tag)
            ),
            Vec::new(),
            "name the tag's folder itself (tjoin CHECKPOINT/global_step500/ -o model.safetensors)",
        ));
    }
    let tagged = folder.join(&tag);
    // Hugging Face's Trainer saves the model's weights beside DeepSpeed's `latest`: the folder
    // is then two checkpoints, and which one is meant cannot be told.
    let weights: Vec<String> = sources::list(&Location::new(folder.as_path()))
        .map_err(|e| name.io_error("list", e))?
        .into_iter()
        .map(|e| e.name.to_string_lossy().into_owned())
        .filter(|f| {
            [".safetensors", ".bin", ".index.json"]
                .iter()
                .any(|x| f.ends_with(x))
        })
        .collect();
    if !weights.is_empty() {
        let mut weights: Vec<String> = weights.iter().map(|w| excerpt(w).into_owned()).collect();
        weights.sort();
        let tagged_shown = crate::messages::path(&tagged);
        return Err(refusal(
            format!(
                "{name} holds a DeepSpeed checkpoint (`latest` names `{}`) and model weights \
                 beside it, and tjoin cannot tell which one to read:",
                excerpt(&tag)
            ),
            weights,
            &format!(
                "name the one you mean: {tagged_shown} for the ZeRO checkpoint's fp32 \
                 weights, or the weights file (or its index) in {}",
                crate::messages::path(&folder)
            ),
        ));
    }
    if let Some(why) = not_a_folder(&tagged) {
        return Err(refusal(
            format!(
                "{latest_ref} names the tag `{}`, but in {} that is {why}",
                excerpt(&tag),
                crate::messages::path(&folder)
            ),
            Vec::new(),
            "name the tag's folder you mean (tjoin CHECKPOINT/global_step500/ -o ...)",
        ));
    }
    Ok(tagged)
}

/// Why `tagged`, the folder a `latest` file names, is not one to read, if it is not: the tag
/// is data, so the folder must be a folder in this one, not a link that leads elsewhere (in
/// object storage, a prefix with objects under it).
fn not_a_folder(tagged: &Path) -> Option<&'static str> {
    let at = Location::new(tagged);
    if !sources::source_of(&at).is_ok_and(|source| source.is_local()) {
        let head = objects::head(&at);
        let folder = head.is_ok_and(|head| head.kind == crate::input::source::Kind::Folder);
        return (!folder).then_some("no folder of that name");
    }
    match std::fs::symlink_metadata(tagged) {
        Ok(m) if m.is_dir() => None,
        Ok(m) if m.file_type().is_symlink() => {
            Some("a link, which tjoin does not follow from a file's word")
        }
        _ => Some("no folder of that name"),
    }
}

/// The checkpoint's files by kind.
#[derive(Default)]
struct Listing {
    /// Model-states files: `None` for stages 1 and 2's, else a rank's.
    models: Vec<(Option<u64>, PathBuf)>,
    /// Optimizer-states files: rank, whether `bf16_`, path.
    optims: Vec<(u64, bool, PathBuf)>,
    /// Files tjoin does not read, each with why.
    refused: Vec<(String, Named)>,
}

fn list(folder: &Path, name: &InputRef) -> Result<Listing> {
    let entries = sources::list(&Location::new(folder)).map_err(|e| name.io_error("list", e))?;
    let mut listing = Listing::default();
    let mut names: Vec<String> = entries
        .into_iter()
        .map(|entry| entry.name.to_string_lossy().into_owned())
        .collect();
    names.sort();
    for file in names {
        match classify(&file) {
            None => {}
            Some(Named::Model(rank)) => listing.models.push((rank, folder.join(&file))),
            Some(Named::Optim(rank, bf16)) => listing.optims.push((rank, bf16, folder.join(&file))),
            Some(other) => listing.refused.push((file, other)),
        }
    }
    Ok(listing)
}

/// Refuses files of kinds tjoin does not consolidate.
fn check_kinds(listing: &Listing, shown: &str) -> Result<()> {
    let of = |kind: Named| -> Vec<String> {
        let files = listing.refused.iter().filter(|(_, k)| *k == kind);
        files.map(|(f, _)| excerpt(f).into_owned()).collect()
    };
    let cases = [
        (
            Named::TensorParallel,
            "tensor-parallel rank files (mp_rank_01 and beyond), which tjoin does not read yet",
            "consolidate it with DeepSpeed (ds_to_universal.py), or merge the tensor-parallel \
             ranks first",
        ),
        (
            Named::Experts,
            "mixture-of-experts files (expp_rank_), which tjoin does not read",
            "consolidate it with DeepSpeed's ds_to_universal.py, which knows the experts' layout",
        ),
        (
            Named::Pipeline,
            "pipeline-parallel layer files (layer_NN-model_states.pt), which tjoin does not read",
            "consolidate it with DeepSpeed's ds_to_universal.py",
        ),
        (
            Named::Unknown,
            "files named like a checkpoint's that DeepSpeed does not write, so tjoin cannot tell \
             which rank or set they belong to",
            "move the files that are not this checkpoint's out of the folder",
        ),
    ];
    for (kind, what, hint) in cases {
        let files = of(kind);
        if !files.is_empty() {
            return Err(refusal(
                format!("the {FORM} {shown} holds {what}:"),
                files,
                hint,
            ));
        }
    }
    let sets: Vec<bool> = listing.optims.iter().map(|o| o.1).collect();
    if sets.contains(&true) && sets.contains(&false) {
        let files = listing
            .optims
            .iter()
            .map(|(_, _, p)| crate::messages::path(p));
        return Err(refusal(
            format!(
                "the {FORM} {shown} holds both bf16_ and plain optimizer files: two saves in \
                 one folder, and tjoin cannot tell which is this checkpoint's"
            ),
            files.collect(),
            "move the files of the other save out of the folder",
        ));
    }
    if listing.optims.is_empty() {
        return Err(refusal(
            format!("the {FORM} {shown} holds no optimizer-states file (*_optim_states.pt)"),
            Vec::new(),
            "the fp32 weights of a ZeRO checkpoint are in its optimizer files: copy them \
             into the folder",
        ));
    }
    Ok(())
}

/// One opened file: its path, the file (or the object read by range), what it was when
/// read (version, length) and what its pickle records.
struct Opened {
    path: Arc<Path>,
    read: Readable,
    version: Version,
    len: u64,
    saved: pickle::Saved,
}

fn open_file(path: &Path, position: usize) -> Result<Opened> {
    let name = InputRef {
        position,
        location: path.into(),
        tensor: None,
    };
    let (read, head) =
        objects::open_readable(&name.location).map_err(|e| name.io_error("open", e))?;
    let saved = pickle::read_saved(read.reader(), head.len, &name).map_err(|e| match e {
        Error::Malformed { reason, .. } | Error::Unsupported { reason, .. } => {
            damaged(path, position, reason)
        }
        other => other,
    })?;
    Ok(Opened {
        path: Arc::clone(name.location.shared_path()),
        read,
        version: head.version,
        len: head.len,
        saved,
    })
}

/// Opens the checkpoint that the folder `name` names (its top folder, or a tag's folder).
pub fn open(name: InputRef, selected: Option<String>, options: OpenOptions) -> Result<Input> {
    if let Some(selected) = selected {
        return Err(Error::refused(
            format!(
                "{name} is a {FORM}, consolidated whole: tjoin does not pick the tensor `{}` \
                 from it",
                excerpt(&selected)
            ),
            "consolidate it (tjoin CHECKPOINT/ -o model.safetensors), then take the tensor from \
             that file",
        ));
    }
    let folder = tag_folder(&name)?;
    let shown = crate::messages::path(&folder);
    let listing = list(&folder, &name)?;
    check_kinds(&listing, &shown)?;
    let position = name.position;
    let mut optims = Vec::new();
    let mut optim_files = Vec::new();
    for (rank, _, path) in &listing.optims {
        let opened = open_file(path, position)?;
        let states =
            records::optim_states(&opened.saved).map_err(|why| damaged(path, position, why))?;
        optims.push((*rank, states));
        optim_files.push(opened);
    }
    let stage = optims[0].1.stage;
    let world = optims[0].1.partition_count;
    check_ranks(&listing, &optims, stage, world, &shown)?;
    let model_paths: Vec<&PathBuf> = match stage {
        3 => {
            let mut ranked: Vec<&(Option<u64>, PathBuf)> =
                listing.models.iter().filter(|m| m.0.is_some()).collect();
            ranked.sort_by_key(|m| m.0);
            ranked.into_iter().map(|m| &m.1).collect()
        }
        _ => listing
            .models
            .iter()
            .filter(|m| m.0.is_none())
            .map(|m| &m.1)
            .collect(),
    };
    let mut models = Vec::new();
    let mut model_files = Vec::new();
    for path in model_paths {
        let opened = open_file(path, position)?;
        models.push(
            records::model_states(&opened.saved).map_err(|why| damaged(path, position, why))?,
        );
        model_files.push(opened);
    }
    // Optimizer files in rank order (the listing sorts names as text: rank 10 before 2).
    let mut order: Vec<usize> = (0..optims.len()).collect();
    order.sort_by_key(|&i| optims[i].0);
    let optim_files: Vec<Opened> = reorder(optim_files, &order);
    let optims: Vec<OptimStates> = reorder(optims, &order).into_iter().map(|o| o.1).collect();
    let entries = layout::entries(stage, &models, &optims).map_err(|problems| {
        Error::Inconsistent(vec![Refusal {
            headline: format!("the {FORM} {shown} does not add up:"),
            details: capped(problems, 20),
            hint: Some(
                "a file is damaged or from another save: save the checkpoint again".to_string(),
            ),
        }])
    })?;
    let said = Said {
        warnings: frozen_warning(&entries, &model_files),
        left_out: left_out(&models[0], &optims[0]),
        notes: notes(stage, world, &models, &optims, &entries, &optim_files),
    };
    build(name, entries, (model_files, optim_files), options, said)
}

fn reorder<T>(items: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.iter().filter_map(|&i| slots[i].take()).collect()
}

/// A file of the checkpoint that tjoin cannot read as DeepSpeed writes it.
fn damaged(path: &Path, position: usize, why: String) -> Error {
    let file = InputRef {
        position,
        location: path.into(),
        tensor: None,
    };
    Error::Inconsistent(vec![Refusal {
        headline: format!("{file}, a file of a {FORM}, cannot be read: {why}"),
        details: Vec::new(),
        hint: Some(
            "copy the file again from where the checkpoint was saved (it may be cut short or \
             damaged), or save the checkpoint again"
                .to_string(),
        ),
    }])
}

/// Refuses a set of files that is not every rank's of one save.
fn check_ranks(
    listing: &Listing,
    optims: &[(u64, OptimStates)],
    stage: u64,
    world: u64,
    shown: &str,
) -> Result<()> {
    let mut problems = Vec::new();
    for ((rank, states), (_, _, path)) in optims.iter().zip(&listing.optims) {
        let file = crate::messages::path(path);
        if states.stage != stage {
            problems.push(format!(
                "{file} was saved at ZeRO stage {}, rank 0's file at stage {stage}",
                states.stage
            ));
        }
        if states.partition_count != world {
            problems.push(format!(
                "{file} records a partition count of {}, the first file {world}",
                states.partition_count
            ));
        }
        if *rank >= world {
            problems.push(format!(
                "{file} is rank {rank}'s, beyond the partition count of {world}"
            ));
        }
    }
    let have: Vec<u64> = optims.iter().map(|o| o.0).collect();
    let missing = absent(world, |r| have.contains(&r), "optim");
    if !missing.is_empty() || have.len() as u64 != world {
        problems.push(format!(
            "the optimizer files record a partition count of {world}, and the folder holds {} \
             optimizer file{}{}",
            have.len(),
            if have.len() == 1 { "" } else { "s" },
            if missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", missing.join(", "))
            }
        ));
    }
    let models: Vec<Option<u64>> = listing.models.iter().map(|m| m.0).collect();
    if stage == 3 {
        let missing = absent(world, |r| models.contains(&Some(r)), "model");
        if !missing.is_empty() {
            problems.push(format!(
                "stage 3 saves a model-states file per rank; missing: {}",
                missing.join(", ")
            ));
        }
    } else if !models.contains(&None) {
        problems.push(format!(
            "stage {stage} saves mp_rank_00_model_states.pt, which the folder lacks"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(refusal(
        format!("the {FORM} {shown} is not every rank's files of one save:"),
        problems,
        "copy every rank's files of the save into the folder (a rank that did not save, or \
         an old checkpoint written over, leaves a set like this one)",
    ))
}

/// The names of the first ranks' `kind` files (`optim`, `model`) of a world of `world` ranks
/// that are not `present`, and how many more there are: a damaged partition count may say
/// billions.
fn absent(world: u64, present: impl Fn(u64) -> bool, kind: &str) -> Vec<String> {
    const SHOWN: usize = 8;
    let mut missing = (0..world).filter(|&r| !present(r));
    let mut names: Vec<String> = missing
        .by_ref()
        .take(SHOWN)
        .map(|r| format!("zero_pp_rank_{r}_mp_rank_00_{kind}_states.pt"))
        .collect();
    if names.len() == SHOWN && missing.next().is_some() {
        names.push("and more".to_string());
    }
    names
}

/// What the input's reader says: in `--dry-run` (`notes`), in every run (`left_out`, short
/// phrases; `warnings`, whole lines).
struct Said {
    notes: Vec<String>,
    left_out: Vec<String>,
    warnings: Vec<String>,
}

/// What every run says the output leaves out, in short phrases.
fn left_out(model: &ModelStates, optim: &OptimStates) -> Vec<String> {
    let mut left = Vec::new();
    if !optim.left_out.is_empty() {
        left.push("the optimizer's state (its moments, never read)".to_string());
    }
    if !model.left_out.is_empty() {
        let names: Vec<String> = model
            .left_out
            .iter()
            .map(|k| format!("`{}`", excerpt(k)))
            .collect();
        left.push(format!("the model file's {}", capped(names, 4).join(", ")));
    }
    left
}

/// What `--dry-run` says the output leaves out, and how it was read.
fn notes(
    stage: u64,
    world: u64,
    models: &[ModelStates],
    optims: &[OptimStates],
    entries: &[Entry],
    optim_files: &[Opened],
) -> Vec<String> {
    let version = models[0].version.as_deref().unwrap_or("an unknown version");
    let mut notes = vec![format!(
        "a DeepSpeed checkpoint at ZeRO stage {stage} on {world} rank{} (saved by deepspeed \
         {}): the trained parameters are read from the ranks' flat fp32 partitions ({} \
         file{}), as zero_to_fp32.py reads them",
        if world == 1 { "" } else { "s" },
        excerpt(version),
        optim_files.len(),
        if optim_files.len() == 1 { "" } else { "s" }
    )];
    let quoted = |keys: &[String]| -> String {
        capped(
            keys.iter().map(|k| format!("`{}`", excerpt(k))).collect(),
            20,
        )
        .join(", ")
    };
    if !optims[0].left_out.is_empty() {
        notes.push(format!(
            "left out, never read: the optimizer's state, its moments ({} of each rank's \
             optimizer file)",
            quoted(&optims[0].left_out)
        ));
    }
    if !models[0].left_out.is_empty() {
        notes.push(format!(
            "left out (not weights): {} of the model-states file",
            quoted(&models[0].left_out)
        ));
    }
    let tied: Vec<String> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            Kind::Tied(source) => {
                Some(format!("`{}` (of `{}`)", excerpt(&e.name), excerpt(source)))
            }
            _ => None,
        })
        .collect();
    if !tied.is_empty() {
        notes.push(format!(
            "tied names written as copies: {}",
            capped(tied, 10).join(", ")
        ));
    }
    notes
}

/// What the run says of stage 1's frozen parameters, taken from the model file's `module`.
fn frozen_warning(entries: &[Entry], model_files: &[Opened]) -> Vec<String> {
    let frozen: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.kind == Kind::FrozenFromModule)
        .collect();
    if frozen.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = frozen
        .iter()
        .map(|e| format!("`{}`", excerpt(&e.name)))
        .collect();
    let dtypes: Vec<String> = {
        let mut d: Vec<String> = frozen.iter().map(|e| e.dtype.to_string()).collect();
        d.dedup();
        d
    };
    vec![format!(
        "{}: {} frozen parameter{} ({}) {} not in the optimizer files (ZeRO stage 1 does not \
         save them; zero_to_fp32.py leaves them out): taken from the model file's `module`, \
         in {} as it holds them",
        crate::messages::path(&model_files[0].path),
        frozen.len(),
        if frozen.len() == 1 { "" } else { "s" },
        capped(names, 10).join(", "),
        if frozen.len() == 1 { "is" } else { "are" },
        dtypes.join(", ")
    )]
}

/// The tensor of `entry`'s `piece`, read from `file` (`opened`), of the input at `position`.
fn piece_tensor(
    position: usize,
    entry: &Entry,
    piece: &layout::Piece,
    (opened, file): (&Opened, &DataFile),
) -> Tensor {
    let shape: Box<[u64]> = match entry.whole {
        true => entry.shape.clone().into(),
        false => Box::new([piece.numel]),
    };
    Tensor {
        name: InputRef {
            position,
            location: Arc::clone(&opened.path).into(),
            tensor: Some(entry.name.as_str().into()),
        },
        info: TensorInfo {
            dtype: entry.dtype.clone(),
            byte_order: ByteOrder::Little,
            swaps: Swaps::None,
            shape,
            layout: Layout::C,
            data_offset: piece.start,
            data_len: piece.numel * entry.dtype.itemsize(),
        },
        file: file.clone(),
        stored_crc: None,
    }
}

/// The input: each entry's pieces as tensors, placed and viewed.
fn build(
    name: InputRef,
    entries: Vec<Entry>,
    (model_files, optim_files): (Vec<Opened>, Vec<Opened>),
    options: OpenOptions,
    said: Said,
) -> Result<Input> {
    let Said {
        mut notes,
        left_out,
        warnings,
    } = said;
    let keep = options.keeps_open(model_files.len() + optim_files.len());
    let data = |opened: &Opened| -> DataFile {
        let at = Location::from(Arc::clone(&opened.path));
        DataFile::of_readable(&at, &opened.read, (&opened.version, opened.len), keep)
    };
    let model_data: Vec<DataFile> = model_files.iter().map(data).collect();
    let optim_data: Vec<DataFile> = optim_files.iter().map(data).collect();
    let of = |origin: Origin| -> (&Opened, &DataFile) {
        match origin {
            Origin::Model(r) => (&model_files[r], &model_data[r]),
            Origin::Optim(r) => (&optim_files[r], &optim_data[r]),
        }
    };
    let mut tensors = Vec::new();
    let mut offsets = Vec::new();
    let mut recorded = HashMap::new();
    let mut views = HashMap::new();
    for entry in &entries {
        let numel: u64 = entry.shape.iter().product();
        let mut pieces = entry.pieces.clone();
        if pieces.is_empty() {
            // A tensor of no elements: one empty run, so that it is written.
            pieces.push(layout::Piece {
                origin: Origin::Optim(0),
                start: 0,
                numel: 0,
                at: 0,
            });
        }
        for piece in pieces {
            let (opened, file) = of(piece.origin);
            tensors.push(piece_tensor(name.position, entry, &piece, (opened, file)));
            offsets.push(match entry.whole {
                true => vec![0; entry.shape.len()],
                false => vec![piece.at],
            });
        }
        if entry.whole {
            recorded.insert(entry.name.clone(), entry.shape.clone());
        } else {
            recorded.insert(entry.name.clone(), vec![numel]);
            views.insert(entry.name.clone(), entry.shape.clone());
        }
    }
    notes.extend(warnings.iter().cloned());
    let mut watched = model_files
        .iter()
        .chain(&optim_files)
        .zip(model_data.iter().chain(&optim_data))
        .map(|(o, d)| Watched::of(&Location::from(Arc::clone(&o.path)), d, o.version.clone()));
    let first = watched.next().expect("a checkpoint has files");
    Ok(Input {
        name,
        tensors: tensors.into(),
        format: Format::SafeTensors,
        watched: first,
        extras: Extras {
            metadata: Some(vec![("format".to_string(), "pt".to_string())]),
            notes,
            offsets: Some(offsets),
            recorded: Some(recorded),
            more_watched: watched.collect(),
            left_out,
            consolidated: Some(Box::new(super::Consolidated {
                views,
                dtype: DType::Float32,
                warnings,
            })),
            ..Extras::default()
        }
        .boxed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_classified_as_deepspeed_writes_them() {
        assert_eq!(
            classify("mp_rank_00_model_states.pt"),
            Some(Named::Model(None))
        );
        assert_eq!(
            classify("zero_pp_rank_12_mp_rank_00_model_states.pt"),
            Some(Named::Model(Some(12)))
        );
        assert_eq!(
            classify("bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt"),
            Some(Named::Optim(3, true))
        );
        assert_eq!(
            classify("zero_pp_rank_0_mp_rank_01_optim_states.pt"),
            Some(Named::TensorParallel)
        );
        assert_eq!(
            classify("expp_rank_0_mp_rank_00_optim_states.pt"),
            Some(Named::Experts)
        );
        assert_eq!(
            classify("layer_01-model_00-model_states.pt"),
            Some(Named::Pipeline)
        );
        assert_eq!(
            classify("zero_pp_rank_x_mp_rank_00_optim_states.pt"),
            Some(Named::Unknown)
        );
        assert_eq!(classify("mp_rank_0a_model_states.pt"), Some(Named::Unknown));
        assert_eq!(classify("zero_to_fp32.py"), None);
    }
}
