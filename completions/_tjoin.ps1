
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'tjoin' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'tjoin'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'tjoin' {
            [CompletionResult]::new('--files-from', '--files-from', [CompletionResultType]::ParameterName, 'Also join the paths listed in FILE (`-`: standard input), one per line (CRLF line ends too), after any INPUT')
            [CompletionResult]::new('--input-format', '--input-format', [CompletionResultType]::ParameterName, 'Read every input in this format instead of guessing from its content and name')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied')
            [CompletionResult]::new('--axis', '--axis', [CompletionResultType]::ParameterName, 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied')
            [CompletionResult]::new('--cast', '--cast', [CompletionResultType]::ParameterName, 'Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64. A distributed checkpoint''s floating-point tensors only; in a file of several tensors, optimizer step counters (`*.step`, one element) stay exact')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so one input may be rewritten in place (the output of a join of several is never one of them: --append grows a file), and a device or FIFO is written to where it is. A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint''s prefix, uploaded as it is written and in place only once complete')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so one input may be rewritten in place (the output of a join of several is never one of them: --append grows a file), and a device or FIFO is written to where it is. A URL (s3://, gs://, az://) is an object, or with a trailing / a sharded checkpoint''s prefix, uploaded as it is written and in place only once complete')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'The output''s format (npy, json, npz, safetensors): required with `-o -`; overrides the extension')
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'Name the joined tensor of single-tensor inputs (default: theirs, else arr_0, in every output format)')
            [CompletionResult]::new('--part-size', '--part-size', [CompletionResultType]::ParameterName, 'The size of each part of an output in object storage (-o s3://...): 5MiB to 5GiB, e.g. 64MiB (default: 8 MiB, or the least that fits the object in 10,000 parts)')
            [CompletionResult]::new('--recover', '--recover', [CompletionResultType]::ParameterName, 'Cut a .npy file that an interrupted --append left longer than its header says back to its header''s shape, and say what was removed')
            [CompletionResult]::new('--metadata', '--metadata', [CompletionResultType]::ParameterName, 'Add or replace an entry of a .safetensors output''s __metadata__; repeatable')
            [CompletionResult]::new('--json-form', '--json-form', [CompletionResultType]::ParameterName, 'The shape of a JSON output: nested arrays, or an object with dtype, shape and data')
            [CompletionResult]::new('--spec', '--spec', [CompletionResultType]::ParameterName, 'Check against a runtime''s join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL]')
            [CompletionResult]::new('--expect-shape', '--expect-shape', [CompletionResultType]::ParameterName, 'Refuse the join unless the output''s shape is exactly DIMS: 1,1,2,7 or [1, 1, 2, 7]')
            [CompletionResult]::new('--like', '--like', [CompletionResultType]::ParameterName, 'Refuse output tensors whose shape differs from their namesakes'' in REF''s header')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'The model''s config.json, whose sizes a merge''s tensors must have (default: a config.json beside the first input)')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Check everything and print the plan on stdout (=json: as one JSON object); write nothing')
            [CompletionResult]::new('--print-plan', '--print-plan', [CompletionResultType]::ParameterName, 'After writing, print on stdout the plan that was carried out, as --dry-run prints it')
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line; after the flags''')
            [CompletionResult]::new('--axis-for', '--axis-for', [CompletionResultType]::ParameterName, 'Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Copy tensors matching GLOB from the first input, once checked identical in all')
            [CompletionResult]::new('--exclude', '--exclude', [CompletionResultType]::ParameterName, 'Leave out the tensors of multi-tensor inputs whose names match GLOB; repeatable')
            [CompletionResult]::new('--only', '--only', [CompletionResultType]::ParameterName, 'Take only the tensors of multi-tensor inputs whose names match a GLOB; repeatable')
            [CompletionResult]::new('--max-shard-size', '--max-shard-size', [CompletionResultType]::ParameterName, 'The most tensor bytes per shard of a sharded output (-o DIR/): 5GB (the default), 500MB, 2GiB')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Name a sharded output''s files PREFIX-00001-of-0000N.safetensors and PREFIX.safetensors.index.json (default: the input index''s prefix, else model)')
            [CompletionResult]::new('--names-from', '--names-from', [CompletionResultType]::ParameterName, 'Put each tensor of a sharded output (-o DIR/) in the file this index''s weight_map names for it (a model.safetensors.index.json), as PyTorch''s fqn_to_index_mapping does, instead of splitting by --max-shard-size')
            [CompletionResult]::new('--backend', '--backend', [CompletionResultType]::ParameterName, 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can')
            [CompletionResult]::new('--dml-adapter', '--dml-adapter', [CompletionResultType]::ParameterName, 'DirectML''s adapter: default (first hardware GPU), warp (software), or an index')
            [CompletionResult]::new('--workers', '--workers', [CompletionResultType]::ParameterName, 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)')
            [CompletionResult]::new('--worker', '--worker', [CompletionResultType]::ParameterName, 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'When to show a progress bar on stderr')
            [CompletionResult]::new('-0', '-0', [CompletionResultType]::ParameterName, 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)')
            [CompletionResult]::new('--null', '--null', [CompletionResultType]::ParameterName, 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)')
            [CompletionResult]::new('--stack', '--stack', [CompletionResultType]::ParameterName, 'Join along a new axis inserted at --axis, as numpy.stack (identical shapes)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Refuse to replace an existing output (by default it is replaced atomically)')
            [CompletionResult]::new('--no-clobber', '--no-clobber', [CompletionResultType]::ParameterName, 'Refuse to replace an existing output (by default it is replaced atomically)')
            [CompletionResult]::new('--append', '--append', [CompletionResultType]::ParameterName, 'Grow the first input in place by the others, along its growth axis (0 for a C-order .npy, the last for a Fortran-order one), in time proportional to what is added')
            [CompletionResult]::new('--compress', '--compress', [CompletionResultType]::ParameterName, 'Deflate the members of an .npz output, as numpy.savez_compressed does')
            [CompletionResult]::new('--strict', '--strict', [CompletionResultType]::ParameterName, 'Refuse a rule (--axis-for, --keep, --rules line) that matches no tensor; else a warning')
            [CompletionResult]::new('--allow-unmatched', '--allow-unmatched', [CompletionResultType]::ParameterName, 'Warn about a --rules line that matches no tensor rather than refuse the join')
            [CompletionResult]::new('--any-order', '--any-order', [CompletionResultType]::ParameterName, 'Take inputs whose names number them (tp3, rank_03, -00002-of-00004) in the order given')
            [CompletionResult]::new('--uneven', '--uneven', [CompletionResultType]::ParameterName, 'Join a merge''s tensors whose sizes along the axis no split gives')
            [CompletionResult]::new('--join-identical', '--join-identical', [CompletionResultType]::ParameterName, 'Join tensors no rule decides even when every input holds them identical (else refused)')
            [CompletionResult]::new('--begin', '--begin', [CompletionResultType]::ParameterName, 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)')
            [CompletionResult]::new('--commit', '--commit', [CompletionResultType]::ParameterName, 'Commit a job of --workers N: check that all finished and nothing changed, then publish')
            [CompletionResult]::new('--abandon', '--abandon', [CompletionResultType]::ParameterName, 'Abandon a job of --workers N: remove its files, abort its upload; the output stays')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors (no progress bar)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors (no progress bar)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (the man page has more)')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (the man page has more)')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('split', 'split', [CompletionResultType]::ParameterValue, 'Split one input into several outputs along an axis: the inverse of a join')
            [CompletionResult]::new('rules', 'rules', [CompletionResultType]::ParameterValue, 'Print a model family''s built-in rules file, or list the families')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'tjoin;split' {
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'The axis to cut every tensor along (negative ones count from the back); with --ranks, that of the tensors no rule decides')
            [CompletionResult]::new('--axis', '--axis', [CompletionResultType]::ParameterName, 'The axis to cut every tensor along (negative ones count from the back); with --ranks, that of the tensors no rule decides')
            [CompletionResult]::new('--parts', '--parts', [CompletionResultType]::ParameterName, 'Cut into N parts as numpy.array_split does (the first len % N parts one longer)')
            [CompletionResult]::new('--sizes', '--sizes', [CompletionResultType]::ParameterName, 'Cut into parts of these sizes along the axis (they must add up to its length): 900,100')
            [CompletionResult]::new('--ranks', '--ranks', [CompletionResultType]::ParameterName, 'Cut into N tensor-parallel ranks by the tensor rules (--rules, --axis-for, --keep)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`: {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order. URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`: {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order. URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none')
            [CompletionResult]::new('--max-shard-size', '--max-shard-size', [CompletionResultType]::ParameterName, 'The most tensor bytes per shard of an output that names a folder (`tp{rank}/`): a sharded checkpoint, as a join writes one (5GB by default; 500MB, 2GiB). For a GGUF input, the most tensor bytes per file of the set it is split into')
            [CompletionResult]::new('--max-tensors', '--max-tensors', [CompletionResultType]::ParameterName, 'Split a GGUF file into a set of files of at most N tensors each, named as gguf-split names them (-o out/ gives out/MODEL-00001-of-0000K.gguf)')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'The outputs'' format (npy, json, npz, safetensors); overrides their extensions')
            [CompletionResult]::new('--input-format', '--input-format', [CompletionResultType]::ParameterName, 'Read the input in this format instead of guessing from its content and name')
            [CompletionResult]::new('--part-size', '--part-size', [CompletionResultType]::ParameterName, 'The size of each part of outputs in object storage (-o s3://...): 5MiB to 5GiB, as for a join (default: 8 MiB, or the least that fits an object in 10,000 parts; a job''s --begin cuts by it and records it, its default 5 MiB or the least that fits)')
            [CompletionResult]::new('--json-form', '--json-form', [CompletionResultType]::ParameterName, 'The shape of JSON outputs: nested arrays, or an object with dtype, shape and data')
            [CompletionResult]::new('--metadata', '--metadata', [CompletionResultType]::ParameterName, 'Add or replace an entry of the .safetensors outputs'' __metadata__ (the input''s is carried over); repeatable')
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line, as a join reads them (see tjoin --help): the same file splits and joins back')
            [CompletionResult]::new('--axis-for', '--axis-for', [CompletionResultType]::ParameterName, 'Cut tensors whose names match GLOB along AXIS (and WORDS: chunks N, replicas K)')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Copy tensors matching GLOB whole into every output')
            [CompletionResult]::new('--heads', '--heads', [CompletionResultType]::ParameterName, 'The model''s attention heads and key-value heads (Q:KV, or Q when they are equal), instead of those of the config.json beside the input: with --ranks, every rank must get whole heads')
            [CompletionResult]::new('--spec', '--spec', [CompletionResultType]::ParameterName, 'Check every tensor''s cut against DirectML''s Split (DML_SPLIT_OPERATOR_DESC) at a feature level: directml (4.1), directml:LEVEL')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Check everything and print every output, its tensors and slices (=json: as one JSON object); write nothing')
            [CompletionResult]::new('--print-plan', '--print-plan', [CompletionResultType]::ParameterName, 'After writing, print on stdout the plan that was carried out, as --dry-run prints it (=json: as one JSON object; a refusal or a failure then as JSON on stdout too)')
            [CompletionResult]::new('--backend', '--backend', [CompletionResultType]::ParameterName, 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can')
            [CompletionResult]::new('--dml-adapter', '--dml-adapter', [CompletionResultType]::ParameterName, 'DirectML''s adapter: default (first hardware GPU), warp (software), or an index')
            [CompletionResult]::new('--workers', '--workers', [CompletionResultType]::ParameterName, 'Share the output between N workers (with --begin, --commit, --abandon or --dry-run)')
            [CompletionResult]::new('--worker', '--worker', [CompletionResultType]::ParameterName, 'Write share I (from 0) of a job of N workers that --begin recorded; safe to run again')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'When to show a progress bar on stderr')
            [CompletionResult]::new('--exact', '--exact', [CompletionResultType]::ParameterName, 'With --parts: refuse a length that N does not divide, instead of uneven parts')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Refuse to replace an existing output (checked for every output before any is written)')
            [CompletionResult]::new('--no-clobber', '--no-clobber', [CompletionResultType]::ParameterName, 'Refuse to replace an existing output (checked for every output before any is written)')
            [CompletionResult]::new('--compress', '--compress', [CompletionResultType]::ParameterName, 'Deflate the members of .npz outputs, as numpy.savez_compressed does')
            [CompletionResult]::new('--allow-unmatched', '--allow-unmatched', [CompletionResultType]::ParameterName, 'Accept --rules lines that match no tensor of the input (refused by default)')
            [CompletionResult]::new('--begin', '--begin', [CompletionResultType]::ParameterName, 'Begin a job of --workers N: plan it, and record it beside the output (in the bucket)')
            [CompletionResult]::new('--commit', '--commit', [CompletionResultType]::ParameterName, 'Commit a job of --workers N: check that all finished and nothing changed, then publish')
            [CompletionResult]::new('--abandon', '--abandon', [CompletionResultType]::ParameterName, 'Abandon a job of --workers N: remove its files, abort its upload; the output stays')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors (no progress bar)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors (no progress bar)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'tjoin;rules' {
            break
        }
        'tjoin;help' {
            [CompletionResult]::new('split', 'split', [CompletionResultType]::ParameterValue, 'Split one input into several outputs along an axis: the inverse of a join')
            [CompletionResult]::new('rules', 'rules', [CompletionResultType]::ParameterValue, 'Print a model family''s built-in rules file, or list the families')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'tjoin;help;split' {
            break
        }
        'tjoin;help;rules' {
            break
        }
        'tjoin;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
