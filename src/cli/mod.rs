//! The command line: `Cli` mirrors the flags as clap parses them (nothing here touches a
//! file); `config` turns them into the join's configuration; `generate` writes the man page
//! and completions from the same definition.

// The flags' doc comments are their --help text, where `onnx[-13|-11]` is notation, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

pub mod config;
pub mod generate;
pub mod gguf;
mod python;
pub mod split;
pub mod workers;

use std::path::PathBuf;

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Parser, ValueHint};

use crate::backend::Backend;
use crate::backend::directml::Adapter;
use crate::config::PlanForm;
use crate::dtype::cast::CAST_TYPES;
use crate::format::Format;
use crate::format::json::JsonForm;
use crate::output::progress::When;
use crate::plan::rules::AxisRule;
use crate::plan::spec::Spec;

/// The model-merge example, as `--help`, the man page and README.md show it (a test keeps
/// README's the same): right for Llama-style tensor-parallel shards, as `rules/llama.rules`
/// splits them (a test runs it on fixtures/merge/llama).
pub const MERGE_EXAMPLE: (&str, &str) = (
    "Merge Llama-style tensor-parallel shards (o_proj, down_proj on axis 1; norms kept once):",
    "tjoin -a 0 --axis-for '*.o_proj.weight=1' --axis-for '*.down_proj.weight=1' \\\n      \
     --keep '*norm*' --like original.safetensors \\\n      \
     tp0.safetensors tp1.safetensors -o model.safetensors",
);

// The headings --help groups the flags under, as cargo and ripgrep do. clap shows them in the
// order of the first field under each, so `Cli`'s fields go in this order too.
const INPUT: &str = "Input";
const JOIN: &str = "Join";
const OUTPUT: &str = "Output";
const CHECKS: &str = "Checks";
const CHECKPOINTS: &str = "Checkpoints";
const ENGINE: &str = "Engine";

/// Examples as (what it does, the command). `--help` shows the first four; the man page
/// shows all. A command may go on over lines ending in `\`.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "Thousands of shards listed by find, joined along axis 0 and converted to float32:",
        "find shards -name '*.npy' | sort | tjoin -a 0 --files-from - --cast float32 -o train.npy",
    ),
    (
        "Merge a sharded Hugging Face checkpoint (its index and every shard) into one file:",
        "tjoin ckpt/model.safetensors.index.json -o model.safetensors",
    ),
    (
        "Consolidate a PyTorch distributed checkpoint (each rank's blocks, placed by offset):",
        "tjoin checkpoint/ -o model.safetensors",
    ),
    MERGE_EXAMPLE,
    (
        "Consolidate a DeepSpeed ZeRO checkpoint (following its latest) as zero_to_fp32.py does:",
        "tjoin zero/ -o model.safetensors",
    ),
    (
        "Re-shard a checkpoint into shards of at most 2 GB, with their index, in merged/:",
        "tjoin model.safetensors -o merged/ --max-shard-size 2GB",
    ),
    (
        "Merge a GGUF split set (named by its first file) into one GGUF file:",
        "tjoin model-00001-of-00003.gguf -o model.gguf",
    ),
    (
        "Merge sharded tensor-parallel ranks (each a folder with an index) into a sharded model:",
        "tjoin -a 0 --axis-for '*.o_proj.weight=1' --keep '*norm*' --like unsplit/ rank0/ rank1/ -o merged/",
    ),
    (
        "Merge shards by a model family's rules file, checked against the original's header:",
        "tjoin --rules rules/llama.rules --like original.safetensors tp*.safetensors -o model.safetensors",
    ),
    (
        "In a pipeline: JSON from standard input joined with a file, written as JSON to stdout:",
        "echo '[[1,2],[3,4]]' | tjoin -a 0 - b.json -o - --format json",
    ),
    (
        "Check that DirectML at feature level 3.0 would accept a join, writing nothing:",
        "tjoin --spec directml:3.0 --dry-run -a 3 a.npy b.npy",
    ),
    (
        "Join two tensors along their last axis ([1,1,2,3] + [1,1,2,4] -> [1,1,2,7]):",
        "tjoin --axis 3 a.npy b.npy -o out.npy",
    ),
    (
        "Merge dataset shards along the first axis, in the order the shell lists them:",
        "tjoin -a 0 part-*.npy -o all.npy",
    ),
    (
        "Merge numpy.savez shards (every array joined with its namesakes):",
        "tjoin -a 0 day1.npz day2.npz day3.npz -o all.npz",
    ),
    (
        "Pick one tensor of a multi-tensor file with FILE:NAME:",
        "tjoin -a 0 model.safetensors:embed.weight extra.npy -o emb.npy",
    ),
    (
        "Stack frames along a new first axis, as numpy.stack:",
        "tjoin --stack -a 0 frame-*.npy -o video.npy",
    ),
    (
        "Grow a dataset file in place by today's shards, in time proportional to what is added:",
        "tjoin --append -a 0 train.npy day-*.npy",
    ),
    (
        "Repair a file an append interrupted by a crash left behind, saying what was removed:",
        "tjoin --recover train.npy",
    ),
    (
        "Convert a file in place (x.npy is replaced only once the output is complete):",
        "tjoin x.npy --cast int64 -o x.npy",
    ),
    (
        "Join through DirectML's Join operator on Windows' software adapter (WARP):",
        "tjoin --backend directml --dml-adapter warp -a 3 a.npy b.npy -o out.npy",
    ),
    (
        "Say which engine --backend auto would use, and why, writing nothing:",
        "tjoin --backend auto --dry-run -a 3 a.npy b.npy",
    ),
];

/// The first four examples, as `--help` ends.
fn help_examples() -> String {
    let mut text = String::from("Examples:");
    for (what, command) in &EXAMPLES[..4] {
        let command = command.replace('\n', "\n    ");
        text.push_str(&format!("\n  {what}\n    {command}\n"));
    }
    text
}

/// Join tensors stored in .npy, .npz, .safetensors, .json, PyTorch .bin/.pt and DCP checkpoint
/// files along one axis, like numpy.concatenate, ONNX Concat or DirectML Join, streaming the data so that files larger than memory join in constant memory (and merge and split GGUF files).
///
/// The output is the file numpy.save(out, numpy.concatenate(inputs, axis)) would write, byte
/// for byte. Every rule is checked on the inputs' headers before anything is written, and a
/// refusal names each offending file, the dimension and the sizes, and the axes that would
/// work. The output is written under a temporary name beside the target and renamed into place
/// only when complete: a failed run leaves no partial file and an existing target untouched.
///
/// Multi-tensor files (.safetensors, .npz): when every input and the output hold named tensors,
/// each tensor is joined with its namesakes in the other inputs, which must all hold the same
/// names. A .safetensors output lists its tensors as the safetensors library writes them: by
/// element type, widest alignment first (U64, I64, F64, C64, F32, U32, I32, BF16, F16, U16,
/// I16, F8_*, I8, U8, F6_*, F4, BOOL), then by name; its __metadata__ is the first input's, with
/// --metadata entries added (keys sorted). An .npz output lists its tensors in the first input's
/// order.
///
/// Sharded checkpoints (Hugging Face's *.safetensors.index.json sets, diffusers' names and fp16
/// variants too, and PyTorch's pytorch_model.bin.index.json sets of .bin shards): an index, or
/// a folder holding exactly one (or exactly one .safetensors file; a safetensors checkpoint
/// before a PyTorch set beside it; without either, its one .bin, .pt or .pth file, or of
/// several its pytorch_model.bin), is one input, whose tensors are read from the shards its weight_map names, shard by shard in
/// the order of their numbers, each in the order of its data; the index and the shards are
/// checked to agree. With one input --axis may be left out: each tensor is copied, so `tjoin
/// ckpt/ -o model.safetensors` merges a checkpoint into one file. An output that names a folder
/// (-o merged/, or an existing folder) or an index (-o merged/model.safetensors.index.json)
/// writes a sharded checkpoint: the tensors in the first input's order, split as
/// huggingface_hub's split_state_dict_into_shards_factory splits them into shards of at most
/// --max-shard-size (a tensor larger than that gets a shard of its own), named
/// PREFIX-00001-of-0000N.safetensors (PREFIX: --prefix, else the input index's, else model),
/// each byte-identical to what save_torch_state_dict writes, and the index as transformers
/// writes it; a set of one shard is PREFIX.safetensors with no index. The folder (created if
/// needed) changes only when everything is written: the index is placed last, the previous
/// set's shards that its index listed and the new one does not are removed (only regular
/// files in the folder itself named PREFIX-NNNNN-of-NNNNN.safetensors, as transformers
/// removes them: a listed path, other name, symbolic link or folder stays, and --dry-run
/// says why), and no other file is touched; a symbolic link in the folder named like a file
/// of the new set is refused, as the set's files are written in the folder itself. The
/// tensors must have names: .npy and JSON inputs need --name. A failure at any point, even
/// during the renames, leaves the folder as it was (a folder the run created is removed
/// again; a run ended by a signal may leave it, empty). The
/// __metadata__ written is the input's own (an index's: its first shard's), which for
/// checkpoints the Hub libraries wrote is {"format": "pt"}, so the output is the file
/// save_file(state_dict, out, metadata={"format": "pt"}) writes; tjoin keeps what the files say
/// rather than impose a value (mlx writes "mlx"), and gives shards {"format": "pt"} when the
/// input has none, as save_torch_state_dict does.
///
/// --backend directml runs the join through DirectML's Join operator on a Direct3D 12 device
/// (Windows, in a tjoin built with the directml cargo feature), writing the same bytes as the
/// CPU engine; a job whose element type or rank the device's feature level lacks runs as its
/// bytes in a 4-D UINT32/UINT16/UINT8 form. Where DirectML is unavailable it fails with exit
/// status 1; --backend auto then uses the CPU engine, and --dry-run says which and why. The man
/// page's DIRECTML section says how to check a Windows machine, and what is tested where.
/// GGUF (llama.cpp's .gguf files, versions 2 and 3): a split set named by its first file
/// (MODEL-00001-of-0000N.gguf, the others found beside it) or by all its files, in order, merges
/// into one file with -o FILE.gguf: every key but split.*, every tensor in order, quantized ones
/// as opaque bytes, each file checked first (split.no, split.count, split.tensors.count against
/// the files found; every count and tensor against the file's length). A set written by
/// gguf-py merges into the file it writes unsplit, byte for byte. `tjoin split --max-tensors N`
/// or `--max-shard-size SIZE` splits a GGUF file into such a set. FILE.gguf:NAME reads one F32,
/// F16, BF16, F64 or integer tensor (numpy's shape: ggml's dimensions reversed) into .npy, and a
/// file without quantized tensors reads into .safetensors; quantized tensors are refused there,
/// by name and type.
///
/// In pipelines: `-` as an input reads standard input (its format sniffed from its first bytes,
/// or named with --input-format), `-o -` writes standard output (with --format), --files-from
/// reads the inputs' paths from a file, and --cast converts every input to one element type in
/// the same single pass.
// (The doc comment above is --help's text and the man page's description.) A subcommand is
// recognised only as the first argument (`args_conflicts_with_subcommands`); without one, the
// arguments are a join's (`JoinArgs`). The man page's SUBCOMMANDS section says how to name a
// file called like a subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "tjoin",
    version,
    about,
    after_help = help_examples(),
    disable_help_flag = true,
    max_term_width = 100,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// The join's flags and inputs: tjoin's command when no subcommand is named.
    #[command(flatten)]
    pub join: JoinArgs,

    /// Print help (the man page has more).
    #[arg(short, long, action = clap::ArgAction::HelpShort)]
    pub help: Option<bool>,

    /// Print the man page or a shell's completions (checked in under man/, completions/).
    #[arg(long, hide = true, value_enum, exclusive = true, value_name = "KIND")]
    pub generate: Option<generate::Kind>,

    /// The subcommand named first, if any.
    #[command(subcommand)]
    pub command: Option<Subcommand>,
}

/// tjoin's subcommands, each with its own flags and flow. A subcommand is a variant here, an
/// arm in `Command::from_cli` (`src/cli/config.rs`) that turns it into a `config::Command`,
/// and that command's flow, which `crate::run` dispatches to.
#[derive(Debug, clap::Subcommand)]
pub enum Subcommand {
    /// Split one input into several outputs along an axis: the inverse of a join.
    ///
    /// Every tensor of the input (or the one FILE:NAME names) is cut along its axis: into N parts
    /// as numpy.array_split cuts (--parts N: the first len % N parts one longer; --exact refuses
    /// uneven parts), into parts of the sizes given (--sizes), or into tensor-parallel ranks by a
    /// model family's rules (--ranks N --rules FILE: each tensor along its rule's axis in N equal
    /// pieces, `keep` tensors whole to every rank, `chunks` and `replicas` in reverse). Every
    /// check is made before anything is written, and the outputs are written under temporary
    /// names and put in place together: a failure or an interrupt leaves none of them, a success
    /// all. Each part is the file np.save writes of it (little-endian elements; Fortran order
    /// where the input has it and the part has two axes longer than 1, or the input is cut
    /// along another axis than its last). An output that names a folder (-o 'tp{rank}/') is a
    /// sharded checkpoint, in shards of at most --max-shard-size. Joining the outputs back gives the input:
    /// `tjoin -a AXIS part-*.npy -o x.npy` for parts (when the input is little-endian),
    /// `tjoin --rules FILE tp*/model.safetensors -o model.safetensors` for ranks.
    ///
    /// A GGUF input (.gguf) is cut between tensors instead, into a set of files as llama.cpp's
    /// gguf-split writes them: at most --max-tensors N tensors or --max-shard-size SIZE bytes of
    /// tensor data (each padded to the alignment) a file, a tensor larger than that alone in its
    /// file; the first file holds every key, then split.no, split.count and split.tensors.count,
    /// the others only those three. -o out/ names them out/MODEL-00001-of-0000K.gguf after the
    /// input; -o out/name.gguf names them out/name-00001-of-0000K.gguf. A set of more than 1024
    /// files is written with a warning: llama.cpp opens every file of a set at once.
    Split(Box<split::SplitArgs>),

    /// Print a model family's built-in rules file, or list the families.
    ///
    /// A merge given no axis and no rules (`tjoin $(ls -v tp*/model.safetensors) -o
    /// model.safetensors`) of a family tjoin recognizes, by its tensor names and by the
    /// config.json beside the first input (`model_type`, `architectures`), merges by these
    /// rules. `tjoin rules llama > llama.rules` writes one to edit and give with --rules.
    Rules(RulesArgs),
}

/// The flags of `tjoin rules`.
#[derive(Debug, clap::Args)]
pub struct RulesArgs {
    /// The family whose rules file to print (llama, qwen2, mixtral, phi3, vllm, gpt2,
    /// gpt-neox, bert, bert-mlm, megatron-gpt); without it, the families are listed.
    #[arg(value_name = "FAMILY")]
    pub family: Option<String>,
}

/// The engine's flags, the same for the join and the split.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = Backend::Cpu, help_heading = ENGINE)]
    pub backend: Backend,

    /// DirectML's adapter: default (first hardware GPU), warp (software), or an index.
    #[arg(
        long,
        value_name = "ADAPTER",
        value_parser = Offering::new(Adapter::parse, || vec!["default", "warp", "0", "1"]),
        hide_possible_values = true,
        help_heading = ENGINE,
    )]
    pub dml_adapter: Option<Adapter>,
}

/// The flags and inputs of a join (and of `--append` and `--recover`), as clap parses them.
/// The headings --help groups them under follow their order here.
#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// The tensors to join, in order: .npy, .npz, .safetensors, .json files, PyTorch .bin/.pt
    /// files (read without running their pickles), FILE:NAME, a sharded checkpoint (its
    /// *.safetensors.index.json or pytorch_model.bin.index.json, or its folder), a DCP
    /// checkpoint (the folder of .metadata and .distcp files), a DeepSpeed ZeRO checkpoint (the
    /// folder of `latest`, or a tag's folder), a .gguf file or GGUF split set (its first file),
    /// or `-` for standard input.
    ///
    /// A pipe or device (`<(zcat a.npy.gz)`) is read once into a temporary file, as `-` is.
    #[arg(value_name = "INPUT", value_hint = ValueHint::FilePath)]
    pub inputs: Vec<PathBuf>,

    /// Also join the paths listed in FILE (`-`: standard input), one per line (CRLF line ends
    /// too), after any INPUT.
    ///
    /// The list may be up to 256 MiB long (the man page's LIMITS section).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, help_heading = INPUT)]
    pub files_from: Option<PathBuf>,

    /// The --files-from list separates paths with NUL bytes (as `find -print0` writes them).
    #[arg(short = '0', long, requires = "files_from", help_heading = INPUT)]
    pub null: bool,

    /// Read every input in this format instead of guessing from its content and name.
    #[arg(long, value_name = "FORMAT", value_parser = Offering::any(Format::names), hide_possible_values = true, help_heading = INPUT)]
    pub input_format: Option<String>,

    /// The axis to join along; negative ones count from the back (-1 is the last). Not needed
    /// with one input, whose tensors are copied.
    #[arg(
        short,
        long,
        allow_negative_numbers = true,
        value_name = "AXIS",
        value_hint = ValueHint::Other,
        help_heading = JOIN,
    )]
    pub axis: Option<i64>,

    /// Join along a new axis inserted at --axis, as numpy.stack (identical shapes).
    #[arg(long, help_heading = JOIN)]
    pub stack: bool,

    /// Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16,
    /// bfloat16, float32, float64. A distributed checkpoint's floating-point tensors only; in
    /// a file of several tensors, optimizer step counters (`*.step`, one element) stay exact.
    #[arg(long, value_name = "DTYPE", value_parser = Offering::any(cast_names), hide_possible_values = true, help_heading = JOIN)]
    pub cast: Option<String>,

    /// The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a
    /// folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named
    /// tensors (not for .npy or JSON inputs without --name); a file is replaced only when
    /// complete, so one input may be rewritten in place (the output of a join of several is
    /// never one of them: --append grows a file), and a device or FIFO is written to where it is.
    /// A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint's
    /// prefix, uploaded as it is written and in place only once complete.
    #[arg(
        short,
        long,
        value_name = "OUTPUT",
        value_hint = ValueHint::AnyPath,
        required_unless_present_any = ["dry_run", "append", "recover"],
        help_heading = OUTPUT,
    )]
    pub output: Option<PathBuf>,

    /// The output's format (npy, json, npz, safetensors): required with `-o -`; overrides the
    /// extension.
    #[arg(long, value_name = "FORMAT", value_parser = Offering::any(Format::output_names), hide_possible_values = true, help_heading = OUTPUT)]
    pub format: Option<String>,

    /// Name the joined tensor of single-tensor inputs (default: theirs, else arr_0, in every
    /// output format).
    #[arg(long, value_name = "NAME", value_hint = ValueHint::Other, help_heading = OUTPUT)]
    pub name: Option<String>,

    /// Refuse to replace an existing output (by default it is replaced atomically).
    #[arg(short = 'n', long, help_heading = OUTPUT)]
    pub no_clobber: bool,

    /// The size of each part of an output in object storage (-o s3://...): 5MiB to 5GiB, e.g.
    /// 64MiB (default: 8 MiB, or the least that fits the object in 10,000 parts).
    ///
    /// An object is uploaded as the parts of one multipart upload. A job's --begin cuts the
    /// output by it and records it (its default: 5 MiB or the least that fits), so that every
    /// worker and the commit use that cut. Larger parts mean fewer requests; one process holds
    /// at most 64 MiB of parts in flight, or one part, besides the one filling.
    #[arg(long, value_name = "SIZE", value_parser = parse_part_size, value_hint = ValueHint::Other, help_heading = OUTPUT)]
    pub part_size: Option<u64>,

    /// Grow the first input in place by the others, along its growth axis (0 for a C-order
    /// .npy, the last for a Fortran-order one), in time proportional to what is added.
    #[arg(long, help_heading = OUTPUT)]
    pub append: bool,

    /// Cut a .npy file that an interrupted --append left longer than its header says back to
    /// its header's shape, and say what was removed.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, exclusive = true, help_heading = OUTPUT)]
    pub recover: Option<PathBuf>,

    /// Add or replace an entry of a .safetensors output's __metadata__; repeatable.
    #[arg(
        long,
        value_name = "KEY=VALUE",
        value_parser = parse_key_value,
        value_hint = ValueHint::Other,
        help_heading = OUTPUT,
    )]
    pub metadata: Vec<(String, String)>,

    /// Deflate the members of an .npz output, as numpy.savez_compressed does.
    #[arg(long, help_heading = OUTPUT)]
    pub compress: bool,

    /// The shape of a JSON output: nested arrays, or an object with dtype, shape and data.
    #[arg(long, value_enum, default_value_t = JsonForm::Nested, value_name = "FORM", help_heading = OUTPUT)]
    pub json_form: JsonForm,

    /// Check against a runtime's join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL].
    #[arg(
        long,
        value_name = "PROFILE",
        value_parser = Offering::new(Spec::parse, Spec::names),
        hide_possible_values = true,
        help_heading = CHECKS,
    )]
    pub spec: Option<Spec>,

    /// Refuse the join unless the output's shape is exactly DIMS: 1,1,2,7 or [1, 1, 2, 7].
    #[arg(long, value_name = "DIMS", value_parser = parse_shape, value_hint = ValueHint::Other, help_heading = CHECKS)]
    // Spelled out so that clap's derive takes the whole shape as one value, not many.
    pub expect_shape: Option<std::vec::Vec<u64>>,

    /// Refuse output tensors whose shape differs from their namesakes' in REF's header.
    ///
    /// REF is the model the shards were split from, given as inputs are: a .safetensors file,
    /// a sharded checkpoint's index (*.safetensors.index.json, pytorch_model.bin.index.json)
    /// or the folder holding it, or a PyTorch checkpoint (.pt, .pth, .bin); only headers are
    /// read. As with an input index, the shards it lists must be names in its own folder (no
    /// `..`, no absolute path). Given more than once, the references' tensors are taken
    /// together (parts of one model), and a name two references give different shapes is
    /// refused.
    #[arg(long, value_name = "REF", help_heading = CHECKS)]
    pub like: Vec<PathBuf>,

    /// The model's config.json, whose sizes a merge's tensors must have (default: a
    /// config.json beside the first input).
    ///
    /// A merge of tensor-parallel ranks must be proven complete (a merge missing its last rank
    /// splits evenly too): by this file's head counts and vocabulary size, by --like, by the
    /// rank count `tjoin split --ranks N` records in each rank file, by names numbered 1 to N
    /// of N, or by the family's own shapes. Output tensors whose sizes it contradicts are
    /// refused.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, help_heading = CHECKS)]
    pub config: Option<PathBuf>,

    /// Refuse a rule (--axis-for, --keep, --rules line) that matches no tensor; else a warning.
    ///
    /// A --rules file's lines are refused so without it (a rules file describes a model: a
    /// line that matches nothing is a typo, or the wrong file); see --allow-unmatched.
    #[arg(long, help_heading = CHECKS)]
    pub strict: bool,

    /// Warn about a --rules line that matches no tensor rather than refuse the join.
    ///
    /// For a rules file written for several models, some of whose lines this one lacks (a
    /// model with tied embeddings has no lm_head). --strict overrides it.
    #[arg(long, help_heading = CHECKS)]
    pub allow_unmatched: bool,

    /// Take inputs whose names number them (tp3, rank_03, -00002-of-00004) in the order given.
    ///
    /// Without it, inputs whose paths differ only in one number right after `tp` or `rank`
    /// (with one `_` or `-` between or none, the word not preceded by a letter: tp3, rank_03,
    /// mp_rank_01/model_optim_rng.pt), or right before `-of-N` (model-00002-of-00004), must
    /// be given with the numbers rising by one (no gap, none twice), and with `-of-N` all N:
    /// a shell sorts tp*.safetensors as text, tp10 before tp2; $(ls -v tp*.safetensors)
    /// sorts by number. Give this flag when the numbers mean something else.
    #[arg(long, help_heading = CHECKS)]
    pub any_order: bool,

    /// Join a merge's tensors whose sizes along the axis no split gives.
    ///
    /// In a checkpoint merge (a whole-file join of files of several tensors each, with tensor
    /// rules or --like), the sizes of a tensor's pieces along its join axis must be all
    /// equal, the first ones one larger
    /// (numpy's array_split) or pieces of ceil(total/n) with a smaller last one (torch.chunk);
    /// other sizes (ranks of two tensor-parallel degrees mixed) are refused without this flag.
    #[arg(long, help_heading = CHECKS)]
    pub uneven: bool,

    /// Check everything and print the plan on stdout (=json: as one JSON object); write nothing.
    #[arg(
        long,
        value_enum,
        value_name = "FORM",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "text",
        help_heading = CHECKS,
    )]
    pub dry_run: Option<PlanForm>,

    /// After writing, print on stdout the plan that was carried out, as --dry-run prints it.
    ///
    /// =json: as one JSON object, the one --dry-run=json prints; a refusal or a failure is then
    /// printed on stdout as JSON too, as --dry-run=json prints it (for scripts, and tjoin's
    /// Python module). Not with -o -, whose data stdout carries.
    #[arg(
        long,
        value_enum,
        value_name = "FORM",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "text",
        conflicts_with = "dry_run",
        help_heading = CHECKS,
    )]
    pub print_plan: Option<PlanForm>,

    /// Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line; after the flags'.
    ///
    /// `#` starts a comment. The first rule that matches a tensor decides it: the --keep flags,
    /// then the --axis-for flags, then the files' lines in order. Repeatable. A line that
    /// matches no tensor is refused (see --allow-unmatched), as is a line that is not a rule.
    /// WORDS say how each input holds its piece: `chunks N` or `chunks P:Q:R` (each piece is
    /// parts side by side, joined part-wise: a fused qkv_proj, gate_up_proj, c_attn), `plain`
    /// (a fused tensor whose pieces hold whole heads or groups), `replicas K` (groups of K
    /// consecutive inputs hold the same piece: one is joined, the others checked equal).
    #[arg(long, value_name = "FILE", help_heading = CHECKPOINTS)]
    pub rules: Vec<PathBuf>,

    /// Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins.
    ///
    /// The words of a --rules line may follow the axis: --axis-for '*.gate_up_proj.weight=0
    /// chunks 2', --axis-for '*.c_attn.*=-1 chunks 3', --axis-for '*.k_proj.weight=0 replicas
    /// 2'. A fused tensor (qkv_proj, gate_up_proj, c_attn, query_key_value, linear_qkv, ...)
    /// joined along its fused axis needs `chunks` or `plain`.
    #[arg(long = "axis-for", value_name = "GLOB=AXIS", value_hint = ValueHint::Other, help_heading = CHECKPOINTS)]
    pub axis_for: Vec<AxisRule>,

    /// Copy tensors matching GLOB from the first input, once checked identical in all.
    #[arg(long, value_name = "GLOB", value_hint = ValueHint::Other, help_heading = CHECKPOINTS)]
    pub keep: Vec<String>,

    /// Leave out the tensors of multi-tensor inputs whose names match GLOB; repeatable.
    ///
    /// Applied before any check: `tjoin step-1000/ --exclude 'optimizer.*' -o model.safetensors`
    /// exports the model of a checkpoint that keeps its optimizer's state beside it. A filter
    /// that removes nothing is refused; --dry-run says what each removed.
    #[arg(long, value_name = "GLOB", value_hint = ValueHint::Other, conflicts_with = "append", help_heading = CHECKPOINTS)]
    pub exclude: Vec<String>,

    /// Take only the tensors of multi-tensor inputs whose names match a GLOB; repeatable.
    ///
    /// Applied before any check, with --exclude (a tensor both match is left out). Flags that
    /// remove nothing are refused; --dry-run says what they removed.
    #[arg(long, value_name = "GLOB", value_hint = ValueHint::Other, conflicts_with = "append", help_heading = CHECKPOINTS)]
    pub only: Vec<String>,

    /// Join tensors no rule decides even when every input holds them identical (else refused).
    ///
    /// Such tensors are replicated (each tensor-parallel shard holds a copy, as of its norms),
    /// and joining them makes a wrong model: without this flag they are refused, with the
    /// --keep globs that keep them.
    #[arg(long, help_heading = CHECKPOINTS)]
    pub join_identical: bool,

    /// The most tensor bytes per shard of a sharded output (-o DIR/): 5GB (the default), 500MB,
    /// 2GiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, value_hint = ValueHint::Other, help_heading = CHECKPOINTS)]
    pub max_shard_size: Option<u64>,

    /// Name a sharded output's files PREFIX-00001-of-0000N.safetensors and
    /// PREFIX.safetensors.index.json (default: the input index's prefix, else model).
    #[arg(long, value_name = "PREFIX", value_hint = ValueHint::Other, help_heading = CHECKPOINTS)]
    pub prefix: Option<String>,

    /// Put each tensor of a sharded output (-o DIR/) in the file this index's weight_map names
    /// for it (a model.safetensors.index.json), as PyTorch's fqn_to_index_mapping does,
    /// instead of splitting by --max-shard-size.
    #[arg(long, value_name = "INDEX", value_hint = ValueHint::FilePath, help_heading = CHECKPOINTS)]
    pub names_from: Option<PathBuf>,

    /// The engine that moves the data: `--backend`, `--dml-adapter`.
    #[command(flatten)]
    pub engine: EngineArgs,

    /// A job that N workers share: `--workers`, `--begin`, `--worker`, `--commit`,
    /// `--abandon`.
    #[command(flatten)]
    pub workers: workers::WorkerArgs,

    /// When to show a progress bar on stderr.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = When::Auto, help_heading = ENGINE)]
    pub progress: When,

    /// Print nothing but errors (no progress bar).
    #[arg(short, long, help_heading = ENGINE)]
    pub quiet: bool,
}

impl Cli {
    /// The command line of this process, or exit with clap's usage error. Beyond what the
    /// derive checks: inputs are required unless `--files-from` lists them, `--generate` asks
    /// for a file or `--recover` names one. (Said here rather than as
    /// `required_unless_present_any`, so that the completions, which leave out the hidden
    /// `--generate`, build from the same flags.)
    pub fn from_args() -> Cli {
        let cli = Cli::try_parse().unwrap_or_else(|error| exit_with(error));
        let join = &cli.join;
        let other_command =
            cli.generate.is_some() || join.recover.is_some() || cli.command.is_some();
        if join.inputs.is_empty() && join.files_from.is_none() && !other_command {
            let why = "no input was named: name the files to join, or list them with --files-from";
            exit_with(
                <Cli as clap::CommandFactory>::command()
                    .error(clap::error::ErrorKind::MissingRequiredArgument, why),
            );
        }
        cli
    }

    /// Whether the plan goes to stdout as JSON (`--dry-run=json`, `--print-plan=json`, of
    /// the join or of `tjoin split`): a script reads the refusal from there too.
    pub fn json_on_stdout(&self) -> bool {
        let json = Some(PlanForm::Json);
        match &self.command {
            Some(Subcommand::Split(split)) => split.dry_run == json || split.print_plan == json,
            Some(Subcommand::Rules(_)) => false,
            None => self.join.dry_run == json || self.join.print_plan == json,
        }
    }
}

/// Ends the process with clap's `error` as clap does (its text on stderr, status 2; help and
/// the version on stdout, status 0), and, when the command line asks for the plan as JSON,
/// the error as JSON on stdout too, as a refusal would be: clap refused the arguments before
/// they were parsed, so its words are looked for as they were typed (`require_equals` makes
/// them one word each), up to a `--`.
fn exit_with(error: clap::Error) -> ! {
    let json = std::env::args_os()
        .skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--dry-run=json" || arg == "--print-plan=json");
    if json && error.use_stderr() {
        let json = crate::error::to_json(&usage_error(&error));
        let _ = crate::messages::print_exact(&format!("{json}\n"));
    }
    error.exit()
}

/// clap's refusal of the arguments as tjoin's error: its first line the headline, its `tip:`
/// lines the hint, the lines between (`[possible values: ...]`, the arguments missing) the
/// details; the usage line and the pointer to --help are left out.
fn usage_error(error: &clap::Error) -> crate::error::Error {
    let text = error.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next().unwrap_or_default();
    let headline = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let (mut details, mut tips) = (Vec::new(), Vec::new());
    for line in lines.take_while(|line| !line.starts_with("Usage:")) {
        match line.strip_prefix("tip: ") {
            Some(tip) => tips.push(tip),
            None => details.push(line.to_string()),
        }
    }
    crate::error::Error::Refused(vec![crate::error::Refusal {
        headline,
        details,
        hint: (!tips.is_empty()).then(|| tips.join("\nhint: ")),
    }])
}

/// A value parser that offers a list of values to shell completion while a function of
/// tjoin's decides what it accepts. clap's own `PossibleValuesParser` accepts exactly its
/// list, but `--spec` takes any DirectML level, `--dml-adapter` any index, and `--format` and
/// `--cast` refuse with tjoin's messages (after the configuration stage), not clap's.
#[derive(Clone)]
struct Offering<T: Clone + Send + Sync + 'static> {
    parse: fn(&str) -> Result<T, String>,
    values: fn() -> Vec<&'static str>,
}

impl<T: Clone + Send + Sync + 'static> Offering<T> {
    fn new(parse: fn(&str) -> Result<T, String>, values: fn() -> Vec<&'static str>) -> Self {
        Offering { parse, values }
    }
}

impl Offering<String> {
    /// Takes any text as it is (the configuration stage checks it), offering `values`.
    fn any(values: fn() -> Vec<&'static str>) -> Self {
        Offering::new(|text| Ok(text.to_string()), values)
    }
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Offering<T> {
    type Value = T;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        // clap's own parser for a function, so that its errors read as for any flag.
        self.parse.parse_ref(command, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            (self.values)().into_iter().map(PossibleValue::new),
        ))
    }
}

/// The element types `--cast` converts to.
fn cast_names() -> Vec<&'static str> {
    CAST_TYPES.split(", ").collect()
}

/// A shape as `--expect-shape` takes it: dimensions separated by commas, bare (`1,1,2,7`),
/// as tjoin prints shapes (`[1, 1, 2, 7]`) or as Python does (`(1, 1, 2, 7)`, `(7,)`).
fn parse_shape(text: &str) -> Result<Vec<u64>, String> {
    let trimmed = text.trim();
    let inner = ["[]", "()"]
        .iter()
        .find_map(|pair| {
            let (open, close) = pair.split_at(1);
            trimmed.strip_prefix(open)?.strip_suffix(close)
        })
        .unwrap_or(trimmed);
    let mut dims: Vec<&str> = inner.split(',').map(str::trim).collect();
    // Python's one-element tuple `(7,)`, and `[]`/`()` for a scalar.
    if dims.last() == Some(&"") {
        dims.pop();
    }
    dims.iter()
        .map(|dim| {
            dim.parse().map_err(|_| {
                format!("`{dim}` is not a dimension; expected sizes like 1,1,2,7 or [1, 1, 2, 7]")
            })
        })
        .collect()
}

/// A size as `--max-shard-size` takes it: huggingface_hub's decimal units (`5GB`, `1.5GB`,
/// `500MB`, `100KB`, `1TB`, as its `parse_size_to_int` reads them: case-insensitive, the
/// number times the unit, truncated), the binary ones it lacks (`KiB`, `MiB`, `GiB`, `TiB`),
/// or a plain number of bytes.
fn parse_size(text: &str) -> Result<u64, String> {
    const UNITS: &[(&str, u64)] = &[
        ("KIB", 1 << 10),
        ("MIB", 1 << 20),
        ("GIB", 1 << 30),
        ("TIB", 1 << 40),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("TB", 1_000_000_000_000),
        ("B", 1),
    ];
    let wrong = || {
        format!(
            "`{text}` is not a size; expected a number and a unit, like 5GB, 500MB or 2GiB \
             (KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB of 1024)"
        )
    };
    let trimmed = text.trim();
    let upper = trimmed.to_ascii_uppercase();
    let (number, unit) = UNITS
        .iter()
        .find_map(|&(unit, bytes)| Some((upper.strip_suffix(unit)?, bytes)))
        .unwrap_or((upper.as_str(), 1));
    let number = number.trim();
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(unit).ok_or_else(wrong);
    }
    let value: f64 = number.parse().map_err(|_| wrong())?;
    let bytes = value * unit as f64;
    if !value.is_finite() || value < 0.0 || bytes >= u64::MAX as f64 {
        return Err(wrong());
    }
    Ok(bytes as u64)
}

/// A part size as `--part-size` takes it ([`parse_size`]'s units), within what S3 takes: 5 MiB
/// to 5 GiB.
fn parse_part_size(text: &str) -> Result<u64, String> {
    const LEAST: u64 = 5 << 20;
    const MOST: u64 = 5 << 30;
    let size = parse_size(text)?;
    if (LEAST..=MOST).contains(&size) {
        return Ok(size);
    }
    let (what, give) = match size < LEAST {
        true => ("under the 5 MiB", "5MiB or more"),
        false => ("over the 5 GiB", "5GiB or less"),
    };
    Err(format!(
        "`{text}` is {size} bytes, {what} S3 takes for a part of a multipart upload; give \
         {give} (e.g. 64MiB)"
    ))
}

/// The format a `--format` / `--input-format` value names, if the flag was given (the join's
/// flags and the split's alike).
fn format_flag(name: &Option<String>, flag: &str) -> crate::error::Result<Option<Format>> {
    name.as_deref()
        .map(|name| Format::from_name(name, flag))
        .transpose()
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or("expected KEY=VALUE, e.g. format=pt")?;
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests;
