//! The `tjoin` command: parse the arguments, run, report an error and choose the exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tjoin::cli::Cli::parse();
    match tjoin::run(&cli) {
        Ok(()) => ExitCode::from(tjoin::ExitCode::Success as u8),
        Err(error) => {
            eprintln!("{}{error}", tjoin::error::PREFIX);
            ExitCode::from(error.exit_code() as u8)
        }
    }
}
