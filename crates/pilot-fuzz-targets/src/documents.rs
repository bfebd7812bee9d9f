//! Configuration files: `pilot_model::document` with pilot's kinds.

use pilot_model::document;

/// Parses `data` (UTF-8) with every kind pilot serves; what parses is
/// written as YAML and must read back as the same objects.
pub(crate) fn parse_documents(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let registry = pilot_api::default_registry();
    let Ok(objects) = document::parse("fuzz.yaml", text, &registry) else {
        return;
    };
    let yaml = document::to_yaml(&objects);
    match document::parse("again.yaml", &yaml, &registry) {
        Ok(again) => assert!(
            again == objects,
            "the objects written as YAML read back differently:\n{yaml}"
        ),
        Err(errors) => panic!("the objects written as YAML do not read back: {errors}\n{yaml}"),
    }
}
