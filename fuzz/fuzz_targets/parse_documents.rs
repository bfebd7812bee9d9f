//! Any bytes given to the document reader give objects or errors, never a
//! panic, a hang or unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pilot_model::document;
use pilot_api::istio;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let registry = istio::registry();
        if let Ok(objects) = document::parse("fuzz.yaml", text, &registry) {
            // What parses must survive a round trip unchanged.
            let yaml = document::to_yaml(&objects);
            let again = document::parse("again.yaml", &yaml, &registry).expect("round trip parses");
            assert_eq!(again, objects);
        }
    }
});
