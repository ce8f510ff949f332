
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
            cand -a 'The axis to join along; negative values count from the back (-1 is the last axis). Required, except under --spec onnx-1, whose default is 1'
            cand --axis 'The axis to join along; negative values count from the back (-1 is the last axis). Required, except under --spec onnx-1, whose default is 1'
            cand -o 'The file to write. It is written under a temporary name and renamed into place when complete, so it may be one of the inputs'
            cand --output 'The file to write. It is written under a temporary name and renamed into place when complete, so it may be one of the inputs'
            cand --spec 'Check the join against a runtime''s rules: onnx (= onnx-13), onnx-11, onnx-4, onnx-1, openvino, directml (= directml:4.1), directml:1.0|2.1|3.0|4.1. Without it, ONNX Concat-13''s shape rules apply to every element type numpy stores'
            cand --expect-shape 'Refuse the join unless the output''s shape is exactly this, e.g. 1,1,2,7 (DirectML''s check of the output tensor''s sizes)'
            cand --generate 'Print the man page or a shell''s completion script on standard output (for packagers; the generated files are checked in under man/ and completions/)'
            cand --dry-run 'Check everything and print the plan on standard output, but write nothing. Exits 0 when the join would be accepted'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
