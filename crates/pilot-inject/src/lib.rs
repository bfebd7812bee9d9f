//! Sidecar injection, one code path for `pilotctl kube-inject` and
//! pilot-discovery's mutating admission webhook.
//!
//! - [`template`]: what is injected (images, discovery address, resources),
//!   from the mesh config file's `sidecarInjector` section, with defaults;
//! - [`pod`]: the decision (opt-out annotation, host network, already
//!   injected) and the injection of one pod spec: an init container running
//!   `pilot-agent iptables` with the ports and CIDRs of the pod's containers
//!   and `traffic.sidecar.istio.io/*` annotations, the sidecar running
//!   `pilot-agent proxy sidecar` as uid 1337, their volumes and a status
//!   annotation;
//! - [`workload`]: every workload kind (Pod, Deployment, StatefulSet,
//!   DaemonSet, ReplicaSet, Job, CronJob, List) and whole YAML or JSON
//!   files, with errors at file:line:col;
//! - [`admission`]: `AdmissionReview` v1 in, a JSONPatch out.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admission;
pub mod pod;
pub mod template;
pub mod workload;

pub use pod::{Decision, inject_pod};
pub use template::InjectTemplate;
pub use workload::{inject_object, inject_text};

/// What went wrong while injecting.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// An object is not a valid workload or carries a bad annotation. The
    /// message names the object and the field path; `location` adds the
    /// file, line and column when known.
    #[error("{location}{object}: {path}: {message}")]
    Invalid {
        /// `file:line:col: ` or empty.
        location: String,
        /// `Kind namespace/name` of the object.
        object: String,
        /// The field path, such as `.spec.template.spec.containers`.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The input is not YAML or JSON (the parser's errors, with positions).
    #[error("{0}")]
    Parse(#[from] pilot_model::document::DocumentErrors),
    /// The mesh config file is unreadable or wrong.
    #[error("{file}: {message}")]
    Template {
        /// The file.
        file: String,
        /// What is wrong, with the field path.
        message: String,
    },
}
