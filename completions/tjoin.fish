complete -c tjoin -s a -l axis -d 'The axis to join along; negative values count from the back (-1 is the last axis). Required, except under --spec onnx-1, whose default is 1' -r
complete -c tjoin -s o -l output -d 'The file to write. It is written under a temporary name and renamed into place when complete, so it may be one of the inputs' -r -F
complete -c tjoin -l spec -d 'Check the join against a runtime\'s rules: onnx (= onnx-13), onnx-11, onnx-4, onnx-1, openvino, directml (= directml:4.1), directml:1.0|2.1|3.0|4.1. Without it, ONNX Concat-13\'s shape rules apply to every element type numpy stores' -r
complete -c tjoin -l expect-shape -d 'Refuse the join unless the output\'s shape is exactly this, e.g. 1,1,2,7 (DirectML\'s check of the output tensor\'s sizes)' -r
complete -c tjoin -l generate -d 'Print the man page or a shell\'s completion script on standard output (for packagers; the generated files are checked in under man/ and completions/)' -r -f -a "man\t'The man page, `man/tjoin.1`'
bash\t'`completions/tjoin.bash`'
zsh\t'`completions/_tjoin`'
fish\t'`completions/tjoin.fish`'
powershell\t'`completions/_tjoin.ps1`'
elvish\t'`completions/tjoin.elv`'"
complete -c tjoin -l dry-run -d 'Check everything and print the plan on standard output, but write nothing. Exits 0 when the join would be accepted'
complete -c tjoin -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tjoin -s V -l version -d 'Print version'
