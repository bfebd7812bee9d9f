//! `exportTo`: which namespaces see a service, a VirtualService or a
//! DestinationRule. `*` every namespace, `.` the object's own, `~` none
//! (service entries), a name that namespace; an empty list means the
//! mesh's default (pilot-discovery's `--default-export-to`, Istio's
//! `meshConfig.defaultServiceExportTo` and siblings), and an empty default
//! means `*`.
//!
//! ```
//! use pilot_api::networking::exported_to;
//! let public: Vec<String> = vec![];
//! assert!(exported_to(&public, "prod", &[], "test"));
//! let own = vec![".".to_string()];
//! assert!(exported_to(&own, "prod", &[], "prod"));
//! assert!(!exported_to(&own, "prod", &[], "test"));
//! let default = vec![".".to_string()];
//! assert!(!exported_to(&public, "prod", &default, "test"));
//! ```

/// True when an object of `owner_namespace` exported to `export_to` (empty:
/// `default`; both empty: everyone) is visible in `viewer_namespace`.
pub fn exported_to(
    export_to: &[String],
    owner_namespace: &str,
    default: &[String],
    viewer_namespace: &str,
) -> bool {
    let list = if export_to.is_empty() { default } else { export_to };
    if list.is_empty() {
        return true;
    }
    list.iter().any(|entry| match entry.as_str() {
        "*" => true,
        "." => owner_namespace == viewer_namespace,
        "~" => false,
        namespace => namespace == viewer_namespace,
    })
}

/// True when `export_to` (or, empty, `default`) exports to every namespace.
pub fn is_public(export_to: &[String], default: &[String]) -> bool {
    let list = if export_to.is_empty() { default } else { export_to };
    list.is_empty() || list.iter().any(|e| e == "*")
}

/// Checks an `exportTo` list that is not part of an object (a mesh-wide
/// default given as `name`, e.g. a flag) as an object's is checked: `.`,
/// `*` or namespaces, no duplicates, `*` alone. The error names `name` and
/// the offending entry.
///
/// ```
/// use pilot_api::networking::check_export_to_list;
/// assert!(check_export_to_list("--default-export-to", &[".".into()]).is_ok());
/// let error = check_export_to_list("--default-export-to", &["*".into(), "Bad_NS".into()]).unwrap_err();
/// assert!(error.contains("--default-export-to[1]"), "{error}");
/// ```
pub fn check_export_to_list(name: &str, list: &[String]) -> Result<(), String> {
    let mut errors = pilot_model::FieldErrors::new();
    super::checks::check_export_to(name, list, false, &mut errors);
    if errors.is_empty() {
        return Ok(());
    }
    Err(errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; "))
}
