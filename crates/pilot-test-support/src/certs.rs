//! Certificates for tests, made with the `openssl` command (installed by
//! `scripts/install-deps`): EC P-256 keys, valid for two days, written as
//! `NAME.pem` and `NAME-key.pem` in a directory the test owns.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Extensions of a server certificate for `localhost` and 127.0.0.1.
pub const SERVER: &str =
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n";

/// Extensions of a client certificate with no name.
pub const CLIENT: &str = "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n";

/// Extensions of a client certificate whose identity is the URI `uri`
/// (a SPIFFE id: `spiffe://cluster.local/ns/default/sa/app`).
pub fn client_with_uri(uri: &str) -> String {
    format!("subjectAltName=URI:{uri}\n{CLIENT}")
}

/// A certificate and its key.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// The private key (PEM).
    pub key: PathBuf,
}

/// Makes certificates in one directory.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Certificates go into `dir`.
    pub fn new(dir: &Path) -> Self {
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    /// A self-signed CA `NAME.pem` / `NAME-key.pem`.
    pub fn ca(&self, name: &str) -> std::io::Result<Pair> {
        let pair = self.pair(name);
        let subject = format!("/CN=pilot test {name}");
        let (key, cert) = (format!("{name}-key.pem"), format!("{name}.pem"));
        let mut args = vec!["req", "-x509"];
        args.extend(EC);
        args.extend(["-keyout", &key, "-out", &cert]);
        args.extend(["-days", "2", "-subj", &subject]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        self.openssl(&args)?;
        Ok(pair)
    }

    /// A certificate `NAME.pem` / `NAME-key.pem` signed by the CA `issuer`
    /// (made with [`Pki::ca`] in the same directory), with `extensions`
    /// (an OpenSSL extension file: [`SERVER`], [`CLIENT`], ...).
    pub fn leaf(&self, name: &str, issuer: &str, extensions: &str) -> std::io::Result<Pair> {
        let pair = self.pair(name);
        let (csr, ext) = (format!("{name}.csr"), format!("{name}.ext"));
        std::fs::write(self.dir.join(&ext), extensions)?;
        let subject = format!("/CN={name}");
        let key = format!("{name}-key.pem");
        let mut request = vec!["req"];
        request.extend(EC);
        request.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
        self.openssl(&request)?;
        let (ca, ca_key, cert) = (
            format!("{issuer}.pem"),
            format!("{issuer}-key.pem"),
            format!("{name}.pem"),
        );
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &cert,
            "-extfile",
            &ext,
        ])?;
        Ok(pair)
    }

    fn pair(&self, name: &str) -> Pair {
        Pair {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        }
    }

    fn openssl(&self, args: &[&str]) -> std::io::Result<()> {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .map_err(|e| std::io::Error::new(e.kind(), format!("openssl (run scripts/install-deps): {e}")))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            )))
        }
    }
}

const EC: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// A CA (`ca.pem`), a server certificate for 127.0.0.1 and `localhost`
/// (`server.pem`) and a client certificate (`client.pem`) signed by it.
#[derive(Debug, Clone)]
pub struct TestCerts {
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// The server's certificate, for IP 127.0.0.1 and `localhost`.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// The client's key.
    pub client_key: PathBuf,
}

impl TestCerts {
    /// Generates the certificates into `dir`.
    pub fn generate(dir: &Path) -> std::io::Result<Self> {
        let pki = Pki::new(dir);
        let ca = pki.ca("ca")?;
        let server = pki.leaf("server", "ca", SERVER)?;
        let client = pki.leaf("client", "ca", CLIENT)?;
        Ok(TestCerts {
            ca: ca.cert,
            server_cert: server.cert,
            server_key: server.key,
            client_cert: client.cert,
            client_key: client.key,
        })
    }
}
