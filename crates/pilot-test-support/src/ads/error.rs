//! Why an ADS stream failed or ended other than with status OK.

use tonic::Code;

/// Why a stream failed or ended other than with status OK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The server ended the stream with this gRPC status.
    Status {
        /// The status code (never `Ok`).
        code: Code,
        /// The server's `grpc-message`, percent-decoded.
        message: String,
    },
    /// The connection or the stream failed otherwise (connect, I/O, the
    /// server's GOAWAY or RST_STREAM, a protocol error): what happened.
    Transport(String),
}

impl Error {
    /// The status code: the server's, or `Unavailable` when the transport
    /// failed (as a gRPC client reports a broken connection).
    pub fn code(&self) -> Code {
        match self {
            Error::Status { code, .. } => *code,
            Error::Transport(_) => Code::Unavailable,
        }
    }

    /// The server's message, or what failed.
    pub fn message(&self) -> &str {
        match self {
            Error::Status { message, .. } | Error::Transport(message) => message,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Status { code, message } => write!(f, "status {code:?}: {message}"),
            Error::Transport(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {}

/// An [`Error::Transport`] saying `what`.
pub(super) fn transport(what: impl Into<String>) -> Error {
    Error::Transport(what.into())
}
