//! pilot embedded in a program of its own: ADS from a directory of
//! configuration files and a JSON file of services.
//!
//!     cargo run -p pilot-embedder-example -- CONFIG_DIR SERVICES_JSON [ADDRESS]
//!
//! ADDRESS defaults to 127.0.0.1:15010. Stops on Ctrl-C.

use std::path::PathBuf;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(config_dir), Some(services)) = (args.next(), args.next()) else {
        eprintln!("usage: pilot-embedder-example CONFIG_DIR SERVICES_JSON [ADDRESS]");
        std::process::exit(2);
    };
    let address = args.next().unwrap_or_else(|| "127.0.0.1:15010".into());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("ADS on {}", listener.local_addr()?);
    pilot_embedder_example::serve(
        &PathBuf::from(config_dir),
        &PathBuf::from(services),
        listener,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await?;
    Ok(())
}
