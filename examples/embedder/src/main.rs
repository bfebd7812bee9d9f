//! pilot embedded in a program of its own: ADS from a directory of
//! configuration files and a JSON file of services, and the REST API over
//! the same files.
//!
//!     cargo run -p pilot-embedder-example -- CONFIG_DIR SERVICES_JSON [ADS_ADDRESS [REST_ADDRESS]]
//!
//! ADS_ADDRESS defaults to 127.0.0.1:15010, REST_ADDRESS to
//! 127.0.0.1:8080. Stops on Ctrl-C.

use std::path::PathBuf;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(config_dir), Some(services)) = (args.next(), args.next()) else {
        eprintln!("usage: pilot-embedder-example CONFIG_DIR SERVICES_JSON [ADS_ADDRESS [REST_ADDRESS]]");
        std::process::exit(2);
    };
    let xds_address = args.next().unwrap_or_else(|| "127.0.0.1:15010".into());
    let rest_address = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let xds = tokio::net::TcpListener::bind(&xds_address).await?;
    let rest = tokio::net::TcpListener::bind(&rest_address).await?;
    println!(
        "ADS on {}, REST API on http://{}",
        xds.local_addr()?,
        rest.local_addr()?
    );
    pilot_embedder_example::serve(
        &PathBuf::from(config_dir),
        &PathBuf::from(services),
        xds,
        rest,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await?;
    Ok(())
}
