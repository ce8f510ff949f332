
use builtin;
use str;

set edit:completion:arg-completer[tjoin] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'tjoin'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'tjoin'= {
            cand --files-from 'Also join the paths listed in FILE (`-`: standard input), one per line (CRLF line ends too), after any INPUT'
            cand --input-format 'Read every input in this format instead of guessing from its content and name'
            cand -a 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied'
            cand --axis 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied'
            cand --cast 'Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64. A distributed checkpoint''s floating-point tensors only; in a file of several tensors, optimizer step counters (`*.step`, one element) stay exact'
            cand -o 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so one input may be rewritten in place (the output of a join of several is never one of them: --append grows a file), and a device or FIFO is written to where it is. A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint''s prefix, uploaded as it is written and in place only once complete'
            cand --output 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so one input may be rewritten in place (the output of a join of several is never one of them: --append grows a file), and a device or FIFO is written to where it is. A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint''s prefix, uploaded as it is written and in place only once complete'
            cand --format 'The output''s format (npy, json, npz, safetensors): required with `-o -`; overrides the extension'
            cand --name 'Name the joined tensor of single-tensor inputs (default: theirs, else arr_0, in every output format)'
            cand --part-size 'The size of each part of an output in object storage (-o s3://...): 5MiB to 5GiB, e.g. 64MiB (default: 8 MiB, or the least that fits the object in 10,000 parts)'
            cand --recover 'Cut a .npy file that an interrupted --append left longer than its header says back to its header''s shape, and say what was removed'
            cand --metadata 'Add or replace an entry of a .safetensors output''s __metadata__; repeatable'
            cand --json-form 'The shape of a JSON output: nested arrays, or an object with dtype, shape and data'
            cand --spec 'Check against a runtime''s join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL]'
            cand --expect-shape 'Refuse the join unless the output''s shape is exactly DIMS: 1,1,2,7 or [1, 1, 2, 7]'
            cand --like 'Refuse output tensors whose shape differs from their namesakes'' in REF''s header'
            cand --config 'The model''s config.json, whose sizes a merge''s tensors must have (default: a config.json beside the first input)'
            cand --dry-run 'Check everything and print the plan on stdout (=json: as one JSON object); write nothing'
            cand --print-plan 'After writing, print on stdout the plan that was carried out, as --dry-run prints it'
            cand --rules 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line; after the flags'''
            cand --axis-for 'Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins'
            cand --keep 'Copy tensors matching GLOB from the first input, once checked identical in all'
            cand --exclude 'Leave out the tensors of multi-tensor inputs whose names match GLOB; repeatable'
            cand --only 'Take only the tensors of multi-tensor inputs whose names match a GLOB; repeatable'
            cand --max-shard-size 'The most tensor bytes per shard of a sharded output (-o DIR/): 5GB (the default), 500MB, 2GiB'
            cand --prefix 'Name a sharded output''s files PREFIX-00001-of-0000N.safetensors and PREFIX.safetensors.index.json (default: the input index''s prefix, else model)'
            cand --names-from 'Put each tensor of a sharded output (-o DIR/) in the file this index''s weight_map names for it (a model.safetensors.index.json), as PyTorch''s fqn_to_index_mapping does, instead of splitting by --max-shard-size'
            cand --backend 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can'
            cand --dml-adapter 'DirectML''s adapter: default (first hardware GPU), warp (software), or an index'
            cand --workers 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)'
            cand --worker 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again'
            cand --progress 'When to show a progress bar on stderr'
            cand -0 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)'
            cand --null 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)'
            cand --stack 'Join along a new axis inserted at --axis, as numpy.stack (identical shapes)'
            cand -n 'Refuse to replace an existing output (by default it is replaced atomically)'
            cand --no-clobber 'Refuse to replace an existing output (by default it is replaced atomically)'
            cand --append 'Grow the first input in place by the others, along its growth axis (0 for a C-order .npy, the last for a Fortran-order one), in time proportional to what is added'
            cand --compress 'Deflate the members of an .npz output, as numpy.savez_compressed does'
            cand --strict 'Refuse a rule (--axis-for, --keep, --rules line) that matches no tensor; else a warning'
            cand --allow-unmatched 'Warn about a --rules line that matches no tensor rather than refuse the join'
            cand --any-order 'Take inputs whose names number them (tp3, rank_03, -00002-of-00004) in the order given'
            cand --uneven 'Join a merge''s tensors whose sizes along the axis no split gives'
            cand --join-identical 'Join tensors no rule decides even when every input holds them identical (else refused)'
            cand --begin 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)'
            cand --commit 'Commit a job of --workers N: check that all finished and nothing changed, then publish'
            cand --abandon 'Abandon a job of --workers N: remove its files, abort its upload; the output stays'
            cand -q 'Print nothing but errors (no progress bar)'
            cand --quiet 'Print nothing but errors (no progress bar)'
            cand -h 'Print help (the man page has more)'
            cand --help 'Print help (the man page has more)'
            cand -V 'Print version'
            cand --version 'Print version'
            cand split 'Split one input into several outputs along an axis: the inverse of a join'
            cand rules 'Print a model family''s built-in rules file, or list the families'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'tjoin;split'= {
            cand -a 'The axis to cut every tensor along (negative ones count from the back); with --ranks, that of the tensors no rule decides'
            cand --axis 'The axis to cut every tensor along (negative ones count from the back); with --ranks, that of the tensors no rule decides'
            cand --parts 'Cut into N parts as numpy.array_split does (the first len % N parts one longer)'
            cand --sizes 'Cut into parts of these sizes along the axis (they must add up to its length): 900,100'
            cand --ranks 'Cut into N tensor-parallel ranks by the tensor rules (--rules, --axis-for, --keep)'
            cand -o 'The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`: {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order. URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none'
            cand --output 'The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`: {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order. URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none'
            cand --max-shard-size 'The most tensor bytes per shard of an output that names a folder (`tp{rank}/`): a sharded checkpoint, as a join writes one (5GB by default; 500MB, 2GiB). For a GGUF input, the most tensor bytes per file of the set it is split into'
            cand --max-tensors 'Split a GGUF file into a set of files of at most N tensors each, named as gguf-split names them (-o out/ gives out/MODEL-00001-of-0000K.gguf)'
            cand --format 'The outputs'' format (npy, json, npz, safetensors); overrides their extensions'
            cand --input-format 'Read the input in this format instead of guessing from its content and name'
            cand --part-size 'The size of each part of outputs in object storage (-o s3://...): 5MiB to 5GiB, as for a join (default: 8 MiB, or the least that fits an object in 10,000 parts; a job''s --begin cuts by it and records it, its default 5 MiB or the least that fits)'
            cand --json-form 'The shape of JSON outputs: nested arrays, or an object with dtype, shape and data'
            cand --metadata 'Add or replace an entry of the .safetensors outputs'' __metadata__ (the input''s is carried over); repeatable'
            cand --rules 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line, as a join reads them (see tjoin --help): the same file splits and joins back'
            cand --axis-for 'Cut tensors whose names match GLOB along AXIS (and WORDS: chunks N, replicas K)'
            cand --keep 'Copy tensors matching GLOB whole into every output'
            cand --heads 'The model''s attention heads and key-value heads (Q:KV, or Q when they are equal), instead of those of the config.json beside the input: with --ranks, every rank must get whole heads'
            cand --spec 'Check every tensor''s cut against DirectML''s Split (DML_SPLIT_OPERATOR_DESC) at a feature level: directml (4.1), directml:LEVEL'
            cand --dry-run 'Check everything and print every output, its tensors and slices (=json: as one JSON object); write nothing'
            cand --print-plan 'After writing, print on stdout the plan that was carried out, as --dry-run prints it (=json: as one JSON object; a refusal or a failure then as JSON on stdout too)'
            cand --backend 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can'
            cand --dml-adapter 'DirectML''s adapter: default (first hardware GPU), warp (software), or an index'
            cand --workers 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)'
            cand --worker 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again'
            cand --progress 'When to show a progress bar on stderr'
            cand --exact 'With --parts: refuse a length that N does not divide, instead of uneven parts'
            cand -n 'Refuse to replace an existing output (checked for every output before any is written)'
            cand --no-clobber 'Refuse to replace an existing output (checked for every output before any is written)'
            cand --compress 'Deflate the members of .npz outputs, as numpy.savez_compressed does'
            cand --allow-unmatched 'Accept --rules lines that match no tensor of the input (refused by default)'
            cand --begin 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)'
            cand --commit 'Commit a job of --workers N: check that all finished and nothing changed, then publish'
            cand --abandon 'Abandon a job of --workers N: remove its files, abort its upload; the output stays'
            cand -q 'Print nothing but errors (no progress bar)'
            cand --quiet 'Print nothing but errors (no progress bar)'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'tjoin;rules'= {
        }
        &'tjoin;help'= {
            cand split 'Split one input into several outputs along an axis: the inverse of a join'
            cand rules 'Print a model family''s built-in rules file, or list the families'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'tjoin;help;split'= {
        }
        &'tjoin;help;rules'= {
        }
        &'tjoin;help;help'= {
        }
    ]
    $completions[$command]
}
