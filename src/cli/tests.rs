//! The unit tests of the clap definition (`src/cli/mod.rs`): its parsers and flags.

use super::*;
use clap::CommandFactory;

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

/// tjoin's command with a subcommand added, as a variant of `Subcommand` adds one.
fn with_subcommand() -> clap::Command {
    let flag = clap::Arg::new("x")
        .long("x")
        .action(clap::ArgAction::SetTrue);
    Cli::command().subcommand(clap::Command::new("testsub").arg(flag))
}

#[test]
fn a_subcommand_can_be_added_beside_the_join() {
    with_subcommand().debug_assert();
    let parse = |args: &[&str]| {
        let args = std::iter::once("tjoin").chain(args.iter().copied());
        with_subcommand().try_get_matches_from(args)
    };
    // The join parses as before, into the same `Cli`.
    let matches = parse(&["-a", "0", "a", "b", "-o", "c"]).expect("a join");
    assert_eq!(matches.subcommand_name(), None);
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).expect("a join");
    assert_eq!(cli.join.axis, Some(0));
    assert_eq!(cli.join.inputs, [PathBuf::from("a"), PathBuf::from("b")]);
    assert_eq!(cli.join.output, Some(PathBuf::from("c")));
    assert!(cli.command.is_none());
    // The subcommand, first, takes its own flags, and the join's required -o is not asked.
    let matches = parse(&["testsub", "--x"]).expect("the subcommand");
    let (name, sub) = matches.subcommand().expect("a subcommand");
    assert_eq!(name, "testsub");
    assert!(sub.get_flag("x"));
    // A file named like the subcommand is an input after an option, or as ./NAME.
    for args in [
        &["-a", "0", "testsub", "b", "-o", "c"][..],
        &["./testsub", "b", "-a", "0", "-o", "c"],
        &["b", "testsub", "-a", "0", "-o", "c"],
    ] {
        let matches = parse(args).expect("a join");
        assert_eq!(matches.subcommand_name(), None, "{args:?}");
        let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).expect("a join");
        assert_eq!(cli.join.inputs.len(), 2, "{args:?}");
    }
    // The join's flags are not the subcommand's.
    assert!(parse(&["testsub", "-a", "0"]).is_err());
}

#[test]
fn backends_default_to_the_cpu_and_adapters_parse() {
    let cli = Cli::try_parse_from(["tjoin", "-a", "0", "a.npy", "-o", "b.npy"]).unwrap();
    assert_eq!(
        (cli.join.engine.backend, cli.join.engine.dml_adapter),
        (Backend::Cpu, None)
    );
    let cli = Cli::try_parse_from([
        "tjoin",
        "--backend",
        "auto",
        "--dml-adapter",
        "warp",
        "a.npy",
        "-o",
        "b.npy",
    ])
    .unwrap();
    assert_eq!(
        (cli.join.engine.backend, cli.join.engine.dml_adapter),
        (Backend::Auto, Some(Adapter::Warp))
    );
    assert!(Cli::try_parse_from(["tjoin", "--dml-adapter", "x", "a.npy", "-o", "b"]).is_err());
}

#[test]
fn a_file_list_replaces_positional_inputs() {
    let cli =
        Cli::try_parse_from(["tjoin", "-a", "0", "--files-from", "-", "-0", "-o", "-"]).unwrap();
    assert!(cli.join.inputs.is_empty() && cli.join.null);
    assert!(Cli::try_parse_from(["tjoin", "-a", "0", "-0", "a.npy", "-o", "x"]).is_err());
}

#[test]
fn shard_sizes_parse_as_huggingface_hub_reads_them_and_in_binary_units() {
    for (text, bytes) in [
        ("5GB", 5_000_000_000),
        ("1.5GB", 1_500_000_000),
        ("500MB", 500_000_000),
        ("100kb", 100_000),
        ("2 GiB", 2 << 30),
        ("64KiB", 65536),
        ("1TB", 1_000_000_000_000),
        ("1234", 1234),
        ("10B", 10),
    ] {
        assert_eq!(parse_size(text), Ok(bytes), "{text}");
    }
    for text in ["", "GB", "5XB", "-1GB", "1e400GB", "five GB"] {
        assert!(parse_size(text).is_err(), "{text}");
    }
}

#[test]
fn negative_axes_parse() {
    let cli = Cli::try_parse_from(["tjoin", "-a", "-1", "a.npy", "-o", "b.npy"]).unwrap();
    assert_eq!(cli.join.axis, Some(-1));
}

#[test]
fn shapes_parse_bare_bracketed_or_as_python_tuples() {
    for text in ["1,1,2,7", "[1, 1, 2, 7]", "(1, 1, 2, 7)", " [1,1,2,7] "] {
        assert_eq!(parse_shape(text), Ok(vec![1, 1, 2, 7]), "{text}");
    }
    assert_eq!(parse_shape("(7,)"), Ok(vec![7]));
    assert_eq!(parse_shape("[]"), Ok(vec![]));
    assert!(parse_shape("[1, x]").is_err());
    assert!(parse_shape("1,,2").is_err());
}

#[test]
fn dry_runs_need_no_output_and_shapes_split_on_commas() {
    let cli =
        Cli::try_parse_from(["tjoin", "--dry-run", "--expect-shape", "1,1,2,7", "a.npy"]).unwrap();
    assert_eq!(cli.join.expect_shape, Some(vec![1, 1, 2, 7]));
    assert_eq!(cli.join.inputs.len(), 1);
    assert!(Cli::try_parse_from(["tjoin", "-a", "0", "a.npy"]).is_err());
}
