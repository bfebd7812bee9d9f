//! The kinds the conformance suite stores.

use pilot_model::{Config, ConfigKind, FieldErrors, KindRegistry};
use serde::{Deserialize, Serialize};

/// A key/value pair inside a [`MockConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MockPair {
    /// The pair's key; must not be empty.
    pub key: String,
    /// The pair's value.
    pub value: String,
}

/// The kind the suite writes (after Istio's `MockConfig`): a key and pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockConfig {
    /// Must not be empty.
    pub key: String,
    /// Extra content; every pair's key must not be empty.
    #[serde(default)]
    pub pairs: Vec<MockPair>,
}

impl ConfigKind for MockConfig {
    const KIND: &'static str = "MockConfig";
    const PLURAL: &'static str = "mockconfigs";
    const GROUP: &'static str = "test.pilot.io";
    const VERSION: &'static str = "v1";

    fn validate(&self, errors: &mut FieldErrors) {
        if self.key.is_empty() {
            errors.push("spec.key", "must not be empty");
        }
        for (i, pair) in self.pairs.iter().enumerate() {
            if pair.key.is_empty() {
                errors.push(format!("spec.pairs[{i}].key"), "must not be empty");
            }
        }
    }
}

/// A second kind, to show that kinds do not see each other's objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MockOther {
    /// Free text.
    pub text: String,
}

impl ConfigKind for MockOther {
    const KIND: &'static str = "MockOther";
    const PLURAL: &'static str = "mockothers";
    const GROUP: &'static str = "test.pilot.io";
    const VERSION: &'static str = "v1";
}

/// A registry with [`MockConfig`] and [`MockOther`].
pub fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    registry.register::<MockConfig>().expect("fresh registry");
    registry.register::<MockOther>().expect("fresh registry");
    registry
}

/// A kind of [`MockConfig`]'s name in another group (`other.pilot.io`), its
/// id qualified (`MockConfig.other.pilot.io`): two groups' kinds of one
/// name, as Istio's `Gateway` and the Gateway API's, live side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtherMockConfig {
    /// Must not be empty.
    pub note: String,
}

impl ConfigKind for OtherMockConfig {
    const KIND: &'static str = "MockConfig";
    const PLURAL: &'static str = "mockconfigs";
    const GROUP: &'static str = "other.pilot.io";
    const VERSION: &'static str = "v2";
    const QUALIFIED: bool = true;

    fn validate(&self, errors: &mut FieldErrors) {
        if self.note.is_empty() {
            errors.push("spec.note", "must not be empty");
        }
    }
}

/// [`registry`] with [`OtherMockConfig`] too.
pub fn registry_with_other_group() -> KindRegistry {
    let registry = registry();
    registry
        .register::<OtherMockConfig>()
        .expect("a kind of another group");
    registry
}

/// A kind with a transition rule: its `class` is immutable, as a Gateway
/// API GatewayClass's `controllerName` is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockSealed {
    /// Set at creation; an update may not change it.
    pub class: String,
    /// Free text, any update may change it.
    #[serde(default)]
    pub note: String,
}

impl ConfigKind for MockSealed {
    const KIND: &'static str = "MockSealed";
    const PLURAL: &'static str = "mocksealeds";
    const GROUP: &'static str = "test.pilot.io";
    const VERSION: &'static str = "v1";
    const TRANSITION_RULES: bool = true;

    fn validate_update(&self, old: &Self, errors: &mut FieldErrors) {
        if self.class != old.class {
            errors.push("spec.class", "Value is immutable");
        }
    }
}

/// [`registry`] with [`MockSealed`] too.
pub fn registry_with_sealed() -> KindRegistry {
    let registry = registry();
    registry
        .register::<MockSealed>()
        .expect("a kind with a transition rule");
    registry
}

/// A [`MockConfig`] object in untyped form.
pub fn mock(namespace: &str, name: &str, key: &str) -> pilot_model::DynConfig {
    Config::new(
        namespace,
        name,
        MockConfig {
            key: key.to_string(),
            pairs: vec![MockPair {
                key: "k".into(),
                value: format!("{name}-{key}"),
            }],
        },
    )
    .to_dyn()
    .expect("MockConfig serializes")
}
