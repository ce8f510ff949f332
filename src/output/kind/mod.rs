//! The kinds of output a run writes, each through the same four steps:
//!
//! 1. **plan** ([`OutputKind::plan`]): which files, which of the job's tensors go in each and in
//!    what order, and what is checked before anything is written (no-clobber, links, a
//!    previous set in the folder). The result is a [`Planned`] output: the same shape for
//!    every kind, a list of [`PlannedFile`]s;
//! 2. **write** ([`Planned::write`]): every planned file becomes a member of one
//!    [`OutputSet`] (or, for one file written where it is, standard output or a device, an
//!    [`Output`]), and each file's tensors are written into it, framed by the format's
//!    writer; the data itself comes from the caller (the engine), tensor by tensor;
//! 3. **commit** ([`Written::commit`]): all the files or none (`src/output/set.rs`);
//! 4. **describe** ([`Planned::describe`]): what the typed plan report shows of the output.
//!
//! Which kind an output is, the config stage does not decide: it says what was asked
//! ([`Asked`]: the path, a sharded checkpoint's settings) and [`OutputKind::choose`] asks the
//! kinds of [`KINDS`] in turn. A flow (`src/flow/join/mod.rs`) goes through the steps
//! without knowing the kind. The split command's outputs (one per part or rank) are each
//! chosen and planned here by their kind, then opened and committed together
//! (`src/output/several.rs`).
//!
//! A new kind is two files: its own in `src/output/kind/` (`NAME.rs`: its `claim`, which
//! tells an output of its kind from what was asked, and its `plan`, which lists its files),
//! and this one, which declares it, registers its `claim` in [`KINDS`], its variant in
//! [`OutputKind`] and, when its files are not opened as one file or a sharded set is, a
//! variant of the private `How` (`tests/integration/checklists.rs` holds the count). A kind
//! the report shows by more than its path adds a variant of [`Description`] and its
//! rendering in `src/report/`. Writing and committing its files are the steps every kind
//! shares.

mod file;
mod sharded;

use std::path::{Path, PathBuf};

use super::folders::Folders;
use super::shards::{ShardPlan, ShardedOutput};
use super::upload::{self, Uploads};
use super::{Output, OutputSet};
use crate::error::{Error, Result};
use crate::format::index::SetName;
use crate::format::{Format, OutTensor, Sink, Writer};

/// A kind's claim: the kind of the output asked, if the output is of that kind.
type Claim = for<'c> fn(&Asked<'c>) -> Option<OutputKind<'c>>;

/// Every kind of output a path can name, asked in this order whether the output asked is
/// theirs: the first that claims it is its kind. A file, last, claims every path the others
/// leave; with no path there is no output ([`OutputKind::None`]). A new kind registers here.
pub const KINDS: &[Claim] = &[sharded::claim, file::claim];

/// What the config stage asks of an output, from which [`OutputKind::choose`] tells its kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked<'c> {
    /// What `-o` names (`None`: a dry run without it).
    pub path: Option<&'c Path>,
    /// The sharded checkpoint asked for: a folder or an index as a join's `-o`, a folder
    /// (`DIR/`) as a split's output.
    pub sharded: Option<&'c ShardedOutput>,
}

/// The kinds of output a run writes.
#[derive(Debug, Clone, Copy)]
pub enum OutputKind<'c> {
    /// None: a dry run without `-o`.
    None,
    /// One file, or standard output (`-`).
    File(&'c Path),
    /// A sharded checkpoint.
    Sharded {
        /// The folder or the index `-o` names.
        path: &'c Path,
        /// The set to write there.
        set: &'c ShardedOutput,
    },
}

/// What an output kind's plan is told of the job it writes.
pub struct Tensors<'a> {
    /// The job's output tensors, in the job's order, as the writer sees them.
    pub described: &'a [OutTensor],
    /// Whether the tensors have names of their own: an input holds named tensors, or
    /// `--name` names the one tensor.
    pub named: bool,
    /// The set name of the first input, when it is a sharded checkpoint.
    pub set_name: Option<&'a SetName>,
    /// Refuse to replace an existing file.
    pub no_clobber: bool,
    /// The part size of an output in object storage (`--part-size`; `None`: the least that
    /// fits).
    pub part_size: Option<u64>,
}

/// An output planned: its files, each with its tensors, and what the commit changes.
#[derive(Debug)]
pub struct Planned {
    /// What `-o` names, if anything.
    path: Option<PathBuf>,
    /// What the output is shown as in messages and progress: the file, or the set's folder.
    shown_as: PathBuf,
    /// The files, in the order they are written and committed.
    files: Vec<PlannedFile>,
    no_clobber: bool,
    part_size: Option<u64>,
    how: How,
}

/// One file of a planned output.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    /// Where it goes.
    pub target: PathBuf,
    /// Its tensors, as indexes into the job, in the order they are written.
    pub tensors: Vec<usize>,
}

/// What is particular to a kind once its files are planned.
#[derive(Debug)]
enum How {
    /// Nothing is written.
    Nothing,
    /// One file, replaced atomically, or written where it is (standard output, a device).
    File,
    /// A sharded checkpoint: its plan, and its index's text, written last.
    Sharded(Box<ShardPlan>, Option<String>),
}

/// What the plan report shows of an output.
#[derive(Debug, Clone, Copy)]
pub enum Description<'p> {
    /// No output: a dry run without `-o`.
    None,
    /// One file, or standard output.
    File(&'p Path),
    /// A sharded checkpoint, named by `path` (the folder or the index `-o` gives).
    Sharded {
        /// What `-o` names.
        path: &'p Path,
        /// Its files.
        shards: &'p ShardPlan,
    },
}

impl Description<'_> {
    /// The path `-o` gave, if any.
    pub fn path(&self) -> Option<&Path> {
        match *self {
            Description::None => None,
            Description::File(path) | Description::Sharded { path, .. } => Some(path),
        }
    }
}

impl<'c> OutputKind<'c> {
    /// The kind of the output `asked`: the first of [`KINDS`] to claim it, or none without a
    /// path.
    pub fn choose(asked: &Asked<'c>) -> OutputKind<'c> {
        KINDS
            .iter()
            .find_map(|claim| claim(asked))
            .unwrap_or(OutputKind::None)
    }

    /// The path `-o` gave, if any: the output the messages name.
    pub fn path(&self) -> Option<&'c Path> {
        match *self {
            OutputKind::None => None,
            OutputKind::File(path) | OutputKind::Sharded { path, .. } => Some(path),
        }
    }

    /// The format the kind writes whatever its path says, if it has one: a sharded
    /// checkpoint's safetensors.
    pub fn format(&self) -> Option<Format> {
        match self {
            OutputKind::Sharded { .. } => Some(sharded::FORMAT),
            OutputKind::None | OutputKind::File(_) => None,
        }
    }

    /// The folder the output's files go in, when there is one to name: a sharded
    /// checkpoint's own, a file's parent.
    pub fn folder(&self) -> Option<&'c Path> {
        let folder = match *self {
            OutputKind::None => None,
            OutputKind::File(path) => path.parent(),
            OutputKind::Sharded { set, .. } => Some(set.folder.as_path()),
        };
        folder.filter(|folder| !folder.as_os_str().is_empty())
    }

    /// Whether the job lists its tensors in the writer's order: so for one file, where the
    /// report's order is the file's. A sharded output splits the job in its own order first,
    /// then puts each shard in the writer's order.
    pub fn in_writer_order(&self) -> bool {
        !matches!(self, OutputKind::Sharded { .. })
    }

    /// `job` (whose tensors `described` describes, in the same order) in the order the kind
    /// plans from: the writer's for one file ([`OutputKind::in_writer_order`]), else as it
    /// is.
    pub fn job_order<T>(
        &self,
        job: Vec<T>,
        described: &[OutTensor],
        writer: &dyn Writer,
    ) -> Vec<T> {
        if !self.in_writer_order() {
            return job;
        }
        let order = writer.order(described);
        let mut slots: Vec<Option<T>> = job.into_iter().map(Some).collect();
        order
            .into_iter()
            .filter_map(|index| slots.get_mut(index).and_then(Option::take))
            .collect()
    }

    /// Plans the output's files for the job `tensors` describes (in the job's order, which
    /// is the writer's when [`OutputKind::in_writer_order`]), each in the order `writer`
    /// writes its tensors, and checks what can be checked before anything is written.
    pub fn plan(&self, tensors: &Tensors, writer: &dyn Writer) -> Result<Planned> {
        let no_clobber = tensors.no_clobber;
        match *self {
            OutputKind::None => Ok(Planned {
                path: None,
                shown_as: PathBuf::from("the output"),
                files: Vec::new(),
                no_clobber,
                part_size: tensors.part_size,
                how: How::Nothing,
            }),
            OutputKind::File(path) => Ok(file::plan(path, tensors)),
            OutputKind::Sharded { path, set } => sharded::plan(path, set, tensors, writer),
        }
    }
}

impl Planned {
    /// Whether the output has files to write (a dry run without `-o` has none).
    pub fn writes(&self) -> bool {
        !matches!(self.how, How::Nothing)
    }

    /// The files, in the order they are written and committed.
    pub fn files(&self) -> &[PlannedFile] {
        &self.files
    }

    /// What the output is shown as in messages and the progress bar: the file (`-` for
    /// standard output), or the folder of a set.
    pub fn shown_as(&self) -> &Path {
        &self.shown_as
    }

    /// A file left beside the output that a loader may read instead of it: a single-file
    /// checkpoint of the same name beside a new index. It is not the output's to remove, so
    /// it stays; the caller warns.
    pub fn shadowing_file(&self) -> Option<PathBuf> {
        match &self.how {
            How::Sharded(plan, _) => plan.shadowing_file(),
            How::Nothing | How::File => None,
        }
    }

    /// Every file the output writes, in the order they are written: its files, then a
    /// sharded checkpoint's index.
    pub fn targets(&self) -> impl Iterator<Item = PathBuf> + '_ {
        let files = self.files.iter().map(|file| file.target.clone());
        files.chain(self.index_target())
    }

    /// Where a sharded checkpoint's index goes, if the output has one.
    pub fn index_target(&self) -> Option<PathBuf> {
        match &self.how {
            How::Sharded(plan, Some(_)) => plan.index.as_ref().map(|name| plan.folder.join(name)),
            How::Sharded(_, None) | How::Nothing | How::File => None,
        }
    }

    /// The previous set's files that the commit removes (a sharded checkpoint's).
    pub fn removes(&self) -> &[PathBuf] {
        match &self.how {
            How::Sharded(plan, _) => &plan.removes,
            How::Nothing | How::File => &[],
        }
    }

    /// Whether its files are written in a folder of their own, never through a link: a
    /// sharded checkpoint's.
    pub fn in_own_folder(&self) -> bool {
        matches!(self.how, How::Sharded(..))
    }

    /// Whether it is one file and nothing else (no index).
    pub fn is_one_file(&self) -> bool {
        self.files.len() == 1 && self.index().is_none()
    }

    /// What the plan report shows of it.
    pub fn describe(&self) -> Description<'_> {
        match (&self.how, self.path.as_deref()) {
            (How::Sharded(shards, _), Some(path)) => Description::Sharded { path, shards },
            (How::File, Some(path)) => Description::File(path),
            (How::Nothing, _) | (_, None) => Description::None,
        }
    }

    /// Writes every planned file: each file's tensors (`described`, the whole job as the
    /// writer sees it), framed by `writer`, their data written by `data(index, sink)`; then
    /// what the kind adds once the data is written (a sharded checkpoint's index). Nothing is
    /// in place until [`Written::commit`]; dropping the result removes every new file.
    pub fn write(
        &self,
        writer: &mut dyn Writer,
        described: &[OutTensor],
        data: &mut dyn FnMut(usize, &mut dyn Sink) -> Result<()>,
    ) -> Result<Written> {
        let mut written = self.open(described)?;
        let mut sinks: Vec<&mut dyn Sink> = match &mut written {
            Written::One(output) => vec![output as &mut dyn Sink],
            Written::Upload(uploads) => uploads
                .members_mut()
                .iter_mut()
                .map(|member| member as &mut dyn Sink)
                .collect(),
            Written::Set(set, _) => set
                .members_mut()
                .iter_mut()
                .map(|member| member as &mut dyn Sink)
                .collect(),
        };
        self.write_into(
            &mut sinks.iter_mut().map(|s| &mut **s),
            writer,
            described,
            data,
        )?;
        Ok(written)
    }

    /// Writes every planned file into the next of `sinks` (each file's tensors, as
    /// [`Planned::write`] does), then a sharded checkpoint's index into the one after: the
    /// files [`Planned::targets`] lists, in its order.
    pub fn write_into<'s>(
        &self,
        sinks: &mut dyn Iterator<Item = &'s mut dyn Sink>,
        writer: &mut dyn Writer,
        described: &[OutTensor],
        data: &mut dyn FnMut(usize, &mut dyn Sink) -> Result<()>,
    ) -> Result<()> {
        for file in &self.files {
            let sink = sinks.next().expect("a sink for every planned file");
            write_file(&file.tensors, described, writer, sink, data)?;
        }
        // What the kind writes once the data is: a sharded set's index.
        if let Some(text) = self.index() {
            let sink = sinks.next().expect("a sink for the index");
            sink.write_all(text.as_bytes())
                .map_err(|e| Error::io("write the output", sink.name(), e))?;
        }
        Ok(())
    }

    /// The text of a sharded checkpoint's index, if the output has one: what a job's commit
    /// writes (`src/flow/join/workers/`).
    pub fn index_text(&self) -> Option<&str> {
        self.index()
    }

    /// The text of a sharded checkpoint's index, if the output has one.
    fn index(&self) -> Option<&str> {
        match &self.how {
            How::Sharded(_, index) => index.as_deref(),
            How::Nothing | How::File => None,
        }
    }

    /// Creates the output's files, empty, under temporary names: one file (or standard
    /// output), or the members of a set (its shards, then its index) in a folder made for it
    /// if need be; or, for files named by URL, their uploads (`upload.rs`).
    fn open(&self, described: &[OutTensor]) -> Result<Written> {
        if self.writes() && self.targets().all(|target| upload::is_url(&target)) {
            return self.uploads(described).map(Written::Upload);
        }
        match &self.how {
            How::Nothing => Err(Error::refused(
                "there is no output to write",
                "name one with -o, or ask for the plan with --dry-run",
            )),
            How::File => Ok(Written::One(Output::create(
                &self.shown_as,
                self.no_clobber,
            )?)),
            How::Sharded(plan, _) => {
                let folder = plan.prepare_folder()?;
                let set = plan.members(self.no_clobber)?;
                Ok(Written::Set(set, folder))
            }
        }
    }
}

impl Planned {
    /// The uploads of files named by URL, each with the bytes planned for it.
    fn uploads(&self, described: &[OutTensor]) -> Result<Uploads> {
        Uploads::open(
            &self.upload_targets(described),
            self.no_clobber,
            self.part_size,
        )
    }

    /// The size of each part of its files when uploaded (`--part-size`; `None`: the
    /// upload's own).
    pub fn part_size(&self) -> Option<u64> {
        self.part_size
    }

    /// Every file it writes (as [`Planned::targets`] lists them), each with the bytes its
    /// tensors (`described`, the job) take, or its index's: what an upload is sized by.
    pub fn upload_targets(&self, described: &[OutTensor]) -> Vec<(PathBuf, u64)> {
        let bytes = |file: &PlannedFile| file.tensors.iter().map(|&t| described[t].bytes).sum();
        let mut targets: Vec<(PathBuf, u64)> = self
            .files
            .iter()
            .map(|file| (file.target.clone(), bytes(file)))
            .collect();
        if let (Some(target), Some(text)) = (self.index_target(), self.index()) {
            targets.push((target, text.len() as u64));
        }
        targets
    }
}

/// Writes the tensors `order` lists (indexes into `described`, the job) into `sink`, framed by
/// the output format's `writer`, their data by `data`. A job's workers write their shares of
/// a file through it too (`src/flow/join/workers/`).
pub fn write_file(
    order: &[usize],
    described: &[OutTensor],
    writer: &mut dyn Writer,
    sink: &mut dyn Sink,
    data: &mut dyn FnMut(usize, &mut dyn Sink) -> Result<()>,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    let listed: Vec<OutTensor> = order.iter().map(|&t| described[t].clone()).collect();
    writer.start(sink, &listed).map_err(|e| failed(e, sink))?;
    for &index in order {
        let tensor = &described[index];
        writer
            .start_tensor(sink, tensor)
            .map_err(|e| failed(e, sink))?;
        let mut data_sink = writer.data_sink(sink);
        data(index, data_sink.as_mut())?;
        drop(data_sink);
        writer
            .end_tensor(sink, tensor)
            .map_err(|e| failed(e, sink))?;
    }
    writer.finish(sink).map_err(|e| failed(e, sink))
}

/// An output whose files are all written: only its commit remains.
pub enum Written {
    /// One file, or standard output.
    One(Output),
    /// Several files committed together, and the folder made for them, which the commit
    /// keeps.
    Set(OutputSet, Folders),
    /// Files named by URL, uploaded as they were written.
    Upload(Uploads),
}

impl From<Output> for Written {
    /// One file written by other means (the early copy).
    fn from(output: Output) -> Written {
        Written::One(output)
    }
}

impl Written {
    /// Puts every file in place, or none.
    pub fn commit(self) -> Result<()> {
        match self {
            Written::One(output) => output.commit(),
            Written::Upload(uploads) => uploads.commit(),
            Written::Set(set, folder) => {
                set.commit()?;
                folder.keep();
                Ok(())
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::format::{Format, Layout, WriteOptions};

    /// A float32 vector named `name` of `len` elements.
    pub(in crate::output) fn tensor(name: &str, len: u64) -> OutTensor {
        OutTensor {
            name: name.to_string(),
            dtype: DType::from_name("float32").expect("a type"),
            shape: vec![len],
            layout: Layout::C,
            bytes: len * 4,
        }
    }

    fn tensors(described: &[OutTensor], named: bool) -> Tensors<'_> {
        Tensors {
            described,
            named,
            set_name: None,
            no_clobber: false,
            part_size: None,
        }
    }

    /// Writes `planned`, each tensor's data its index as bytes, and commits it.
    fn write_and_commit(planned: &Planned, described: &[OutTensor], writer: &mut dyn Writer) {
        let mut data = |index: usize, sink: &mut dyn Sink| {
            let bytes = vec![index as u8; described[index].bytes as usize];
            sink.write_all(&bytes)
                .map_err(|e| Error::io("write", Path::new("test"), e))
        };
        planned
            .write(writer, described, &mut data)
            .unwrap()
            .commit()
            .unwrap();
    }

    #[test]
    fn the_table_chooses_a_sharded_set_when_one_is_asked_a_file_for_any_other_path() {
        let set = ShardedOutput {
            folder: PathBuf::from("tp0"),
            name: None,
            max_shard_size: 24,
            names_from: None,
        };
        let path = Path::new("tp0/");
        let asked = |path, sharded| OutputKind::choose(&Asked { path, sharded });
        assert!(matches!(
            asked(Some(path), Some(&set)),
            OutputKind::Sharded { .. }
        ));
        assert!(matches!(asked(Some(path), None), OutputKind::File(p) if p == path));
        assert!(matches!(asked(None, Some(&set)), OutputKind::None));
        assert!(matches!(asked(None, None), OutputKind::None));
        // What the split asks of each kind: its format, and the folder its files go in.
        let sharded = asked(Some(path), Some(&set));
        assert_eq!(sharded.format(), Some(Format::SafeTensors));
        assert_eq!(sharded.folder(), Some(Path::new("tp0")));
        let file = asked(Some(Path::new("out/p0.npy")), None);
        assert_eq!(
            (file.format(), file.folder()),
            (None, Some(Path::new("out")))
        );
        let here = asked(Some(Path::new("p0.npy")), None);
        assert_eq!(
            here.folder(),
            None,
            "a file in the working folder makes none"
        );
    }

    #[test]
    fn a_file_plans_one_file_of_every_tensor_in_the_job_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.safetensors");
        let described = [tensor("b", 2), tensor("a", 3)];
        let writer = Format::SafeTensors
            .writer(&WriteOptions::default())
            .unwrap();
        let planned = OutputKind::File(&out)
            .plan(&tensors(&described, true), writer.as_ref())
            .unwrap();
        let files: Vec<_> = planned.files().iter().map(|f| f.tensors.clone()).collect();
        assert_eq!(files, [vec![0, 1]]);
        assert!(matches!(planned.describe(), Description::File(path) if path == out));
        assert!(OutputKind::File(&out).in_writer_order());
    }

    #[test]
    fn a_sharded_folder_plans_its_shards_in_the_writer_order_and_writes_the_index_last() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("merged");
        let set = ShardedOutput {
            folder: folder.clone(),
            name: None,
            // Two tensors of 12 bytes fit in a shard; the third starts the next.
            max_shard_size: 24,
            names_from: None,
        };
        let kind = OutputKind::Sharded {
            path: &folder,
            set: &set,
        };
        assert!(!kind.in_writer_order());
        let described = [tensor("z", 3), tensor("y", 3), tensor("x", 3)];
        let mut writer = Format::SafeTensors
            .writer(&WriteOptions::default())
            .unwrap();
        let planned = kind
            .plan(&tensors(&described, true), writer.as_ref())
            .unwrap();
        // The job's order split into shards, each then sorted as safetensors lists names.
        let files: Vec<_> = planned.files().iter().map(|f| f.tensors.clone()).collect();
        assert_eq!(files, [vec![1, 0], vec![2]]);
        let targets: Vec<_> = planned.files().iter().map(|f| f.target.clone()).collect();
        let shards = [
            folder.join("model-00001-of-00002.safetensors"),
            folder.join("model-00002-of-00002.safetensors"),
        ];
        assert_eq!(targets, shards);
        assert!(matches!(planned.describe(), Description::Sharded { .. }));
        assert!(!folder.exists(), "planning writes nothing");
        write_and_commit(&planned, &described, writer.as_mut());
        for shard in &shards {
            assert!(shard.is_file(), "{}", shard.display());
        }
        let index = std::fs::read_to_string(folder.join("model.safetensors.index.json")).unwrap();
        assert!(
            index.contains("\"x\": \"model-00002-of-00002.safetensors\""),
            "{index}"
        );
    }

    #[test]
    fn a_sharded_folder_refuses_tensors_without_names_and_nothing_plans_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let set = ShardedOutput {
            folder: dir.path().to_path_buf(),
            name: None,
            max_shard_size: 24,
            names_from: None,
        };
        let kind = OutputKind::Sharded {
            path: dir.path(),
            set: &set,
        };
        let described = [tensor("", 3)];
        let writer = Format::SafeTensors
            .writer(&WriteOptions::default())
            .unwrap();
        let error = kind.plan(&tensors(&described, false), writer.as_ref());
        let error = error.unwrap_err().to_string();
        assert!(
            error.contains("the inputs' tensors have no names"),
            "{error}"
        );
        let planned = OutputKind::None
            .plan(&tensors(&described, false), writer.as_ref())
            .unwrap();
        assert!(!planned.writes() && planned.files().is_empty());
        assert!(matches!(planned.describe(), Description::None));
    }
}
