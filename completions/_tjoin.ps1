
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
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'The axis to join along; negative values count from the back (-1 is the last axis). Required, except under --spec onnx-1, whose default is 1')
            [CompletionResult]::new('--axis', '--axis', [CompletionResultType]::ParameterName, 'The axis to join along; negative values count from the back (-1 is the last axis). Required, except under --spec onnx-1, whose default is 1')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'The file to write. It is written under a temporary name and renamed into place when complete, so it may be one of the inputs')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'The file to write. It is written under a temporary name and renamed into place when complete, so it may be one of the inputs')
            [CompletionResult]::new('--spec', '--spec', [CompletionResultType]::ParameterName, 'Check the join against a runtime''s rules: onnx (= onnx-13), onnx-11, onnx-4, onnx-1, openvino, directml (= directml:4.1), directml:1.0|2.1|3.0|4.1. Without it, ONNX Concat-13''s shape rules apply to every element type numpy stores')
            [CompletionResult]::new('--expect-shape', '--expect-shape', [CompletionResultType]::ParameterName, 'Refuse the join unless the output''s shape is exactly this, e.g. 1,1,2,7 (DirectML''s check of the output tensor''s sizes)')
            [CompletionResult]::new('--generate', '--generate', [CompletionResultType]::ParameterName, 'Print the man page or a shell''s completion script on standard output (for packagers; the generated files are checked in under man/ and completions/)')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Check everything and print the plan on standard output, but write nothing. Exits 0 when the join would be accepted')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
