"""tjoin's long flags, as tjoin.join, tjoin.split and tjoin.plan take them.

Generated from tjoin's clap definition (src/cli/) by `tjoin --generate python`; do not edit.
A test fails when it is stale, and `TJOIN_REGENERATE=1 cargo test generated` rewrites it.
Each table maps a keyword argument to (the flag, its kind): "bare" takes True (the flag) or
False (nothing), "value" one value (--flag=VALUE), "repeat" a list (--flag=ITEM for each),
"optional" a value or True (--flag alone).
"""

# tjoin --version's number.
VERSION = "0.1.0"

# tjoin [FLAGS] INPUT...
JOIN = {
    "abandon": ("--abandon", "bare"),
    "allow_unmatched": ("--allow-unmatched", "bare"),
    "any_order": ("--any-order", "bare"),
    "append": ("--append", "bare"),
    "axis": ("--axis", "value"),
    "axis_for": ("--axis-for", "repeat"),
    "backend": ("--backend", "value"),
    "begin": ("--begin", "bare"),
    "cast": ("--cast", "value"),
    "commit": ("--commit", "bare"),
    "compress": ("--compress", "bare"),
    "config": ("--config", "value"),
    "dml_adapter": ("--dml-adapter", "value"),
    "dry_run": ("--dry-run", "optional"),
    "exclude": ("--exclude", "repeat"),
    "expect_shape": ("--expect-shape", "value"),
    "files_from": ("--files-from", "value"),
    "format": ("--format", "value"),
    "input_format": ("--input-format", "value"),
    "join_identical": ("--join-identical", "bare"),
    "json_form": ("--json-form", "value"),
    "keep": ("--keep", "repeat"),
    "like": ("--like", "repeat"),
    "max_shard_size": ("--max-shard-size", "value"),
    "metadata": ("--metadata", "repeat"),
    "name": ("--name", "value"),
    "names_from": ("--names-from", "value"),
    "no_clobber": ("--no-clobber", "bare"),
    "null": ("--null", "bare"),
    "only": ("--only", "repeat"),
    "output": ("--output", "value"),
    "part_size": ("--part-size", "value"),
    "prefix": ("--prefix", "value"),
    "print_plan": ("--print-plan", "optional"),
    "progress": ("--progress", "value"),
    "quiet": ("--quiet", "bare"),
    "recover": ("--recover", "value"),
    "rules": ("--rules", "repeat"),
    "spec": ("--spec", "value"),
    "stack": ("--stack", "bare"),
    "strict": ("--strict", "bare"),
    "uneven": ("--uneven", "bare"),
    "worker": ("--worker", "value"),
    "workers": ("--workers", "value"),
}

# tjoin split [FLAGS] INPUT
SPLIT = {
    "abandon": ("--abandon", "bare"),
    "allow_unmatched": ("--allow-unmatched", "bare"),
    "axis": ("--axis", "value"),
    "axis_for": ("--axis-for", "repeat"),
    "backend": ("--backend", "value"),
    "begin": ("--begin", "bare"),
    "commit": ("--commit", "bare"),
    "compress": ("--compress", "bare"),
    "dml_adapter": ("--dml-adapter", "value"),
    "dry_run": ("--dry-run", "optional"),
    "exact": ("--exact", "bare"),
    "format": ("--format", "value"),
    "heads": ("--heads", "value"),
    "input_format": ("--input-format", "value"),
    "json_form": ("--json-form", "value"),
    "keep": ("--keep", "repeat"),
    "max_shard_size": ("--max-shard-size", "value"),
    "max_tensors": ("--max-tensors", "value"),
    "metadata": ("--metadata", "repeat"),
    "no_clobber": ("--no-clobber", "bare"),
    "output": ("--output", "repeat"),
    "parts": ("--parts", "value"),
    "print_plan": ("--print-plan", "optional"),
    "progress": ("--progress", "value"),
    "quiet": ("--quiet", "bare"),
    "ranks": ("--ranks", "value"),
    "rules": ("--rules", "repeat"),
    "sizes": ("--sizes", "value"),
    "spec": ("--spec", "value"),
    "worker": ("--worker", "value"),
    "workers": ("--workers", "value"),
}
