# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_tjoin_global_optspecs
    string join \n files-from= 0/null input-format= a/axis= stack cast= o/output= format= name= n/no-clobber part-size= append recover= metadata= compress json-form= spec= expect-shape= like= config= strict allow-unmatched any-order uneven dry-run= print-plan= rules= axis-for= keep= exclude= only= join-identical max-shard-size= prefix= names-from= backend= dml-adapter= workers= begin worker= commit abandon progress= q/quiet h/help V/version
end

function __fish_tjoin_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_tjoin_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_tjoin_using_subcommand
    set -l cmd (__fish_tjoin_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c tjoin -n "__fish_tjoin_needs_command" -l files-from -d 'Also join the paths listed in FILE (`-`: standard input), one per line (CRLF line ends too), after any INPUT' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l input-format -d 'Read every input in this format instead of guessing from its content and name' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''
pt\t''
gguf\t''"
complete -c tjoin -n "__fish_tjoin_needs_command" -s a -l axis -d 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l cast -d 'Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64. A distributed checkpoint\'s floating-point tensors only; in a file of several tensors, optimizer step counters (`*.step`, one element) stay exact' -r -f -a "bool\t''
int8\t''
int16\t''
int32\t''
int64\t''
uint8\t''
uint16\t''
uint32\t''
uint64\t''
float16\t''
bfloat16\t''
float32\t''
float64\t''"
complete -c tjoin -n "__fish_tjoin_needs_command" -s o -l output -d 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so one input may be rewritten in place (the output of a join of several is never one of them: --append grows a file), and a device or FIFO is written to where it is. A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint\'s prefix, uploaded as it is written and in place only once complete' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l format -d 'The output\'s format (npy, json, npz, safetensors): required with `-o -`; overrides the extension' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''"
complete -c tjoin -n "__fish_tjoin_needs_command" -l name -d 'Name the joined tensor of single-tensor inputs (default: theirs, else arr_0, in every output format)' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l part-size -d 'The size of each part of an output in object storage (-o s3://...): 5MiB to 5GiB, e.g. 64MiB (default: 8 MiB, or the least that fits the object in 10,000 parts)' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l recover -d 'Cut a .npy file that an interrupted --append left longer than its header says back to its header\'s shape, and say what was removed' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l metadata -d 'Add or replace an entry of a .safetensors output\'s __metadata__; repeatable' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l json-form -d 'The shape of a JSON output: nested arrays, or an object with dtype, shape and data' -r -f -a "nested\t'`[[1, 2], [3, 4]]`: the data as nested arrays'
object\t'`{"dtype": "int64", "shape": [2, 2], "data": [[1, 2], [3, 4]]}`'"
complete -c tjoin -n "__fish_tjoin_needs_command" -l spec -d 'Check against a runtime\'s join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL]' -r -f -a "onnx\t''
directml\t''
onnx-13\t''
onnx-11\t''
onnx-4\t''
onnx-1\t''
openvino\t''
directml:4.1\t''
directml:3.0\t''
directml:2.1\t''
directml:1.0\t''"
complete -c tjoin -n "__fish_tjoin_needs_command" -l expect-shape -d 'Refuse the join unless the output\'s shape is exactly DIMS: 1,1,2,7 or [1, 1, 2, 7]' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l like -d 'Refuse output tensors whose shape differs from their namesakes\' in REF\'s header' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l config -d 'The model\'s config.json, whose sizes a merge\'s tensors must have (default: a config.json beside the first input)' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l dry-run -d 'Check everything and print the plan on stdout (=json: as one JSON object); write nothing' -r -f -a "text\t'A table for people'
json\t'One JSON object for scripts; a refusal is printed as one too'"
complete -c tjoin -n "__fish_tjoin_needs_command" -l print-plan -d 'After writing, print on stdout the plan that was carried out, as --dry-run prints it' -r -f -a "text\t'A table for people'
json\t'One JSON object for scripts; a refusal is printed as one too'"
complete -c tjoin -n "__fish_tjoin_needs_command" -l rules -d 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line; after the flags\'' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l axis-for -d 'Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l keep -d 'Copy tensors matching GLOB from the first input, once checked identical in all' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l exclude -d 'Leave out the tensors of multi-tensor inputs whose names match GLOB; repeatable' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l only -d 'Take only the tensors of multi-tensor inputs whose names match a GLOB; repeatable' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l max-shard-size -d 'The most tensor bytes per shard of a sharded output (-o DIR/): 5GB (the default), 500MB, 2GiB' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l prefix -d 'Name a sharded output\'s files PREFIX-00001-of-0000N.safetensors and PREFIX.safetensors.index.json (default: the input index\'s prefix, else model)' -r -f
complete -c tjoin -n "__fish_tjoin_needs_command" -l names-from -d 'Put each tensor of a sharded output (-o DIR/) in the file this index\'s weight_map names for it (a model.safetensors.index.json), as PyTorch\'s fqn_to_index_mapping does, instead of splitting by --max-shard-size' -r -F
complete -c tjoin -n "__fish_tjoin_needs_command" -l backend -d 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can' -r -f -a "cpu\t'The CPU copy engine'
directml\t'DirectML (Windows, built with the `directml` feature); fails when it cannot run'
auto\t'DirectML when a device is available and runs every tensor, else the CPU engine'"
complete -c tjoin -n "__fish_tjoin_needs_command" -l dml-adapter -d 'DirectML\'s adapter: default (first hardware GPU), warp (software), or an index' -r -f -a "default\t''
warp\t''
0\t''
1\t''"
complete -c tjoin -n "__fish_tjoin_needs_command" -l workers -d 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)' -r
complete -c tjoin -n "__fish_tjoin_needs_command" -l worker -d 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again' -r
complete -c tjoin -n "__fish_tjoin_needs_command" -l progress -d 'When to show a progress bar on stderr' -r -f -a "auto\t'For jobs of 512 MiB or more, when stderr is a terminal'
always\t'Always, even when stderr is a file or a pipe'
never\t'Never'"
complete -c tjoin -n "__fish_tjoin_needs_command" -s 0 -l null -d 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)'
complete -c tjoin -n "__fish_tjoin_needs_command" -l stack -d 'Join along a new axis inserted at --axis, as numpy.stack (identical shapes)'
complete -c tjoin -n "__fish_tjoin_needs_command" -s n -l no-clobber -d 'Refuse to replace an existing output (by default it is replaced atomically)'
complete -c tjoin -n "__fish_tjoin_needs_command" -l append -d 'Grow the first input in place by the others, along its growth axis (0 for a C-order .npy, the last for a Fortran-order one), in time proportional to what is added'
complete -c tjoin -n "__fish_tjoin_needs_command" -l compress -d 'Deflate the members of an .npz output, as numpy.savez_compressed does'
complete -c tjoin -n "__fish_tjoin_needs_command" -l strict -d 'Refuse a rule (--axis-for, --keep, --rules line) that matches no tensor; else a warning'
complete -c tjoin -n "__fish_tjoin_needs_command" -l allow-unmatched -d 'Warn about a --rules line that matches no tensor rather than refuse the join'
complete -c tjoin -n "__fish_tjoin_needs_command" -l any-order -d 'Take inputs whose names number them (tp3, rank_03, -00002-of-00004) in the order given'
complete -c tjoin -n "__fish_tjoin_needs_command" -l uneven -d 'Join a merge\'s tensors whose sizes along the axis no split gives'
complete -c tjoin -n "__fish_tjoin_needs_command" -l join-identical -d 'Join tensors no rule decides even when every input holds them identical (else refused)'
complete -c tjoin -n "__fish_tjoin_needs_command" -l begin -d 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)'
complete -c tjoin -n "__fish_tjoin_needs_command" -l commit -d 'Commit a job of --workers N: check that all finished and nothing changed, then publish'
complete -c tjoin -n "__fish_tjoin_needs_command" -l abandon -d 'Abandon a job of --workers N: remove its files, abort its upload; the output stays'
complete -c tjoin -n "__fish_tjoin_needs_command" -s q -l quiet -d 'Print nothing but errors (no progress bar)'
complete -c tjoin -n "__fish_tjoin_needs_command" -s h -l help -d 'Print help (the man page has more)'
complete -c tjoin -n "__fish_tjoin_needs_command" -s V -l version -d 'Print version'
complete -c tjoin -n "__fish_tjoin_needs_command" -a "split" -d 'Split one input into several outputs along an axis: the inverse of a join'
complete -c tjoin -n "__fish_tjoin_needs_command" -a "rules" -d 'Print a model family\'s built-in rules file, or list the families'
complete -c tjoin -n "__fish_tjoin_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -s a -l axis -d 'The axis to cut every tensor along (negative ones count from the back); with --ranks, that of the tensors no rule decides' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l parts -d 'Cut into N parts as numpy.array_split does (the first len % N parts one longer)' -r
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l sizes -d 'Cut into parts of these sizes along the axis (they must add up to its length): 900,100' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l ranks -d 'Cut into N tensor-parallel ranks by the tensor rules (--rules, --axis-for, --keep)' -r
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -s o -l output -d 'The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`: {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order. URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none' -r -F
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l max-shard-size -d 'The most tensor bytes per shard of an output that names a folder (`tp{rank}/`): a sharded checkpoint, as a join writes one (5GB by default; 500MB, 2GiB). For a GGUF input, the most tensor bytes per file of the set it is split into' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l max-tensors -d 'Split a GGUF file into a set of files of at most N tensors each, named as gguf-split names them (-o out/ gives out/MODEL-00001-of-0000K.gguf)' -r
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l format -d 'The outputs\' format (npy, json, npz, safetensors); overrides their extensions' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l input-format -d 'Read the input in this format instead of guessing from its content and name' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''
pt\t''
gguf\t''"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l part-size -d 'The size of each part of outputs in object storage (-o s3://...): 5MiB to 5GiB, as for a join (default: 8 MiB, or the least that fits an object in 10,000 parts; a job\'s --begin cuts by it and records it, its default 5 MiB or the least that fits)' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l json-form -d 'The shape of JSON outputs: nested arrays, or an object with dtype, shape and data' -r -f -a "nested\t'`[[1, 2], [3, 4]]`: the data as nested arrays'
object\t'`{"dtype": "int64", "shape": [2, 2], "data": [[1, 2], [3, 4]]}`'"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l metadata -d 'Add or replace an entry of the .safetensors outputs\' __metadata__ (the input\'s is carried over); repeatable' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l rules -d 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line, as a join reads them (see tjoin --help): the same file splits and joins back' -r -F
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l axis-for -d 'Cut tensors whose names match GLOB along AXIS (and WORDS: chunks N, replicas K)' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l keep -d 'Copy tensors matching GLOB whole into every output' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l heads -d 'The model\'s attention heads and key-value heads (Q:KV, or Q when they are equal), instead of those of the config.json beside the input: with --ranks, every rank must get whole heads' -r -f
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l spec -d 'Check every tensor\'s cut against DirectML\'s Split (DML_SPLIT_OPERATOR_DESC) at a feature level: directml (4.1), directml:LEVEL' -r -f -a "onnx\t''
directml\t''
onnx-13\t''
onnx-11\t''
onnx-4\t''
onnx-1\t''
openvino\t''
directml:4.1\t''
directml:3.0\t''
directml:2.1\t''
directml:1.0\t''"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l dry-run -d 'Check everything and print every output, its tensors and slices (=json: as one JSON object); write nothing' -r -f -a "text\t'A table for people'
json\t'One JSON object for scripts; a refusal is printed as one too'"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l print-plan -d 'After writing, print on stdout the plan that was carried out, as --dry-run prints it (=json: as one JSON object; a refusal or a failure then as JSON on stdout too)' -r -f -a "text\t'A table for people'
json\t'One JSON object for scripts; a refusal is printed as one too'"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l backend -d 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can' -r -f -a "cpu\t'The CPU copy engine'
directml\t'DirectML (Windows, built with the `directml` feature); fails when it cannot run'
auto\t'DirectML when a device is available and runs every tensor, else the CPU engine'"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l dml-adapter -d 'DirectML\'s adapter: default (first hardware GPU), warp (software), or an index' -r -f -a "default\t''
warp\t''
0\t''
1\t''"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l workers -d 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)' -r
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l worker -d 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again' -r
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l progress -d 'When to show a progress bar on stderr' -r -f -a "auto\t'For jobs of 512 MiB or more, when stderr is a terminal'
always\t'Always, even when stderr is a file or a pipe'
never\t'Never'"
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l exact -d 'With --parts: refuse a length that N does not divide, instead of uneven parts'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -s n -l no-clobber -d 'Refuse to replace an existing output (checked for every output before any is written)'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l compress -d 'Deflate the members of .npz outputs, as numpy.savez_compressed does'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l allow-unmatched -d 'Accept --rules lines that match no tensor of the input (refused by default)'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l begin -d 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l commit -d 'Commit a job of --workers N: check that all finished and nothing changed, then publish'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -l abandon -d 'Abandon a job of --workers N: remove its files, abort its upload; the output stays'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -s q -l quiet -d 'Print nothing but errors (no progress bar)'
complete -c tjoin -n "__fish_tjoin_using_subcommand split" -s h -l help -d 'Print help'
complete -c tjoin -n "__fish_tjoin_using_subcommand help; and not __fish_seen_subcommand_from split rules help" -f -a "split" -d 'Split one input into several outputs along an axis: the inverse of a join'
complete -c tjoin -n "__fish_tjoin_using_subcommand help; and not __fish_seen_subcommand_from split rules help" -f -a "rules" -d 'Print a model family\'s built-in rules file, or list the families'
complete -c tjoin -n "__fish_tjoin_using_subcommand help; and not __fish_seen_subcommand_from split rules help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
