//! Kinds: their schema (names and validation) and the registry that holds the
//! kinds a process knows.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{decode_all, lists_for_objects};
use crate::proto_names::{path_as_written, use_json_names};
use crate::{ConfigKey, DynConfig, FieldError, FieldErrors, StoreError};

/// Ties a Rust type to a kind: its names and its validation.
///
/// ```
/// use pilot_model::{ConfigKind, FieldErrors, KindRegistry};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, Serialize, Deserialize)]
/// struct Greeting { text: String }
///
/// impl ConfigKind for Greeting {
///     const KIND: &'static str = "Greeting";
///     const PLURAL: &'static str = "greetings";
///     const GROUP: &'static str = "example.com";
///     const VERSION: &'static str = "v1";
///     fn validate(&self, errors: &mut FieldErrors) {
///         if self.text.is_empty() {
///             errors.push("spec.text", "must not be empty");
///         }
///     }
/// }
///
/// let registry = KindRegistry::new();
/// registry.register::<Greeting>().unwrap();
/// assert_eq!(registry.get("Greeting").unwrap().plural, "greetings");
/// ```
pub trait ConfigKind: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// The kind's name, e.g. `RouteRule`.
    const KIND: &'static str;
    /// The plural resource name, e.g. `route-rules` or `routerules`.
    const PLURAL: &'static str;
    /// The API group, e.g. `config.istio.io`.
    const GROUP: &'static str;
    /// The API version objects are stored at, e.g. `v1alpha2`.
    const VERSION: &'static str;
    /// Further versions served with the same schema (objects written at
    /// one are stored at [`ConfigKind::VERSION`]: only `apiVersion`
    /// changes), e.g. `["v1beta1", "v1alpha3"]`.
    const SERVED_VERSIONS: &'static [&'static str] = &[];
    /// Short names clients accept for the kind, e.g. `["vs"]`; none derives
    /// them from the kind's name ([`KindSchema::short_names`]).
    const SHORT_NAMES: &'static [&'static str] = &[];
    /// Whether an object's name must be a DNS-1123 label (no dots), not
    /// only a subdomain: Istio's rule for kinds others name as
    /// `name.namespace` (Gateway).
    const NAME_IS_LABEL: bool = false;
    /// Whether the kind is named by `Kind.group` ([`KindSchema::id`]) in
    /// keys, in the registry and in stores, rather than by its bare name:
    /// for kinds whose name a kind of another group also has, such as the
    /// Gateway API's `Gateway` beside Istio's. Documents still write the
    /// bare `kind` and the group in `apiVersion`.
    const QUALIFIED: bool = false;
    /// The categories the kind belongs to ([`KindSchema::categories`]).
    const CATEGORIES: &'static [&'static str] = &[];
    /// Whether another project defines the kind and installs its
    /// definition (its CRD on Kubernetes), as the Gateway API does for its
    /// kinds ([`KindSchema::defined_elsewhere`]).
    const DEFINED_ELSEWHERE: bool = false;
    /// Whether [`ConfigKind::validate_update`] has rules: stores then read
    /// the object an update replaces to check them
    /// ([`KindRegistry::check_update`]).
    const TRANSITION_RULES: bool = false;
    /// Whether the kind's objects belong to no namespace, as Kubernetes'
    /// cluster-scoped resources (a Gateway API GatewayClass): their keys'
    /// namespace is empty ([`KindSchema::cluster_scoped`]).
    const CLUSTER_SCOPED: bool = false;

    /// The kind's id: [`ConfigKind::KIND`], or `Kind.group` when
    /// [`ConfigKind::QUALIFIED`].
    fn id() -> std::borrow::Cow<'static, str> {
        if Self::QUALIFIED {
            std::borrow::Cow::Owned(format!("{}.{}", Self::KIND, Self::GROUP))
        } else {
            std::borrow::Cow::Borrowed(Self::KIND)
        }
    }

    /// Records every problem with this spec. Paths start at `spec`.
    fn validate(&self, errors: &mut FieldErrors) {
        let _ = errors;
    }

    /// Served versions whose rules differ from the storage version's, as a
    /// CRD's versions may each have their own schema (the Gateway API's
    /// TLSRoute at `v1alpha2` allows what `v1` refuses): an object written
    /// at one is validated by [`ConfigKind::validate_at`] with it.
    const VERSIONED_RULES: &'static [&'static str] = &[];

    /// Records every problem with this spec written at `version`, one of
    /// [`ConfigKind::VERSIONED_RULES`]. Paths start at `spec`. Without an
    /// override, [`ConfigKind::validate`].
    fn validate_at(&self, version: &str, errors: &mut FieldErrors) {
        let _ = version;
        self.validate(errors)
    }

    /// Records every change from `old` (the stored spec) that this spec,
    /// replacing it, may not make: Kubernetes' transition rules
    /// (`self == oldSelf`), such as an immutable field. Checked on update
    /// only, after [`ConfigKind::validate`] passed; set
    /// [`ConfigKind::TRANSITION_RULES`] for it to be called. Paths start
    /// at `spec`.
    fn validate_update(&self, old: &Self, errors: &mut FieldErrors) {
        let _ = (old, errors);
    }

    /// The OpenAPI v3 schema of the spec, when the kind has one (the Istio
    /// kinds do with feature `schema`); platforms that publish schemas
    /// (Kubernetes CRDs) use it.
    fn openapi_schema() -> Option<serde_json::Value> {
        None
    }

    /// The OpenAPI v3 schema of the spec written at `version`, one of the
    /// versions served, where the versions' schemas differ (a CRD whose
    /// versions bound a list differently). Without an override,
    /// [`ConfigKind::openapi_schema`].
    fn openapi_schema_at(version: &str) -> Option<serde_json::Value> {
        let _ = version;
        Self::openapi_schema()
    }

    /// The schema of this kind, for a [`KindRegistry`].
    fn schema() -> KindSchema {
        let schema = KindSchema::new(
            Self::KIND,
            Self::PLURAL,
            Self::GROUP,
            Self::VERSION,
            |spec, errors| check_spec::<Self>(spec, errors, None),
        )
        .with_normalizer(|spec| {
            // Only a key with an underscore can be a proto name.
            if !crate::proto_names::has_underscore_key(spec) {
                return;
            }
            let Ok(typed) = crate::config::decode_spec::<Self>(spec) else {
                return;
            };
            if let Ok(canonical) = serde_json::to_value(&typed) {
                use_json_names(spec, &canonical);
            }
        })
        .with_served_versions(Self::SERVED_VERSIONS.iter().copied())
        .with_short_names(Self::SHORT_NAMES.iter().copied())
        .with_categories(Self::CATEGORIES.iter().copied());
        let schema = Self::VERSIONED_RULES.iter().fold(schema, |schema, version| {
            schema.with_version_rules(*version, move |spec, errors| {
                check_spec::<Self>(spec, errors, Some(version))
            })
        });
        let schema = if Self::NAME_IS_LABEL {
            schema.with_label_names()
        } else {
            schema
        };
        let schema = if Self::QUALIFIED {
            schema.with_qualified_id()
        } else {
            schema
        };
        let schema = if Self::DEFINED_ELSEWHERE {
            schema.with_definition_elsewhere()
        } else {
            schema
        };
        let schema = if Self::CLUSTER_SCOPED {
            schema.with_cluster_scope()
        } else {
            schema
        };
        let schema = if Self::TRANSITION_RULES {
            schema.with_transition_rules(|old, new, errors| {
                // Both specs passed validation (the old one when it was
                // stored): a spec that no longer decodes (a kind's schema
                // changed since) has no rule to break.
                let (Ok(old), Ok(new)) = (
                    crate::config::decode_spec::<Self>(old),
                    crate::config::decode_spec::<Self>(new),
                ) else {
                    return;
                };
                new.validate_update(&old, errors);
            })
        } else {
            schema
        };
        let Some(openapi) = Self::openapi_schema_at(Self::VERSION) else {
            return schema;
        };
        let mut schema = schema;
        for version in Self::SERVED_VERSIONS {
            match Self::openapi_schema_at(version) {
                Some(at) if at != openapi => schema = schema.with_openapi_schema_at(version, at),
                _ => {}
            }
        }
        schema.with_openapi_schema(openapi)
    }
}

/// Decodes `spec` as `K` and records its problems: unknown or mistyped
/// fields, duplicate keys of list maps, and `K`'s rules (at `version`
/// when given, [`ConfigKind::validate_at`]), each at its path as written.
fn check_spec<K: ConfigKind>(spec: &serde_json::Value, errors: &mut FieldErrors, version: Option<&str>) {
    let (typed, found) = decode_all::<K>("spec", spec);
    // Unknown fields are reported beside the rule errors of the rest of
    // the spec. A spec that lost a mistyped value in repair would give
    // misleading rule errors: only its decode errors are reported.
    let rules_apply = found.iter().all(|e| e.message.starts_with("unknown field"));
    errors.extend(found);
    let typed = match typed {
        Some(typed) if rules_apply => {
            let canonical = serde_json::to_value(&typed).unwrap_or_default();
            let lists = lists_for_objects("spec", spec, &canonical);
            let clean = lists.is_empty();
            errors.extend(lists);
            clean.then_some(typed)
        }
        _ => None,
    };
    let Some(typed) = typed else {
        return;
    };
    // Rules name fields by their JSON names; the input may have written
    // some with their proto names.
    let mut rules = FieldErrors::new();
    match version {
        Some(version) => typed.validate_at(version, &mut rules),
        None => typed.validate(&mut rules),
    }
    let as_written = |mut error: FieldError| {
        if let Some(below) = error.path.strip_prefix("spec") {
            error.path = format!("spec{}", path_as_written(below, spec));
        }
        error
    };
    let (found, warnings) = rules.into_parts();
    errors.extend(found.into_iter().map(as_written));
    for warning in warnings.into_iter().map(as_written) {
        errors.warn(warning.path, warning.message);
    }
}

/// A function that records every problem with a kind's spec.
pub type SpecValidator = dyn Fn(&serde_json::Value, &mut FieldErrors) + Send + Sync;

/// A function that records every change from a stored spec (the first
/// argument) that a spec replacing it (the second) may not make.
pub type TransitionValidator = dyn Fn(&serde_json::Value, &serde_json::Value, &mut FieldErrors) + Send + Sync;

/// What the store needs to know about a kind: its names and how to validate
/// a spec given as JSON.
///
/// A kind is stored at one version ([`KindSchema::version`]) and may be
/// served at further versions with the same schema
/// ([`KindSchema::versions`]); an object written at any served version is
/// stored at the storage version, only its `apiVersion` changed, as
/// Kubernetes does for a CRD with `conversion: None`.
///
/// ```
/// use pilot_model::KindSchema;
/// let schema = KindSchema::new("Route", "routes", "example.com", "v1", |_, _| {})
///     .with_served_versions(["v1beta1"])
///     .with_short_names(["rt"]);
/// assert_eq!(schema.versions, ["v1", "v1beta1"]);
/// assert!(schema.serves("v1beta1") && !schema.serves("v2"));
/// assert_eq!(schema.short_names, ["rt"]);
/// ```
#[derive(Clone)]
pub struct KindSchema {
    /// The kind's id: what keys ([`ConfigKey::kind`](crate::ConfigKey)),
    /// objects' [`ConfigMeta::kind`](crate::ConfigMeta) and the registry
    /// name it by. The kind's name for most kinds; `Kind.group` for a kind
    /// registered [qualified](KindSchema::with_qualified_id), so that two
    /// groups' kinds of one name (Istio's `Gateway` and the Gateway API's)
    /// live side by side.
    pub id: String,
    /// The kind's name as documents write it, e.g. `RouteRule`.
    pub kind: String,
    /// The plural resource name.
    pub plural: String,
    /// The API group.
    pub group: String,
    /// The storage version: objects are stored, and listed by stores, at
    /// this version.
    pub version: String,
    /// Every version served, the storage version first.
    pub versions: Vec<String>,
    /// Short names clients accept for the kind (e.g. `vs`); empty when
    /// clients derive them from the kind's name.
    pub short_names: Vec<String>,
    /// Whether names must be DNS-1123 labels (no dots).
    pub label_names: bool,
    /// The categories the kind belongs to (Kubernetes' `categories`: what
    /// `kubectl get <category>` lists), e.g. `gateway-api`.
    pub categories: Vec<String>,
    /// Another project defines the kind and installs its definition (the
    /// Gateway API's CRDs): pilot serves and validates it but does not own
    /// its definition (pilot-store-k8s installs it only where it is
    /// missing, and never changes one that is there).
    pub defined_elsewhere: bool,
    /// The kind's objects belong to no namespace (Kubernetes' cluster
    /// scope): their keys' namespace is empty, a namespace written on one
    /// is dropped ([`KindSchema::fill_type`]), as kube-apiserver drops it,
    /// and the REST API serves them at `/apis/{group}/{version}/{plural}`.
    pub cluster_scoped: bool,
    validator: Arc<SpecValidator>,
    /// The validators of served versions with rules of their own.
    versioned: Vec<(String, Arc<SpecValidator>)>,
    transition: Option<Arc<TransitionValidator>>,
    normalizer: Option<Arc<SpecNormalizer>>,
    openapi: Option<Arc<serde_json::Value>>,
    /// The schemas of served versions whose schema is not `openapi`'s.
    openapi_versions: Vec<(String, Arc<serde_json::Value>)>,
}

/// A function that rewrites a valid spec into the form it is stored in
/// (fields written with protobuf's proto names get their JSON names).
pub type SpecNormalizer = dyn Fn(&mut serde_json::Value) + Send + Sync;

impl KindSchema {
    /// A schema for a kind known only at run time.
    pub fn new(
        kind: impl Into<String>,
        plural: impl Into<String>,
        group: impl Into<String>,
        version: impl Into<String>,
        validator: impl Fn(&serde_json::Value, &mut FieldErrors) + Send + Sync + 'static,
    ) -> Self {
        let version = version.into();
        let kind = kind.into();
        KindSchema {
            id: kind.clone(),
            kind,
            plural: plural.into(),
            group: group.into(),
            versions: vec![version.clone()],
            version,
            short_names: Vec::new(),
            label_names: false,
            categories: Vec::new(),
            defined_elsewhere: false,
            cluster_scoped: false,
            validator: Arc::new(validator),
            versioned: Vec::new(),
            transition: None,
            normalizer: None,
            openapi: None,
            openapi_versions: Vec::new(),
        }
    }

    /// The same schema, its id `Kind.group` rather than its bare name
    /// ([`KindSchema::id`]).
    ///
    /// ```
    /// use pilot_model::KindSchema;
    /// let schema = KindSchema::new("Gateway", "gateways", "gateway.networking.k8s.io", "v1", |_, _| {})
    ///     .with_qualified_id();
    /// assert_eq!(schema.id, "Gateway.gateway.networking.k8s.io");
    /// assert_eq!(pilot_model::kind_name(&schema.id), "Gateway");
    /// ```
    pub fn with_qualified_id(mut self) -> Self {
        self.id = format!("{}.{}", self.kind, self.group);
        self
    }

    /// True when the schema's id is qualified by its group.
    pub fn is_qualified(&self) -> bool {
        self.id != self.kind
    }

    /// The same schema, its definition another project's
    /// ([`KindSchema::defined_elsewhere`]).
    pub fn with_definition_elsewhere(mut self) -> Self {
        self.defined_elsewhere = true;
        self
    }

    /// The same schema, its objects in no namespace
    /// ([`KindSchema::cluster_scoped`]).
    pub fn with_cluster_scope(mut self) -> Self {
        self.cluster_scoped = true;
        self
    }

    /// The same schema in these categories (Kubernetes' `categories`).
    pub fn with_categories<C: Into<String>>(mut self, categories: impl IntoIterator<Item = C>) -> Self {
        self.categories = categories.into_iter().map(Into::into).collect();
        self
    }

    /// The same schema, its objects' names DNS-1123 labels (no dots).
    pub fn with_label_names(mut self) -> Self {
        self.label_names = true;
        self
    }

    /// The same schema with transition rules: what an update may not
    /// change in the spec it replaces ([`KindSchema::validate_update`]).
    pub fn with_transition_rules(
        mut self,
        rules: impl Fn(&serde_json::Value, &serde_json::Value, &mut FieldErrors) + Send + Sync + 'static,
    ) -> Self {
        self.transition = Some(Arc::new(rules));
        self
    }

    /// True when the kind has transition rules: a store's update reads the
    /// object it replaces to check them.
    pub fn has_transition_rules(&self) -> bool {
        self.transition.is_some()
    }

    /// Checks an update: `new` (already [validated](KindSchema::validate))
    /// replacing `old`, the object stored. Every change a transition rule
    /// forbids is reported with its field path. Always passes for a kind
    /// without transition rules.
    ///
    /// ```
    /// use pilot_model::{ConfigMeta, DynConfig, KindSchema, StoreError};
    /// let schema = KindSchema::new("Class", "classes", "example.com", "v1", |_, _| {})
    ///     .with_transition_rules(|old, new, errors| {
    ///         if old["controller"] != new["controller"] {
    ///             errors.push("spec.controller", "Value is immutable");
    ///         }
    ///     });
    /// let object = |controller: &str| DynConfig {
    ///     meta: ConfigMeta::new("Class", "default", "c"),
    ///     spec: serde_json::json!({"controller": controller}),
    /// };
    /// assert!(schema.validate_update(&object("a"), &object("a")).is_ok());
    /// let Err(StoreError::Invalid { errors, .. }) = schema.validate_update(&object("a"), &object("b")) else {
    ///     panic!("a changed controller is refused")
    /// };
    /// assert_eq!(errors[0].path, "spec.controller");
    /// ```
    pub fn validate_update(&self, old: &DynConfig, new: &DynConfig) -> Result<(), StoreError> {
        let Some(rules) = &self.transition else {
            return Ok(());
        };
        let mut errors = FieldErrors::new();
        rules(&old.spec, &new.spec, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Invalid {
                key: new.key(),
                errors: errors.into_vec(),
            })
        }
    }

    /// The same schema, storing valid specs as `normalizer` rewrites them.
    pub fn with_normalizer(
        mut self,
        normalizer: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
    ) -> Self {
        self.normalizer = Some(Arc::new(normalizer));
        self
    }

    /// The same schema also served at `versions` (after the storage
    /// version; repeats are ignored).
    pub fn with_served_versions<V: Into<String>>(mut self, versions: impl IntoIterator<Item = V>) -> Self {
        for version in versions {
            let version = version.into();
            if !self.versions.contains(&version) {
                self.versions.push(version);
            }
        }
        self
    }

    /// The same schema, objects written at `version` (a served version)
    /// validated by `validator` rather than the storage version's, as a
    /// CRD whose versions each have a schema of their own. They are stored
    /// at the storage version all the same, as Kubernetes stores them
    /// (`conversion: None`): a stored object is valid when one served
    /// version accepts it ([`KindSchema::validate_stored`]).
    ///
    /// ```
    /// use pilot_model::{ConfigMeta, DynConfig, KindSchema};
    /// let at_most = |n: usize| {
    ///     move |spec: &serde_json::Value, errors: &mut pilot_model::FieldErrors| {
    ///         if spec["rules"].as_array().is_some_and(|r| r.len() > n) {
    ///             errors.push("spec.rules", format!("at most {n}"));
    ///         }
    ///     }
    /// };
    /// let schema = KindSchema::new("Route", "routes", "example.com", "v1", at_most(1))
    ///     .with_served_versions(["v1alpha2"])
    ///     .with_version_rules("v1alpha2", at_most(16));
    /// let mut route = DynConfig {
    ///     meta: ConfigMeta::new("Route", "default", "r"),
    ///     spec: serde_json::json!({"rules": [{}, {}]}),
    /// };
    /// route.meta.version = "v1".into();
    /// assert!(schema.validate(&route).is_err());
    /// route.meta.version = "v1alpha2".into();
    /// assert!(schema.validate(&route).is_ok());
    /// // Stored at v1, it stays valid: v1alpha2 accepts it.
    /// route.meta.version = "v1".into();
    /// assert!(schema.validate_stored(&route).is_ok());
    /// ```
    pub fn with_version_rules(
        mut self,
        version: impl Into<String>,
        validator: impl Fn(&serde_json::Value, &mut FieldErrors) + Send + Sync + 'static,
    ) -> Self {
        let version = version.into();
        self.versioned.retain(|(v, _)| *v != version);
        self.versioned.push((version, Arc::new(validator)));
        self
    }

    /// Whether objects written at `version` have rules of their own
    /// ([`KindSchema::with_version_rules`]).
    pub fn has_version_rules(&self, version: &str) -> bool {
        self.versioned.iter().any(|(v, _)| v == version)
    }

    /// The validator of objects written at `version`.
    fn validator_at(&self, version: &str) -> &SpecValidator {
        self.versioned
            .iter()
            .find(|(v, _)| v == version)
            .map_or(&*self.validator, |(_, validator)| &**validator)
    }

    /// The same schema with these short names.
    pub fn with_short_names<N: Into<String>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.short_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// True when `version` is one of the versions served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// The same schema with an OpenAPI v3 schema of the spec.
    pub fn with_openapi_schema(mut self, schema: serde_json::Value) -> Self {
        self.openapi = Some(Arc::new(schema));
        self
    }

    /// The same schema with `schema` as the OpenAPI v3 schema of the spec
    /// written at `version` (a served version whose schema is not the
    /// others').
    pub fn with_openapi_schema_at(mut self, version: &str, schema: serde_json::Value) -> Self {
        self.openapi_versions.retain(|(v, _)| v != version);
        self.openapi_versions
            .push((version.to_string(), Arc::new(schema)));
        self
    }

    /// The OpenAPI v3 schema of the spec at [`KindSchema::version`], if
    /// the kind has one.
    pub fn openapi_schema(&self) -> Option<&serde_json::Value> {
        self.openapi_schema_at(&self.version)
    }

    /// The OpenAPI v3 schema of the spec written at `version`, if the
    /// kind has one.
    pub fn openapi_schema_at(&self, version: &str) -> Option<&serde_json::Value> {
        self.openapi_versions
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, schema)| &**schema)
            .or(self.openapi.as_deref())
    }

    /// The warnings of a valid `config`'s spec ([`FieldErrors::warn`]):
    /// what is accepted but will not happen. Empty for an invalid one
    /// (its errors say more).
    pub fn warnings(&self, config: &DynConfig) -> Vec<FieldError> {
        let mut errors = FieldErrors::new();
        self.validator_at(&config.meta.version)(&config.spec, &mut errors);
        if !errors.is_empty() {
            return Vec::new();
        }
        errors.into_parts().1
    }

    /// Checks a whole object against this kind: metadata (DNS-1123 name and
    /// namespace, label syntax, group and version) and the spec, by the
    /// rules of the version it is written at (its `apiVersion`,
    /// [`KindSchema::with_version_rules`]). Every problem is reported with
    /// its field path.
    pub fn validate(&self, config: &DynConfig) -> Result<(), StoreError> {
        self.validate_spec_with(config, self.validator_at(&config.meta.version))
    }

    /// Checks an object read from a store: valid when [`KindSchema::validate`]
    /// passes at one of the versions served. An object written at a
    /// version with rules of its own is stored at the storage version,
    /// whose rules may refuse it (a TLSRoute of several rules written at
    /// `v1alpha2`); the errors reported are the storage version's.
    pub fn validate_stored(&self, config: &DynConfig) -> Result<(), StoreError> {
        let first = self.validate_spec_with(config, &*self.validator);
        if first.is_err() {
            for (_, validator) in &self.versioned {
                if self.validate_spec_with(config, &**validator).is_ok() {
                    return Ok(());
                }
            }
        }
        first
    }

    fn validate_spec_with(&self, config: &DynConfig, validator: &SpecValidator) -> Result<(), StoreError> {
        let meta = &config.meta;
        let mut errors = FieldErrors::new();
        if meta.kind != self.id && meta.kind != self.kind {
            errors.push(
                "kind",
                format!("expected {}, found {}", self.kind, kind_name(&meta.kind)),
            );
        }
        if !meta.group.is_empty() && meta.group != self.group {
            errors.push(
                "apiVersion",
                format!(
                    "group {:?} does not serve {}; expected {:?}",
                    meta.group, self.kind, self.group
                ),
            );
        }
        if !meta.version.is_empty() && !self.serves(&meta.version) {
            errors.push(
                "apiVersion",
                format!(
                    "version {:?} of {} is not served; expected {}",
                    meta.version,
                    self.kind,
                    self.versions
                        .iter()
                        .map(|v| format!("{v:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            );
        }
        if self.label_names {
            errors.check_dns1123_label("metadata.name", &meta.name);
        } else {
            errors.check_dns1123_subdomain("metadata.name", &meta.name);
        }
        if self.cluster_scoped {
            if !meta.namespace.is_empty() {
                errors.push(
                    "metadata.namespace",
                    format!("a {} is cluster-scoped: it has no namespace", self.kind),
                );
            }
        } else {
            errors.check_dns1123_label("metadata.namespace", &meta.namespace);
        }
        errors.check_labels("metadata.labels", &meta.labels);
        validator(&config.spec, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Invalid {
                key: config.key(),
                errors: errors.into_vec(),
            })
        }
    }

    /// Names the object by the kind's [id](KindSchema::id), drops the
    /// namespace of a cluster-scoped kind's object, fills an empty
    /// group or version in from the schema, and moves an
    /// object of another served version to the storage version (the
    /// schemas are the same: only the version changes). An unserved
    /// version is left for [`KindSchema::validate`] to refuse.
    pub fn fill_type(&self, config: &mut DynConfig) {
        if self.cluster_scoped {
            // As kube-apiserver does for a cluster-scoped resource: a
            // namespace written (or defaulted by a client) is dropped.
            config.meta.namespace.clear();
        }
        if config.meta.kind == self.kind && (config.meta.group.is_empty() || config.meta.group == self.group)
        {
            config.meta.kind = self.id.clone();
        }
        if config.meta.group.is_empty() {
            config.meta.group = self.group.clone();
        }
        if config.meta.version.is_empty()
            || (config.meta.group == self.group && self.serves(&config.meta.version))
        {
            config.meta.version = self.version.clone();
        }
    }
}

impl fmt::Debug for KindSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KindSchema")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("plural", &self.plural)
            .field("group", &self.group)
            .field("version", &self.version)
            .field("versions", &self.versions)
            .field("short_names", &self.short_names)
            .field("categories", &self.categories)
            .field("defined_elsewhere", &self.defined_elsewhere)
            .field("cluster_scoped", &self.cluster_scoped)
            .finish_non_exhaustive()
    }
}

/// The kinds a process knows, by [id](KindSchema::id). Cheap to clone; clones share the same
/// kinds, so a kind registered later is seen by every store built on it.
#[derive(Clone, Default, Debug)]
pub struct KindRegistry {
    kinds: Arc<RwLock<HashMap<String, Arc<KindSchema>>>>,
}

impl KindRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the typed kind `K`.
    pub fn register<K: ConfigKind>(&self) -> Result<(), StoreError> {
        self.register_schema(K::schema())
    }

    /// Registers a kind described at run time. Registering an id twice, or
    /// a kind of a group that already has a kind of that name, is an error
    /// ([`StoreError::KindAlreadyRegistered`]).
    pub fn register_schema(&self, schema: KindSchema) -> Result<(), StoreError> {
        let mut kinds = self
            .kinds
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let taken = kinds.contains_key(&schema.id)
            || kinds
                .values()
                .any(|other| other.kind == schema.kind && other.group == schema.group);
        if taken {
            return Err(StoreError::KindAlreadyRegistered { kind: schema.id });
        }
        kinds.insert(schema.id.clone(), Arc::new(schema));
        Ok(())
    }

    /// The schema of `kind`: the kind of that [id](KindSchema::id), else
    /// the one kind of that name (a qualified kind is found by its bare
    /// name while no other kind has it: `HTTPRoute` finds
    /// `HTTPRoute.gateway.networking.k8s.io`, `Gateway` finds Istio's).
    ///
    /// ```
    /// use pilot_model::{KindRegistry, KindSchema};
    /// let registry = KindRegistry::new();
    /// registry.register_schema(KindSchema::new("Gateway", "gateways", "networking.istio.io", "v1", |_, _| {})).unwrap();
    /// for kind in ["Gateway", "HTTPRoute"] {
    ///     let schema = KindSchema::new(kind, "x", "gateway.networking.k8s.io", "v1", |_, _| {});
    ///     registry.register_schema(schema.with_qualified_id()).unwrap();
    /// }
    /// assert_eq!(registry.get("Gateway").unwrap().group, "networking.istio.io");
    /// assert_eq!(registry.get("HTTPRoute").unwrap().id, "HTTPRoute.gateway.networking.k8s.io");
    /// assert_eq!(registry.resolve("Gateway", "gateway.networking.k8s.io").unwrap().id, "Gateway.gateway.networking.k8s.io");
    /// ```
    pub fn get(&self, kind: &str) -> Option<Arc<KindSchema>> {
        let kinds = self.read();
        if let Some(schema) = kinds.get(kind) {
            return Some(schema.clone());
        }
        let mut named = kinds.values().filter(|schema| schema.kind == kind);
        match (named.next(), named.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => None,
        }
    }

    /// The schema of the kind a document names by `kind` (a name or an
    /// id) and `group` (its `apiVersion`'s; empty when it has none): the
    /// kind of that name in that group, else [`KindRegistry::get`] (whose
    /// schema then refuses the group in [`KindSchema::validate`]).
    pub fn resolve(&self, kind: &str, group: &str) -> Option<Arc<KindSchema>> {
        if !group.is_empty() {
            let kinds = self.read();
            let in_group = kinds
                .values()
                .find(|schema| schema.group == group && (schema.kind == kind || schema.id == kind));
            if let Some(schema) = in_group {
                return Some(schema.clone());
            }
        }
        self.get(kind)
    }

    /// Names `config` by its kind's [id](KindSchema::id) when its kind and
    /// group resolve ([`KindRegistry::resolve`]); for objects read from a
    /// document, which writes the bare kind. A cluster-scoped kind's
    /// object loses any namespace (one stored before its kind was, as
    /// a GatewayClass once was namespaced). Returns the schema.
    pub fn identify(&self, config: &mut DynConfig) -> Option<Arc<KindSchema>> {
        let schema = self.resolve(&config.meta.kind, &config.meta.group)?;
        if config.meta.kind == schema.kind
            && (config.meta.group.is_empty() || config.meta.group == schema.group)
        {
            config.meta.kind = schema.id.clone();
        }
        if schema.cluster_scoped {
            config.meta.namespace.clear();
        }
        Some(schema)
    }

    /// `key` as its kind names it: without a namespace for a
    /// cluster-scoped kind (a key stored before its kind was).
    pub fn scoped_key(&self, mut key: ConfigKey) -> ConfigKey {
        if self.get(&key.kind).is_some_and(|schema| schema.cluster_scoped) {
            key.namespace.clear();
        }
        key
    }

    /// The schema of `kind`, or [`StoreError::UnknownKind`].
    pub fn schema(&self, kind: &str) -> Result<Arc<KindSchema>, StoreError> {
        self.get(kind).ok_or_else(|| StoreError::UnknownKind {
            kind: kind.to_string(),
        })
    }

    /// True when `kind` names a registered kind ([`KindRegistry::get`]).
    pub fn contains(&self, kind: &str) -> bool {
        self.get(kind).is_some()
    }

    /// True when `kind` is the name of some registered kind, in any group.
    pub fn has_name(&self, kind: &str) -> bool {
        self.read()
            .values()
            .any(|schema| schema.kind == kind || schema.id == kind)
    }

    /// The ids of every registered kind, sorted.
    pub fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self.read().keys().cloned().collect();
        kinds.sort();
        kinds
    }

    /// The schema whose plural name (in `group`, when given) is `plural`.
    /// Without a group, a plural two groups use (`gateways`) names the
    /// kind whose id is unqualified, as the bare kind name does.
    pub fn by_plural(&self, group: Option<&str>, plural: &str) -> Option<Arc<KindSchema>> {
        let kinds = self.read();
        let mut found = kinds
            .values()
            .filter(|s| s.plural == plural && group.is_none_or(|g| g == s.group));
        let first = found.next()?;
        if first.is_qualified()
            && let Some(plain) = found.find(|s| !s.is_qualified())
        {
            return Some(plain.clone());
        }
        Some(first.clone())
    }

    /// The short names of `schema`: its own when it declares some or its id
    /// is [qualified](KindSchema::with_qualified_id), else the
    /// initials of its words (`rr` for `RouteRule`) when at least two
    /// letters long and no other kind has the same initials or takes them
    /// as a name.
    ///
    /// ```
    /// use pilot_model::{KindRegistry, KindSchema};
    /// let registry = KindRegistry::new();
    /// for (kind, plural) in [("RouteRule", "routerules"), ("RetryRule", "retryrules"), ("TrafficSplit", "trafficsplits")] {
    ///     registry.register_schema(KindSchema::new(kind, plural, "example.com", "v1", |_, _| {})).unwrap();
    /// }
    /// let short = |kind: &str| registry.short_names(&registry.get(kind).unwrap());
    /// assert_eq!(short("TrafficSplit"), ["ts"]);
    /// // RouteRule and RetryRule have the same initials: neither takes them.
    /// assert!(short("RouteRule").is_empty() && short("RetryRule").is_empty());
    /// ```
    pub fn short_names(&self, schema: &KindSchema) -> Vec<String> {
        // A qualified kind is another API's, whose definition says its
        // short names exactly: none are derived for it.
        if !schema.short_names.is_empty() || schema.is_qualified() {
            return schema.short_names.clone();
        }
        let short = initials(&schema.kind);
        let clash = self.read().values().any(|other| {
            other.id != schema.id
                && (initials(&other.kind) == short
                    || other.plural == short
                    || other.kind.eq_ignore_ascii_case(&short)
                    || other.short_names.contains(&short))
        });
        if short.len() < 2 || clash {
            Vec::new()
        } else {
            vec![short]
        }
    }

    /// Validates `config` against its kind (by the rules of the version it
    /// is written at), fills in an empty group and version, moves it to the
    /// storage version and writes every field with its JSON name, ready to
    /// be stored.
    pub fn prepare(&self, mut config: DynConfig) -> Result<DynConfig, StoreError> {
        let schema = self
            .resolve(&config.meta.kind, &config.meta.group)
            .ok_or_else(|| StoreError::UnknownKind {
                kind: config.meta.kind.clone(),
            })?;
        // The spec is validated by the rules of the version it was
        // written at; it is stored at the storage version.
        let written = config.meta.version.clone();
        schema.fill_type(&mut config);
        schema.validate_spec_with(&config, schema.validator_at(&written))?;
        if let Some(normalize) = &schema.normalizer {
            normalize(&mut config.spec);
        }
        Ok(config)
    }

    /// Checks an update of `old`, the object stored, to `new` (already
    /// [prepared](KindRegistry::prepare)) against its kind's transition
    /// rules ([`KindSchema::validate_update`]). Every store calls it in
    /// `update`, against the version the update replaces, before writing;
    /// a kind without rules (or not registered) always passes.
    pub fn check_update(&self, old: &DynConfig, new: &DynConfig) -> Result<(), StoreError> {
        match self.resolve(&new.meta.kind, &new.meta.group) {
            Some(schema) => schema.validate_update(old, new),
            None => Ok(()),
        }
    }

    /// True when `kind` (an id or a name) has transition rules: a store
    /// reads the object an update replaces only for such kinds.
    pub fn has_transition_rules(&self, kind: &str) -> bool {
        self.get(kind).is_some_and(|schema| schema.has_transition_rules())
    }

    /// The warnings of `config` against its kind ([`KindSchema::warnings`]);
    /// none for a kind not registered.
    pub fn warnings(&self, config: &DynConfig) -> Vec<FieldError> {
        self.resolve(&config.meta.kind, &config.meta.group)
            .map(|schema| schema.warnings(config))
            .unwrap_or_default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<KindSchema>>> {
        self.kinds.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The kind's name in a kind id ([`KindSchema::id`]): `Gateway` for
/// `Gateway.gateway.networking.k8s.io`, the id itself when unqualified
/// (kind names have no dots).
pub fn kind_name(id: &str) -> &str {
    id.split_once('.').map_or(id, |(kind, _)| kind)
}

/// The initials of a kind's words, lower case: `rr` for `RouteRule`.
fn initials(kind: &str) -> String {
    kind.chars()
        .filter(char::is_ascii_uppercase)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, ConfigKey, ConfigMeta};
    use serde::Deserialize;

    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Limit {
        max_requests: u32,
        #[serde(default)]
        tags: Vec<String>,
    }

    impl ConfigKind for Limit {
        const KIND: &'static str = "Limit";
        const PLURAL: &'static str = "limits";
        const GROUP: &'static str = "example.com";
        const VERSION: &'static str = "v1";
        fn validate(&self, errors: &mut FieldErrors) {
            if self.max_requests == 0 {
                errors.push("spec.maxRequests", "must be at least 1");
            }
        }
    }

    fn registry() -> KindRegistry {
        let r = KindRegistry::new();
        r.register::<Limit>().unwrap();
        r
    }

    #[test]
    fn typed_round_trip() {
        let typed = Config::new(
            "default",
            "l1",
            Limit {
                max_requests: 3,
                tags: vec![],
            },
        );
        let dynamic = typed.to_dyn().unwrap();
        assert_eq!(dynamic.meta.group, "example.com");
        registry().prepare(dynamic.clone()).unwrap();
        let back = Config::<Limit>::from_dyn(&dynamic).unwrap();
        assert_eq!(back.spec.max_requests, 3);
    }

    #[test]
    fn every_error_is_reported_with_its_path() {
        let config = DynConfig {
            meta: ConfigMeta::new("Limit", "Bad_NS", "-name"),
            spec: serde_json::json!({"maxRequests": 0}),
        };
        let Err(StoreError::Invalid { key, errors }) = registry().prepare(config) else {
            panic!("expected invalid");
        };
        assert_eq!(key.name, "-name");
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["metadata.name", "metadata.namespace", "spec.maxRequests"]);
    }

    #[test]
    fn decode_errors_name_the_nested_field() {
        let config = DynConfig {
            meta: ConfigMeta::new("Limit", "default", "l"),
            spec: serde_json::json!({"maxRequests": 1, "tags": ["a", 7]}),
        };
        let err = registry().prepare(config).unwrap_err();
        let StoreError::Invalid { errors, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(errors[0].path, "spec.tags[1]");
        assert!(err.to_string().contains("spec.tags[1]"), "{err}");
    }

    #[test]
    fn served_versions_are_stored_at_the_storage_version() {
        let registry = KindRegistry::new();
        let schema = Limit::schema().with_served_versions(["v1beta1", "v1alpha3"]);
        registry.register_schema(schema).unwrap();
        let mut config = DynConfig {
            meta: ConfigMeta::new("Limit", "default", "l"),
            spec: serde_json::json!({"maxRequests": 1}),
        };
        config.meta.group = "example.com".into();
        config.meta.version = "v1alpha3".into();
        let stored = registry.prepare(config.clone()).unwrap();
        assert_eq!(stored.meta.version, "v1");
        config.meta.version = "v2".into();
        let Err(StoreError::Invalid { errors, .. }) = registry.prepare(config) else {
            panic!("v2 is not served");
        };
        assert_eq!(errors[0].path, "apiVersion");
        assert!(
            errors[0].message.contains(r#""v1" or "v1beta1" or "v1alpha3""#),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn two_groups_kinds_of_one_name_live_side_by_side() {
        let registry = registry();
        let other = KindSchema::new("Limit", "limits", "other.io", "v2", |spec, errors| {
            if spec.get("cap").is_none() {
                errors.push("spec.cap", "required");
            }
        })
        .with_qualified_id();
        registry.register_schema(other).unwrap();
        assert_eq!(registry.kinds(), ["Limit", "Limit.other.io"]);
        // A third kind of that name in either group is refused.
        let again = KindSchema::new("Limit", "limits", "other.io", "v1", |_, _| {});
        assert!(matches!(
            registry.register_schema(again),
            Err(StoreError::KindAlreadyRegistered { .. })
        ));

        // The bare name is the unqualified kind's; the group picks the other.
        let mut config = DynConfig {
            meta: ConfigMeta::new("Limit", "default", "l"),
            spec: serde_json::json!({"cap": 1}),
        };
        config.meta.group = "other.io".into();
        let stored = registry.prepare(config.clone()).unwrap();
        assert_eq!(stored.meta.kind, "Limit.other.io");
        assert_eq!(stored.meta.version, "v2");
        assert_eq!(stored.key(), ConfigKey::new("Limit.other.io", "default", "l"));
        // Its document writes the kind's name and the group.
        let document = serde_json::to_value(&stored).unwrap();
        assert_eq!(document["kind"], "Limit");
        assert_eq!(document["apiVersion"], "other.io/v2");
        // Read back, the document names the same object once identified.
        let mut read: DynConfig = serde_json::from_value(document).unwrap();
        assert_eq!(read.meta.kind, "Limit");
        assert_eq!(registry.identify(&mut read).unwrap().group, "other.io");
        assert_eq!(read.key(), stored.key());

        // The same spec in the first group is the other kind's: refused
        // by that kind's validation.
        config.meta.group = "example.com".into();
        let Err(StoreError::Invalid { key, errors }) = registry.prepare(config) else {
            panic!("example.com's Limit needs maxRequests");
        };
        assert_eq!(key.kind, "Limit");
        assert!(
            errors.iter().any(|e| e.message.contains("maxRequests")),
            "{errors:?}"
        );
        // No short name is derived for a qualified kind.
        assert!(
            registry
                .short_names(&registry.get("Limit.other.io").unwrap())
                .is_empty()
        );
        // A plural both groups use names the unqualified kind without a group.
        assert_eq!(registry.by_plural(None, "limits").unwrap().group, "example.com");
        assert_eq!(
            registry.by_plural(Some("other.io"), "limits").unwrap().id,
            "Limit.other.io"
        );
    }

    #[test]
    fn wrong_group_and_unknown_kind() {
        let mut config = DynConfig {
            meta: ConfigMeta::new("Limit", "default", "l"),
            spec: serde_json::json!({"maxRequests": 1}),
        };
        config.meta.group = "other.io".into();
        assert!(matches!(
            registry().prepare(config.clone()),
            Err(StoreError::Invalid { .. })
        ));
        config.meta.kind = "Nope".into();
        assert!(matches!(
            registry().prepare(config),
            Err(StoreError::UnknownKind { .. })
        ));
        assert!(matches!(
            registry().register::<Limit>(),
            Err(StoreError::KindAlreadyRegistered { .. })
        ));
    }
}
