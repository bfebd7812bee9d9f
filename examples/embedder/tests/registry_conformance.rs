//! The JSON file registry passes the same registry conformance suite as
//! pilot's own registries.

mod support;

use pilot_store::testing::RegistrySource;

pilot_store::registry_conformance_suite!(|| async {
    Box::new(support::json_source::JsonFileSource::new()) as Box<dyn RegistrySource>
});
