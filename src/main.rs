//! The `tjoin` command: parse the arguments, run, report an error and choose the exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = tjoin::cli::Cli::from_args();
    match tjoin::run(&cli) {
        Ok(()) => ExitCode::from(tjoin::ExitCode::Success as u8),
        // The reader of a pipe went away: stop quietly, but do not claim success.
        Err(error) if error.is_broken_pipe() => ExitCode::from(tjoin::ExitCode::Failure as u8),
        Err(error) => {
            let color = std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            tjoin::messages::eprintln_styled(&tjoin::error::render(&error, color));
            // A script that asked for the plan as JSON reads the refusal from stdout too;
            // should stdout fail, the status stays the refusal's.
            if cli.json_on_stdout() {
                let json = tjoin::error::to_json(&error);
                let _ = tjoin::messages::print_exact(&format!("{json}\n"));
            }
            ExitCode::from(error.exit_code() as u8)
        }
    }
}
