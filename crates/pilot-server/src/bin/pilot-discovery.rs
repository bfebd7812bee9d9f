//! `pilot-discovery`: see `pilot-discovery --help` and the crate docs of
//! `pilot-server`.

use std::process::ExitCode;

use pilot_server::Args;

/// jemalloc returns the memory of finished pushes and departed proxies to
/// the system; glibc's allocator keeps much of it (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = match Args::parse_with_config(std::env::args().collect()) {
        Ok(args) => args,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("pilot-discovery: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(pilot_server::run(args, shutdown_signal(), |_| {}));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("pilot-discovery: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
