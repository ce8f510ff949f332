//! Unit tests of the tensor rules: parsing rule files and flags, and glob matching.

use super::*;

#[test]
fn axis_rules_hold_one_equals_sign_and_the_words_after_the_axis() {
    let rule = "a.b*=-1".parse::<AxisRule>().unwrap();
    assert_eq!((rule.glob.as_str(), rule.axis), ("a.b*", -1));
    assert_eq!(rule.parts, Parts::default());
    let rule = "*.qkv_proj.weight=0 chunks 4:1:1"
        .parse::<AxisRule>()
        .unwrap();
    assert_eq!(rule.parts.to_string(), " chunks 4:1:1");
    let rules = ordered(&[], &[rule], Vec::new());
    assert_eq!(
        rules[0].to_string(),
        "--axis-for '*.qkv_proj.weight=0 chunks 4:1:1'"
    );
    for (text, says) in [
        ("*.weight", "expected GLOB=AXIS"),
        ("*.weight=x", "`x` after `*.weight =` is neither an axis"),
        ("*.o_proj.weight==1", "has more than one `=`"),
        ("a=b*=-1", "has more than one `=`"),
        ("=1", "has no glob"),
        ("*.weight=", "has no axis"),
        (
            "*.weight=0 sideways",
            "`sideways` after the axis is not a word of a rule",
        ),
        ("*.weight=keep", "`keep` is not an axis"),
    ] {
        let error = text.parse::<AxisRule>().unwrap_err();
        assert!(error.contains(says), "{text}: {error}");
    }
}

#[test]
fn globs_match_like_a_shell() {
    assert!(glob_match(
        "*.o_proj.weight",
        "model.layers.0.self_attn.o_proj.weight"
    ));
    assert!(glob_match("*norm*", "model.norm.weight"));
    assert!(glob_match("layer?.w", "layer1.w"));
    assert!(!glob_match("layer?.w", "layer10.w"));
    assert!(glob_match("*", ""));
    assert!(!glob_match("a*b", "ac"));
    assert!(glob_match("a*b*c", "aXbYbZc"));
    assert!(!glob_match("*.bias", "x.weight"));
    // One `?` is one character, not one byte.
    assert!(glob_match("?.w", "π.w"));
    assert!(glob_match("*π*", "aπb"));
}

/// Trying the rules in turn, the first match winning: what [`Matcher::decide`] must
/// agree with.
fn decide_in_turn(rules: &[Rule], name: &str) -> Option<usize> {
    rules.iter().position(|rule| rule.matches(name))
}

/// Every rule against every name: what [`Matcher::unmatched`] must agree with.
fn unmatched_in_turn<'r>(rules: &'r [Rule], names: &[&str]) -> Vec<&'r Rule> {
    let matches_one = |rule: &Rule| names.iter().any(|name| rule.matches(name));
    rules.iter().filter(|rule| !matches_one(rule)).collect()
}

/// Rules of the globs `keep` (as `--keep` flags, duplicates allowed), `axis_for` (as
/// `--axis-for` flags) and `lines` (as a rules file's, each glob once).
fn rules_of(keep: &[String], axis_for: &[String], lines: &[String]) -> Vec<Rule> {
    let axis_for: Vec<AxisRule> = axis_for
        .iter()
        .enumerate()
        .map(|(at, glob)| AxisRule {
            glob: glob.clone(),
            axis: at as i64 % 3,
            parts: Parts::default(),
        })
        .collect();
    let mut seen = HashSet::new();
    let text: String = lines
        .iter()
        .filter(|glob| !glob.is_empty() && seen.insert(glob.as_str()))
        .enumerate()
        .map(|(at, glob)| format!("{glob} = {}\n", if at % 2 == 0 { "keep" } else { "1" }))
        .collect();
    ordered(keep, &axis_for, file(&text).unwrap())
}

#[track_caller]
fn assert_indexed_as_in_turn(rules: &[Rule], names: &[&str]) {
    let matcher = Matcher::new(rules);
    for name in names {
        assert_eq!(
            matcher.decide(name),
            decide_in_turn(rules, name),
            "{name:?} under {:?}",
            rules.iter().map(|r| &r.glob).collect::<Vec<_>>()
        );
    }
    assert_eq!(matcher.unmatched(names), unmatched_in_turn(rules, names));
}

#[test]
fn the_index_decides_every_kind_of_glob_as_trying_them_in_turn() {
    let globs: Vec<String> = [
        "model.norm.weight", // a name
        "*",
        "??",
        "?*?",
        "*.weight",         // a suffix
        "model.*",          // a prefix
        "*norm*",           // inside
        "*.0.*",            // inside, shared with a prefix below
        "model.layers.0.*", // a prefix
        "m?del.*.w*ght",    // prefix, inside and suffix
        "π.*",              // not ASCII
        "*π",
        "a?π",
        "model.norm.weight", // the same name again: the first wins
        "*.weight",          // the same glob again
    ]
    .map(str::to_string)
    .to_vec();
    let names = [
        "model.norm.weight",
        "model.layers.0.mlp.weight",
        "model.layers.10.mlp.bias",
        "lm_head.weight",
        "ab",
        "a",
        "",
        "π.x",
        "aππ",
        "xπ",
        "mxdel.q.wght",
    ];
    for (keep, axis_for, lines) in [
        (&globs[..0], &globs[..0], &globs[..]),
        (&globs[..3], &globs[3..7], &globs[7..]),
        (&globs[10..], &globs[..10], &globs[..0]),
    ] {
        assert_indexed_as_in_turn(&rules_of(keep, axis_for, lines), &names);
    }
    // Reversed, every precedence between kinds is tried the other way round too.
    let reversed: Vec<String> = globs.iter().rev().cloned().collect();
    assert_indexed_as_in_turn(&rules_of(&reversed, &[], &[]), &names);
}

proptest::proptest! {
    #[test]
    fn the_index_decides_random_rules_as_trying_them_in_turn(
        keep in proptest::collection::vec("[ab.π*?]{0,5}", 0..12),
        axis_for in proptest::collection::vec("[ab.π*?]{1,5}", 0..12),
        lines in proptest::collection::vec("[ab.π*?]{1,6}", 0..30),
        names in proptest::collection::vec("[ab.π]{0,7}", 0..20),
    ) {
        let rules = rules_of(&keep, &axis_for, &lines);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let matcher = Matcher::new(&rules);
        for name in &names {
            proptest::prop_assert_eq!(matcher.decide(name), decide_in_turn(&rules, name));
        }
        proptest::prop_assert_eq!(matcher.unmatched(&names), unmatched_in_turn(&rules, &names));
    }
}

#[test]
fn unmatched_rules_are_described_ten_and_counted_past_that() {
    let lines: Vec<String> = (0..10_000).map(|k| format!("*.missing{k}")).collect();
    let rules = rules_of(&[], &[], &lines);
    let names = ["model.norm.weight"];
    let unmatched = Matcher::new(&rules).unmatched(&names);
    assert_eq!(unmatched.len(), 10_000);
    let described = describe_unmatched(&unmatched, &names);
    assert_eq!(described.len(), SHOWN + 1);
    assert_eq!(
        described[SHOWN],
        "... and 9,990 more rules that match no tensor"
    );
    let refusal = unmatched_refusal(&unmatched, &names, true).to_string();
    assert!(
        refusal.starts_with("10,000 rules match no tensor"),
        "{refusal}"
    );
    assert!(refusal.len() < 2_000, "{} bytes", refusal.len());
}

#[test]
fn long_and_hostile_rule_lines_are_cut_and_escaped_in_messages() {
    let long = "x".repeat(1 << 20);
    for text in [
        format!("{long}\n"),
        format!("{long} = sideways\n"),
        format!("a = 1\na{long} = {long}\n"),
        format!("a{long} = 1\na{long} = 0\n"),
    ] {
        let error = file(&text).unwrap_err().to_string();
        assert!(error.len() < 2_000, "{} bytes", error.len());
        assert!(error.contains("more bytes"), "{error}");
    }
    let error = file("\x1b[2J\u{202e} = nope\n").unwrap_err().to_string();
    assert!(!error.contains(['\x1b', '\u{202e}']), "{error:?}");
    assert!(error.contains("\\x1b[2J\\u{202e} ="), "{error}");
    // A rule in a warning: the glob is cut and escaped, the file name escaped too.
    let rules = parse_file(
        Path::new("evil\n.rules"),
        &format!("\x1b]0;title\x07{long} = 0\n"),
    )
    .unwrap();
    let unmatched = Matcher::new(&rules).unmatched(&["w"]);
    let warning = describe_unmatched(&unmatched, &["w\x1b"]).concat();
    assert!(warning.len() < 1_000, "{} bytes", warning.len());
    assert!(!warning.contains(['\x1b', '\x07', '\n']), "{warning:?}");
    assert!(
        warning.starts_with("evil\\n.rules:1: \\x1b]0;title\\x07xxx"),
        "{warning}"
    );
    // JSON shows the rule exactly as written.
    assert!(
        rules[0]
            .written()
            .starts_with("evil\n.rules:1: \x1b]0;title\x07xxx")
    );
    assert!(rules[0].written().ends_with("xxx = 0"));
}

fn file(text: &str) -> Result<Vec<Rule>> {
    parse_file(Path::new("m.rules"), text)
}

#[test]
fn rules_files_hold_axes_keeps_and_comments() {
    let rules =
        file("# Llama\n\n*.o_proj.weight = 1   # row-parallel\n*norm* = keep\nx#z = -1\n").unwrap();
    let seen: Vec<(&str, Treatment, usize)> = rules
        .iter()
        .map(|r| match r.origin {
            Origin::File { line, .. } => (r.glob.as_str(), r.treatment, line),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("*.o_proj.weight", Treatment::Axis(1), 3),
            ("*norm*", Treatment::Keep, 4),
            ("x#z", Treatment::Axis(-1), 5),
        ]
    );
    assert_eq!(rules[0].to_string(), "m.rules:3: *.o_proj.weight = 1");
}

#[test]
fn every_bad_line_is_named_with_its_number() {
    let error = file(
        "a = 1\nno equals sign\n = 0\nb = sideways\nc = Keep\na = 0\n*.o_proj.weight == 1\n\
         d = 0 sideways\ne = 0 chunks 4:x\nf = keep 0\n",
    )
    .unwrap_err()
    .to_string();
    for needle in [
        "the rules file m.rules has 9 lines that are not a rule",
        "m.rules:2: `no equals sign` has no `=`",
        "m.rules:3: `= 0` has no glob",
        "m.rules:4: `sideways` after `b =` is neither an axis",
        "m.rules:5: `Keep` is written `keep`",
        "m.rules:6: `a` already has a rule on line 1",
        "m.rules:7: `*.o_proj.weight == 1` has more than one `=`",
        "m.rules:8: `sideways` after the axis is not a word of a rule",
        "m.rules:9: `chunks 4:x` is neither a count",
        "m.rules:10: `0` after `keep`",
        "hint: write one rule a line",
    ] {
        assert!(error.contains(needle), "{needle:?} not in\n{error}");
    }
}

#[test]
fn flags_come_first_and_the_first_match_decides() {
    let axis_for = ["*.weight=1".parse().unwrap()];
    let rules = ordered(
        &["*norm*".to_string()],
        &axis_for,
        file("*.q_proj.weight = 0\n*.bias = keep\n").unwrap(),
    );
    let matcher = Matcher::new(&rules);
    assert_eq!(matcher.decide("model.norm.weight"), Some(0));
    assert_eq!(matcher.decide("l.o_proj.weight"), Some(1));
    assert_eq!(matcher.decide("l.o_proj.bias"), Some(3));
    assert_eq!(matcher.decide("position_ids"), None);
    assert_eq!(rules[0].to_string(), "--keep '*norm*'");
    assert_eq!(rules[1].to_string(), "--axis-for '*.weight=1'");
    let names = ["model.norm.weight", "l.o_proj.weight", "l.o_proj.bias"];
    let unmatched = matcher.unmatched(&names);
    assert_eq!(unmatched, [&rules[2]]);
    assert_eq!(
        describe_unmatched(&unmatched, &names),
        [
            "m.rules:1: *.q_proj.weight = 0 matches no tensor (the closest name is \
          `l.o_proj.weight`)"
        ]
    );
}

#[test]
fn suggested_globs_group_names_and_match_no_other_tensor() {
    let names = [
        "embeddings.LayerNorm.weight",
        "encoder.layer.0.attention.output.LayerNorm.weight",
        "encoder.layer.0.attention.output.dense.bias",
        "encoder.layer.0.attention.self.query.bias",
        "encoder.layer.1.attention.output.LayerNorm.weight",
        "encoder.layer.1.attention.output.dense.bias",
        "encoder.layer.1.attention.self.query.bias",
        "rope.scale",
        "a.0.x",
        "a.1.x",
        "b.x",
        "pooler.dense.weight",
        "pooler.dense.bias",
        "intermediate.dense.weight",
        "intermediate.dense.bias",
    ];
    let targets = [
        "embeddings.LayerNorm.weight",
        "encoder.layer.0.attention.output.LayerNorm.weight",
        "encoder.layer.0.attention.output.dense.bias",
        "encoder.layer.1.attention.output.LayerNorm.weight",
        "encoder.layer.1.attention.output.dense.bias",
        "rope.scale",
        "a.0.x",
        "a.1.x",
        "pooler.dense.weight",
        "pooler.dense.bias",
    ];
    let suggested = suggest_globs(&targets, &names);
    let globs: Vec<(&str, usize)> = suggested
        .iter()
        .map(|(g, members)| (g.as_str(), members.len()))
        .collect();
    assert_eq!(
        globs,
        [
            ("*.LayerNorm.weight", 3),
            ("*.output.dense.bias", 2),
            ("rope.scale", 1),
            ("a.*", 2),
            ("pooler.*", 2),
        ]
    );
    for (glob, _) in &globs {
        for name in names {
            assert!(
                !glob_match(glob, name) || targets.contains(&name),
                "{glob} matches {name}"
            );
        }
    }
}

#[test]
fn the_closest_name_holds_the_globs_text_best() {
    let distance = |glob: &str, name| distance_within(&glob.chars().collect::<Vec<_>>(), name);
    assert_eq!(distance("norm", "model.norm.weight"), 0);
    assert_eq!(distance("nrom", "model.norm.weight"), 2);
    assert_eq!(distance(".o_prj.weight", "l.0.o_proj.weight"), 1);
    assert_eq!(distance("abc", ""), 3);
    let rule = ordered(&["*nrom*".to_string()], &[], Vec::new());
    let names = [
        "lm_head.weight",
        "model.layers.0.input_layernorm.weight",
        "model.norm.weight",
    ];
    assert_eq!(
        describe_unmatched(&[&rule[0]], &names),
        ["--keep '*nrom*' matches no tensor (the closest name is `model.norm.weight`)"]
    );
}

#[test]
fn shell_quoting_is_only_there_when_needed() {
    assert_eq!(shell_quote("position_ids"), "position_ids");
    assert_eq!(shell_quote("*norm*"), "'*norm*'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(
        shell_quote("a\x1b[2J\nhint: it's\\\u{202e}"),
        r"$'a\x1b[2J\nhint: it\'s\\\u202e'"
    );
}

#[test]
fn a_line_ending_in_optional_is_never_required() {
    let text = "lm_head.weight = 0 optional\n*norm* = keep optional # tied\n*.o_proj.weight = 1\n";
    let rules = parse_file(Path::new("r.rules"), text).unwrap();
    assert_eq!(
        rules
            .iter()
            .map(|r| (r.optional, r.required))
            .collect::<Vec<_>>(),
        [(true, false), (true, false), (false, true)]
    );
    assert_eq!(
        rules[0].to_string(),
        "r.rules:1: lm_head.weight = 0 optional"
    );
    assert_eq!(rules[1].treatment, Treatment::Keep);
    // A glob named `optional` is still a glob; a word after `optional` is refused.
    let rules = parse_file(Path::new("r.rules"), "optional = 0\n").unwrap();
    assert_eq!(rules[0].glob, "optional");
    assert!(parse_file(Path::new("r.rules"), "x = 0 optional plain\n").is_err());
}
