//! The JSON file registry of `examples/custom_registry` passes the same
//! registry conformance suite as pilot's own registries.

#[path = "../examples/custom_registry/json_registry.rs"]
mod json_registry;

#[path = "../examples/custom_registry/conformance.rs"]
mod conformance;

use pilot::store::testing::RegistrySource;

pilot::store::registry_conformance_suite!(|| async {
    Box::new(conformance::JsonFileSource::new()) as Box<dyn RegistrySource>
});
