//! Validate configuration files offline, as `pilotctl validate -f` will:
//! every error with its file, line, column and field path.
//!
//!     cargo run --example validate -- examples/bookinfo
//!     cargo run --example validate -- my-rules.yaml

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use pilot_api::istio;
use pilot_model::document;

fn main() -> ExitCode {
    let registry = istio::registry();
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: validate FILE_OR_DIRECTORY...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for path in paths {
        let path = Path::new(&path);
        let result = if path.is_dir() {
            document::read_dir(path, &registry)
        } else {
            match std::fs::read_to_string(path) {
                Ok(text) => document::parse(&path.display().to_string(), &text, &registry),
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    failed = true;
                    continue;
                }
            }
        };
        match result {
            Ok(objects) => {
                let mut out = std::io::stdout().lock();
                for object in objects {
                    // A closed pipe (`| head`) just ends the listing.
                    if writeln!(out, "ok  {}", object.key()).is_err() {
                        break;
                    }
                }
            }
            Err(errors) => {
                eprintln!("{errors}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
