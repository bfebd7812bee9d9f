//! Model-based test: random operation sequences against the backend and a
//! plain reference model, compared after every step.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use pilot_model::{ConfigKey, ConfigStore, DynConfig, StoreError};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use super::{StoreFactory, mock, registry};

/// How many random sequences [`model_based`] runs.
pub const MODEL_CASES: u32 = 256;

const KIND: &str = "MockConfig";
const NAMESPACES: [&str; 2] = ["default", "prod"];
const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// Which resource version an update or delete carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// None at all.
    Missing,
    /// The version the object has now.
    Current,
    /// A version from an earlier write (or, when every earlier write has
    /// the object's current version, one that no object has).
    Stale,
}

/// One operation of a generated sequence.
#[derive(Debug, Clone)]
pub(super) enum Op {
    /// Create `ns/name` with value `v`.
    Create(usize, usize, u8),
    /// Update `ns/name` to value `v`, carrying a version.
    Update(usize, usize, u8, Version),
    /// Delete `ns/name`, with an optional condition.
    Delete(usize, usize, Version),
    /// Get `ns/name`.
    Get(usize, usize),
    /// List one namespace or all.
    List(Option<usize>),
}

/// The reference model: a map from (namespace, name) to a value, and how
/// many writes have produced a resource version so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Model {
    objects: BTreeMap<(usize, usize), u8>,
    versioned_writes: usize,
}

/// What an operation returns, reduced to what the model can predict.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Written,
    Deleted,
    Got(Option<String>),
    Listed(Vec<(String, String, String)>),
    AlreadyExists,
    NotFound,
    Conflict,
}

struct StoreModel;

impl ReferenceStateMachine for StoreModel {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        let ns = 0..NAMESPACES.len();
        let name = 0..NAMES.len();
        let version = if state.versioned_writes >= 2 {
            prop_oneof![
                Just(Version::Missing),
                Just(Version::Current),
                Just(Version::Stale)
            ]
            .boxed()
        } else {
            prop_oneof![Just(Version::Missing), Just(Version::Current)].boxed()
        };
        prop_oneof![
            3 => (ns.clone(), name.clone(), 0..4u8).prop_map(|(n, m, v)| Op::Create(n, m, v)),
            3 => (ns.clone(), name.clone(), 0..4u8, version.clone()).prop_map(|(n, m, v, c)| Op::Update(n, m, v, c)),
            2 => (ns.clone(), name.clone(), version).prop_map(|(n, m, c)| Op::Delete(n, m, c)),
            1 => (ns.clone(), name.clone()).prop_map(|(n, m)| Op::Get(n, m)),
            1 => proptest::option::of(ns).prop_map(Op::List),
        ]
        .boxed()
    }

    fn preconditions(state: &Model, op: &Op) -> bool {
        match op {
            Op::Update(_, _, _, Version::Stale) | Op::Delete(_, _, Version::Stale) => {
                state.versioned_writes >= 2
            }
            _ => true,
        }
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        let outcome = predict(&state, op);
        match (op, outcome) {
            (Op::Create(n, m, v), Outcome::Written) | (Op::Update(n, m, v, _), Outcome::Written) => {
                state.objects.insert((*n, *m), *v);
                state.versioned_writes += 1;
            }
            (Op::Delete(n, m, _), Outcome::Deleted) => {
                state.objects.remove(&(*n, *m));
            }
            _ => {}
        }
        state
    }
}

fn value_key(v: u8) -> String {
    format!("value-{v}")
}

/// What the model says `op` returns in `state`.
fn predict(state: &Model, op: &Op) -> Outcome {
    match *op {
        Op::Create(n, m, _) if state.objects.contains_key(&(n, m)) => Outcome::AlreadyExists,
        Op::Create(..) => Outcome::Written,
        Op::Update(n, m, ..) | Op::Delete(n, m, _) if !state.objects.contains_key(&(n, m)) => {
            Outcome::NotFound
        }
        Op::Update(_, _, _, Version::Current) => Outcome::Written,
        Op::Update(..) => Outcome::Conflict,
        Op::Delete(_, _, Version::Stale) => Outcome::Conflict,
        Op::Delete(..) => Outcome::Deleted,
        Op::Get(n, m) => Outcome::Got(state.objects.get(&(n, m)).map(|v| value_key(*v))),
        Op::List(ns) => Outcome::Listed(
            state
                .objects
                .iter()
                .filter(|((n, _), _)| ns.is_none_or(|ns| ns == *n))
                .map(|((n, m), v)| (NAMESPACES[*n].to_string(), NAMES[*m].to_string(), value_key(*v)))
                .collect(),
        ),
    }
}

/// The system under test plus the versions it has handed out.
struct Sut {
    store: Arc<dyn ConfigStore>,
    current: HashMap<(usize, usize), String>,
    all_versions: Vec<String>,
}

impl Sut {
    fn version(&self, n: usize, m: usize, which: Version) -> Option<String> {
        let current = self.current.get(&(n, m));
        match which {
            Version::Missing => None,
            // For a missing object any version will do: the answer is NotFound.
            Version::Current => current.or(self.all_versions.last()).cloned(),
            // An update that changes nothing may keep the version (as on
            // Kubernetes), so every earlier write may have this object's
            // version. Then "1" stands in: etcd's first revision, which no
            // Kubernetes object has (stores that give every write a new
            // version never get here).
            Version::Stale => Some(
                self.all_versions
                    .iter()
                    .rev()
                    .find(|v| Some(*v) != current)
                    .cloned()
                    .unwrap_or_else(|| "1".to_string()),
            ),
        }
    }

    async fn run(&mut self, op: &Op) -> Result<Outcome, StoreError> {
        let key = |n: usize, m: usize| ConfigKey::new(KIND, NAMESPACES[n], NAMES[m]);
        let result = match *op {
            Op::Create(n, m, v) => {
                let stored = self
                    .store
                    .create(mock(NAMESPACES[n], NAMES[m], &value_key(v)))
                    .await;
                self.record(n, m, stored)
            }
            Op::Update(n, m, v, which) => {
                let mut config = mock(NAMESPACES[n], NAMES[m], &value_key(v));
                config.meta.resource_version = self.version(n, m, which);
                let stored = self.store.update(config).await;
                self.record(n, m, stored)
            }
            Op::Delete(n, m, which) => {
                let version = self.version(n, m, which);
                let deleted = self.store.delete(&key(n, m), version.as_deref()).await;
                if deleted.is_ok() {
                    self.current.remove(&(n, m));
                }
                deleted.map(|()| Outcome::Deleted)
            }
            Op::Get(n, m) => self
                .store
                .get(&key(n, m))
                .await
                .map(|c| Outcome::Got(c.map(|c| spec_key(&c)))),
            Op::List(ns) => self
                .store
                .list(KIND, ns.map(|n| NAMESPACES[n]))
                .await
                .map(|items| {
                    Outcome::Listed(
                        items
                            .iter()
                            .map(|c| (c.meta.namespace.clone(), c.meta.name.clone(), spec_key(c)))
                            .collect(),
                    )
                }),
        };
        result.or_else(|error| match error {
            StoreError::AlreadyExists { .. } => Ok(Outcome::AlreadyExists),
            StoreError::NotFound { .. } => Ok(Outcome::NotFound),
            StoreError::Conflict { ref actual, .. } => {
                // The conflict must name the version the store really has.
                let known = op_key(op).and_then(|k| self.current.get(&k));
                if known.is_some_and(|k| k != actual) {
                    return Err(error);
                }
                Ok(Outcome::Conflict)
            }
            other => Err(other),
        })
    }

    fn record(
        &mut self,
        n: usize,
        m: usize,
        stored: Result<Arc<DynConfig>, StoreError>,
    ) -> Result<Outcome, StoreError> {
        let stored = stored?;
        let version = stored.meta.resource_version.clone().unwrap_or_default();
        self.current.insert((n, m), version.clone());
        self.all_versions.push(version);
        Ok(Outcome::Written)
    }
}

fn op_key(op: &Op) -> Option<(usize, usize)> {
    match *op {
        Op::Create(n, m, _) | Op::Update(n, m, ..) | Op::Delete(n, m, _) | Op::Get(n, m) => Some((n, m)),
        Op::List(_) => None,
    }
}

fn spec_key(config: &DynConfig) -> String {
    config.spec["key"].as_str().unwrap_or_default().to_string()
}

/// Runs [`MODEL_CASES`] random sequences of creates, updates (with current,
/// stale and missing versions), deletes (conditional or not), gets and lists
/// against fresh stores from `factory` and against a reference `Model`, comparing every
/// result and the whole content after every step.
pub fn model_based(factory: &dyn StoreFactory) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime for the model-based test");
    let config = ProptestConfig {
        cases: MODEL_CASES,
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&StoreModel::sequential_strategy(1..40), |(initial, ops, _)| {
        runtime.block_on(async {
            let mut sut = Sut {
                store: factory.make(registry()).await,
                current: HashMap::new(),
                all_versions: Vec::new(),
            };
            let mut model = initial;
            for (step, op) in ops.iter().enumerate() {
                let expected = predict(&model, op);
                let actual = sut.run(op).await.map_err(|e| {
                    TestCaseError::fail(format!(
                        "step {step} {op:?}: the store must answer as the reference model: expected \
                         {expected:?}, got Err({e:?})"
                    ))
                })?;
                if actual != expected {
                    return Err(TestCaseError::fail(format!(
                        "step {step} {op:?}: the store must answer as the reference model: expected \
                         {expected:?}, got {actual:?}"
                    )));
                }
                model = StoreModel::apply(model, op);
                let want = predict(&model, &Op::List(None));
                let everything = sut.run(&Op::List(None)).await.map_err(|e| {
                    TestCaseError::fail(format!(
                        "after step {step}: list of a registered kind must succeed, got Err({e:?})"
                    ))
                })?;
                if everything != want {
                    return Err(TestCaseError::fail(format!(
                        "after step {step} {op:?}: list must hold what the reference model holds: \
                         expected {want:?}, got {everything:?}"
                    )));
                }
            }
            Ok(())
        })
    });
    if let Err(failure) = result {
        panic!("the store diverged from the reference model: {failure}");
    }
}
