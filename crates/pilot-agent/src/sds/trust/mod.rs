//! The mesh roots the agent trusts, and what it accepts from the CA.
//!
//! The agent pins the mesh's roots: the roots of a file the operator
//! gives ([`RootPinning::File`]), or, trusting on first use
//! ([`RootPinning::FirstUse`]), the first trust bundle the CA answered,
//! kept in a file of the agent's. An answer of the CA
//! (`IstioCertificateResponse.cert_chain`: the leaf, the intermediates one
//! PEM each, and last the trust bundle, signing root first) is served only
//! when `check_answer` accepts it:
//!
//! - every root of the bundle is pinned already (the same subject and
//!   public key), or is certified by a pinned root through a
//!   **cross-certificate** among the intermediates: the new root's subject
//!   and public key, issued and signed by the pinned root, valid now and a
//!   CA. The pinned set becomes the union (and is stored again when the
//!   agent keeps it);
//! - the leaf's public key is the agent's own (the CSR's), its only URI
//!   SAN is exactly the identity asked for, and it chains, directly or
//!   through the intermediates, to a pinned root.
//!
//! Anything else is refused, and the certificates served before stay
//! served.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use x509_parser::certificate::X509Certificate;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::time::ASN1Time;

use crate::AgentError;

/// Where the agent's pinned mesh roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootPinning {
    /// The roots of this PEM file (one or more CERTIFICATE blocks,
    /// `--mesh-root-file`), which the agent never writes: a rotation it
    /// accepts is pinned in memory, and the operator adds the new root to
    /// the file before the old one is retired.
    File(PathBuf),
    /// Trust on first use: the roots of this file the agent keeps
    /// (`--mesh-root-store`); when it does not exist yet, the first trust
    /// bundle the CA answers is pinned and written there. Every accepted
    /// rotation is written there too (mode 0600, replaced atomically).
    FirstUse(PathBuf),
}

impl RootPinning {
    /// The file the roots are read from.
    pub fn path(&self) -> &Path {
        match self {
            RootPinning::File(path) | RootPinning::FirstUse(path) => path,
        }
    }
}

/// The pinned roots, DER, in the order they were pinned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pinned {
    roots: Vec<Vec<u8>>,
}

impl Pinned {
    /// The roots `pinning` starts with: the file's; for trust on first use
    /// none when the file does not exist yet.
    pub(crate) fn load(pinning: &RootPinning) -> Result<Self, AgentError> {
        let path = pinning.path();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && matches!(pinning, RootPinning::FirstUse(_)) =>
            {
                return Ok(Pinned::default());
            }
            Err(e) => return Err(AgentError::file(path, e)),
        };
        let pinned = Pinned::from_pem(&text).map_err(|message| {
            let hint = match pinning {
                RootPinning::File(_) => "",
                RootPinning::FirstUse(_) => {
                    " (the agent's pinned roots; delete the file to trust on first use again)"
                }
            };
            AgentError::file(path, format!("{message}{hint}"))
        })?;
        Ok(pinned)
    }

    /// Roots from PEM text: at least one CERTIFICATE block, each a
    /// certificate.
    pub(crate) fn from_pem(text: &str) -> Result<Self, String> {
        let roots = certificates(text, "the mesh roots")?;
        for (index, der) in roots.iter().enumerate() {
            parse(der, &format!("the mesh roots: certificate {}", index + 1))?;
        }
        Ok(Pinned { roots })
    }

    /// Whether nothing is pinned yet (trust on first use, before the first
    /// answer).
    pub(crate) fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// How many roots are pinned.
    pub(crate) fn len(&self) -> usize {
        self.roots.len()
    }

    /// The roots, PEM, concatenated.
    pub(crate) fn to_pem(&self) -> String {
        self.roots.iter().map(|der| pem_of(der)).collect()
    }

    /// Writes the roots to `path` (mode 0600, through a temporary file
    /// renamed over it, so a crash leaves the old or the new set).
    pub(crate) fn store(&self, path: &Path) -> Result<(), AgentError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| AgentError::file(dir, e))?;
        }
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".new");
        let temporary = PathBuf::from(temporary);
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temporary)?;
            file.write_all(self.to_pem().as_bytes())?;
            file.sync_all()
        };
        write().map_err(|e| AgentError::file(&temporary, e))?;
        std::fs::rename(&temporary, path).map_err(|e| AgentError::file(path, e))
    }

    /// Adds `der` unless that very certificate is pinned.
    fn add(&mut self, der: &[u8]) {
        if !self.roots.iter().any(|root| root == der) {
            self.roots.push(der.to_vec());
        }
    }
}

/// An answer `check_answer` accepted: what to serve, and the roots
/// pinned from now on.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    /// The leaf and the intermediates, PEM (Envoy's certificate chain).
    pub(crate) chain_pem: String,
    /// The trust bundle, PEM (Envoy's validation context).
    pub(crate) bundle_pem: String,
    /// The pinned roots with the bundle's new ones.
    pub(crate) pinned: Pinned,
    /// The roots pinned by this answer (subject and serial), for the log.
    pub(crate) added: Vec<String>,
}

/// The public key (DER SubjectPublicKeyInfo) of a PEM certificate signing
/// request: the agent's own key, which the leaf must carry.
pub(crate) fn csr_public_key(csr_pem: &str) -> Result<Vec<u8>, String> {
    let der = single(csr_pem, "CERTIFICATE REQUEST", "the certificate signing request")?;
    let (_, csr) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("the certificate signing request: {e}"))?;
    Ok(csr.certification_request_info.subject_pki.raw.to_vec())
}

/// Checks an answer of the CA (`cert_chain`) against the pinned roots at
/// `now`, for the agent whose key is `own_key` (DER
/// SubjectPublicKeyInfo) and which asked for `identity` (a SPIFFE URI).
/// With nothing pinned (trust on first use) the bundle is pinned as it
/// is. The error says which element is refused and why.
pub(crate) fn check_answer(
    cert_chain: &[String],
    own_key: &[u8],
    identity: &str,
    pinned: &Pinned,
    now: SystemTime,
) -> Result<Accepted, String> {
    let [leaf_pem, rest @ ..] = cert_chain else {
        return Err(expected_shape(cert_chain.len()));
    };
    let [intermediate_pems @ .., bundle_pem] = rest else {
        return Err(expected_shape(cert_chain.len()));
    };
    let system_now = now;
    let now = asn1_time(now)?;
    let leaf_der = single(leaf_pem, "CERTIFICATE", "cert_chain[0] (the leaf)")?;
    let leaf = parse(&leaf_der, "cert_chain[0] (the leaf)")?;
    let intermediate_ders = intermediate_pems
        .iter()
        .enumerate()
        .map(|(index, pem)| {
            single(
                pem,
                "CERTIFICATE",
                &format!("cert_chain[{}] (an intermediate)", index + 1),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let intermediates = intermediate_ders
        .iter()
        .enumerate()
        .map(|(index, der)| parse(der, &format!("cert_chain[{}] (an intermediate)", index + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    let bundle_what = format!("cert_chain[{}] (the trust bundle)", cert_chain.len() - 1);
    let bundle_ders = certificates(bundle_pem, &bundle_what)?;
    let pinned_certs = pinned
        .roots
        .iter()
        .enumerate()
        .map(|(index, der)| parse(der, &format!("pinned root {}", index + 1)))
        .collect::<Result<Vec<_>, _>>()?;

    // The bundle: each root pinned, or certified by a pinned root.
    let mut after = pinned.clone();
    let mut added = Vec::new();
    for (index, der) in bundle_ders.iter().enumerate() {
        let root = parse(der, &format!("{bundle_what}: certificate {}", index + 1))?;
        if pinned.is_empty() {
            added.push(describe(&root));
        } else if pinned_certs.iter().any(|p| same_key_and_subject(p, &root)) {
            // Pinned already (perhaps as another certificate of that key).
        } else {
            cross_certified(&root, &intermediates, &pinned_certs, now).map_err(|why| {
                format!(
                    "{bundle_what}: certificate {}, root {}, is neither pinned nor cross-signed by a pinned root: {why}",
                    index + 1,
                    describe(&root)
                )
            })?;
            added.push(describe(&root));
        }
        after.add(der);
    }

    // The leaf: the agent's key, exactly the identity asked for, chained
    // to a pinned root.
    if leaf.public_key().raw != own_key {
        return Err(format!(
            "cert_chain[0] (the leaf {}) carries another public key than the agent's (its CSR's)",
            describe(&leaf)
        ));
    }
    let uris = uri_names(&leaf)?;
    if uris != [identity] {
        return Err(format!(
            "cert_chain[0] (the leaf) names the URIs {uris:?}, expected exactly [{identity:?}] (the identity asked for)"
        ));
    }
    let chain_pem: String = std::iter::once(&leaf_der)
        .chain(&intermediate_ders)
        .map(|der| pem_of(der))
        .collect();
    pilot_ca::verify_chain(std::slice::from_ref(&chain_pem), &after.to_pem(), system_now)
        .map_err(|e| format!("cert_chain[0] (the leaf) does not chain to a pinned root: {e}"))?;
    Ok(Accepted {
        chain_pem,
        bundle_pem: bundle_ders.iter().map(|der| pem_of(der)).collect(),
        pinned: after,
        added,
    })
}

/// Why `root` is not certified by a pinned root through one of
/// `intermediates`; `Ok` when one cross-certificate certifies it.
fn cross_certified(
    root: &X509Certificate<'_>,
    intermediates: &[X509Certificate<'_>],
    pinned: &[X509Certificate<'_>],
    now: ASN1Time,
) -> Result<(), String> {
    let mut reasons = Vec::new();
    for (index, cross) in intermediates.iter().enumerate() {
        if cross.subject().as_raw() != root.subject().as_raw() {
            continue;
        }
        let what = format!("cert_chain[{}]", index + 1);
        if cross.public_key().raw != root.public_key().raw {
            reasons.push(format!("{what} names its subject but carries another public key"));
            continue;
        }
        let signer = pinned.iter().find(|p| {
            p.subject().as_raw() == cross.issuer().as_raw()
                && cross.verify_signature(Some(p.public_key())).is_ok()
        });
        let Some(signer) = signer else {
            reasons.push(format!(
                "{what} (issuer {}) is not signed by a pinned root",
                cross.issuer()
            ));
            continue;
        };
        if !cross.validity().is_valid_at(now) {
            reasons.push(format!("{what} is not valid now"));
            continue;
        }
        if !is_ca(cross) {
            reasons.push(format!("{what} is not a CA certificate"));
            continue;
        }
        tracing::debug!(root = %describe(root), by = %describe(signer), "cross-signed root");
        return Ok(());
    }
    if reasons.is_empty() {
        reasons.push("no cross-certificate among the intermediates names it".into());
    }
    Err(reasons.join("; "))
}

fn same_key_and_subject(a: &X509Certificate<'_>, b: &X509Certificate<'_>) -> bool {
    a.subject().as_raw() == b.subject().as_raw() && a.public_key().raw == b.public_key().raw
}

fn is_ca(cert: &X509Certificate<'_>) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(constraints)) if constraints.value.ca)
}

/// The URI subject alternative names of `cert`.
fn uri_names<'a>(cert: &'a X509Certificate<'_>) -> Result<Vec<&'a str>, String> {
    let names = cert
        .subject_alternative_name()
        .map_err(|e| format!("cert_chain[0] (the leaf): subject alternative names: {e}"))?;
    Ok(names
        .map(|names| {
            names
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::URI(uri) => Some(*uri),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}

/// A certificate named for a log or an error: subject and serial.
fn describe(cert: &X509Certificate<'_>) -> String {
    format!(
        "{:?} (serial {})",
        cert.subject().to_string(),
        cert.raw_serial_as_string()
    )
}

fn expected_shape(count: usize) -> String {
    format!(
        "the CA answered {count} cert_chain elements, expected the leaf, any intermediates and the trust bundle last"
    )
}

/// Every CERTIFICATE block of `text` (DER); at least one, and no other
/// kind of block.
fn certificates(text: &str, what: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(text.as_bytes()) {
        let block = block.map_err(|e| format!("{what}: not PEM: {e}"))?;
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "{what}: a {} block, expected CERTIFICATE blocks only",
                block.label
            ));
        }
        out.push(block.contents);
    }
    if out.is_empty() {
        return Err(format!("{what}: no CERTIFICATE block"));
    }
    Ok(out)
}

/// The one `label` block of `text`.
fn single(text: &str, label: &str, what: &str) -> Result<Vec<u8>, String> {
    let mut blocks = Vec::new();
    for block in Pem::iter_from_buffer(text.as_bytes()) {
        let block = block.map_err(|e| format!("{what}: not PEM: {e}"))?;
        if block.label != label {
            return Err(format!("{what}: a {} block, expected {label}", block.label));
        }
        blocks.push(block.contents);
    }
    match blocks.len() {
        1 => Ok(blocks.remove(0)),
        count => Err(format!("{what}: {count} {label} blocks, expected one")),
    }
}

fn parse<'a>(der: &'a [u8], what: &str) -> Result<X509Certificate<'a>, String> {
    match X509Certificate::from_der(der) {
        Ok(([], cert)) => Ok(cert),
        Ok(_) => Err(format!("{what}: trailing bytes after the certificate")),
        Err(e) => Err(format!("{what}: not a certificate: {e}")),
    }
}

fn pem_of(der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der.to_vec()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

fn asn1_time(now: SystemTime) -> Result<ASN1Time, String> {
    let seconds = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| "the clock is before 1970".to_string())?
        .as_secs();
    ASN1Time::from_timestamp(i64::try_from(seconds).unwrap_or(i64::MAX))
        .map_err(|e| format!("the clock: {e}"))
}

#[cfg(test)]
mod tests;
