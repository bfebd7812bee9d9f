//! Where the server is and which token to use: `--server`, then
//! `PILOT_SERVER`, then the config file (`$PILOT_CONFIG`, or
//! `~/.config/pilot/config.yaml`), then `http://127.0.0.1:8080`; the token
//! from `--token` or the config file.

use std::path::PathBuf;

use crate::Failure;

/// The default server address.
pub(crate) const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// What the config file holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FileSettings {
    /// `server:`.
    pub server: Option<String>,
    /// `token:`.
    pub token: Option<String>,
    /// `ca-file:`.
    pub ca_file: Option<PathBuf>,
}

/// The config file's path.
pub(crate) fn config_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PILOT_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("pilot").join("config.yaml"))
}

/// Reads the config file; a missing file is empty settings.
pub(crate) fn read_file(path: &std::path::Path) -> Result<FileSettings, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileSettings::default()),
        Err(e) => return Err(Failure::usage(format!("cannot read {}: {e}", path.display()))),
    };
    let source = path.display().to_string();
    let values =
        pilot_model::document::parse_values(&source, &text).map_err(|e| Failure::usage(e.to_string()))?;
    let mut settings = FileSettings::default();
    let Some(value) = values.into_iter().next() else {
        return Ok(settings);
    };
    let serde_json::Value::Object(map) = value else {
        return Err(Failure::usage(format!(
            "{source}: expected a mapping (server:, token:, ca-file:)"
        )));
    };
    for (key, value) in map {
        let text = match value {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        match key.as_str() {
            "server" => settings.server = Some(text),
            "token" => settings.token = Some(text),
            "ca-file" => settings.ca_file = Some(PathBuf::from(text)),
            other => {
                return Err(Failure::usage(format!(
                    "{source}: unknown setting {other:?}; known: server, token, ca-file"
                )));
            }
        }
    }
    Ok(settings)
}
