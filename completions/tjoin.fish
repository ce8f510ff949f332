complete -c tjoin -l files-from -d 'Also join the paths listed in FILE (`-`: standard input), one per line (CRLF line ends too), after any INPUT' -r -F
complete -c tjoin -l input-format -d 'Read every input in this format instead of guessing from its content and name' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''
pt\t''"
complete -c tjoin -s a -l axis -d 'The axis to join along; negative ones count from the back (-1 is the last). Not needed with one input, whose tensors are copied' -r -f
complete -c tjoin -l cast -d 'Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64. A distributed checkpoint\'s floating-point tensors only' -r -f -a "bool\t''
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
complete -c tjoin -s o -l output -d 'The file to write (`-` or `/dev/stdout`: standard output, as the shell opened it), or a folder (`DIR/`, or an existing folder) or an index for a sharded checkpoint of named tensors (not for .npy or JSON inputs without --name); a file is replaced only when complete, so it may be an input, and a device or FIFO is written to where it is' -r -F
complete -c tjoin -l format -d 'The output\'s format (npy, json, npz, safetensors): required with `-o -`; overrides the extension' -r -f -a "npy\t''
json\t''
npz\t''
safetensors\t''"
complete -c tjoin -l name -d 'Name the joined tensor of single-tensor inputs (default: theirs, else arr_0, in every output format)' -r -f
complete -c tjoin -l recover -d 'Cut a .npy file that an interrupted --append left longer than its header says back to its header\'s shape, and say what was removed' -r -F
complete -c tjoin -l metadata -d 'Add or replace an entry of a .safetensors output\'s __metadata__; repeatable' -r -f
complete -c tjoin -l json-form -d 'The shape of a JSON output: nested arrays, or an object with dtype, shape and data' -r -f -a "nested\t'`[[1, 2], [3, 4]]`: the data as nested arrays'
object\t'`{"dtype": "int64", "shape": [2, 2], "data": [[1, 2], [3, 4]]}`'"
complete -c tjoin -l spec -d 'Check against a runtime\'s join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL]' -r -f -a "onnx\t''
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
complete -c tjoin -l expect-shape -d 'Refuse the join unless the output\'s shape is exactly DIMS: 1,1,2,7 or [1, 1, 2, 7]' -r -f
complete -c tjoin -l like -d 'Refuse output tensors whose shape differs from their namesakes\' in REF\'s header' -r -F
complete -c tjoin -l dry-run -d 'Check everything and print the plan on stdout (=json: as one JSON object); write nothing' -r -f -a "text\t'A table for people'
json\t'One JSON object for scripts; a refusal is printed as one too'"
complete -c tjoin -l rules -d 'Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line; after the flags\'' -r -F
complete -c tjoin -l axis-for -d 'Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins' -r -f
complete -c tjoin -l keep -d 'Copy tensors matching GLOB from the first input, once checked identical in all' -r -f
complete -c tjoin -l max-shard-size -d 'The most tensor bytes per shard of a sharded output (-o DIR/): 5GB (the default), 500MB, 2GiB' -r -f
complete -c tjoin -l prefix -d 'Name a sharded output\'s files PREFIX-00001-of-0000N.safetensors and PREFIX.safetensors.index.json (default: the input index\'s prefix, else model)' -r -f
complete -c tjoin -l names-from -d 'Put each tensor of a sharded output (-o DIR/) in the file this index\'s weight_map names for it (a model.safetensors.index.json), as PyTorch\'s fqn_to_index_mapping does, instead of splitting by --max-shard-size' -r -F
complete -c tjoin -l backend -d 'Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can' -r -f -a "cpu\t'The CPU copy engine'
directml\t'DirectML (Windows, built with the `directml` feature); fails when it cannot run'
auto\t'DirectML when a device is available and runs every tensor, else the CPU engine'"
complete -c tjoin -l dml-adapter -d 'DirectML\'s adapter: default (first hardware GPU), warp (software), or an index' -r -f -a "default\t''
warp\t''
0\t''
1\t''"
complete -c tjoin -l progress -d 'When to show a progress bar on stderr' -r -f -a "auto\t'For jobs of 512 MiB or more, when stderr is a terminal'
always\t'Always, even when stderr is a file or a pipe'
never\t'Never'"
complete -c tjoin -s 0 -l null -d 'The --files-from list separates paths with NUL bytes (as `find -print0` writes them)'
complete -c tjoin -l stack -d 'Join along a new axis inserted at --axis, as numpy.stack (identical shapes)'
complete -c tjoin -s n -l no-clobber -d 'Refuse to replace an existing output (by default it is replaced atomically)'
complete -c tjoin -l append -d 'Grow the first input in place by the others, along its growth axis (0 for a C-order .npy, the last for a Fortran-order one), in time proportional to what is added'
complete -c tjoin -l compress -d 'Deflate the members of an .npz output, as numpy.savez_compressed does'
complete -c tjoin -l strict -d 'Refuse a rule (--axis-for, --keep, --rules line) that matches no tensor; else a warning'
complete -c tjoin -l allow-unmatched -d 'Warn about a --rules line that matches no tensor rather than refuse the join'
complete -c tjoin -l any-order -d 'Take inputs whose names number them (tp3, rank_03, -00002-of-00004) in the order given'
complete -c tjoin -l uneven -d 'Join a merge\'s tensors whose sizes along the axis no split gives'
complete -c tjoin -l join-identical -d 'Join tensors no rule decides even when every input holds them identical (else refused)'
complete -c tjoin -s q -l quiet -d 'Print nothing but errors (no progress bar)'
complete -c tjoin -s h -l help -d 'Print help (the man page has more)'
complete -c tjoin -s V -l version -d 'Print version'
