//! Prints the CustomResourceDefinitions of pilot's routing kinds as YAML, for
//! `kubectl apply`:
//!
//! ```sh
//! cargo run -p pilot-store-k8s --example k8s_crds | kubectl apply -f -
//! kubectl get crd routerules.config.istio.io
//! kubectl get routerules --all-namespaces
//! ```
//!
//! (`pilot_store_k8s::install_crds` applies the same CRDs from a program.)

fn main() {
    let registry = pilot_api::istio::registry();
    for crd in pilot_store_k8s::crds(&registry) {
        let value = serde_json::to_value(&crd).expect("a CRD is JSON");
        print!("---\n{}", pilot_model::document::to_yaml_value(&value));
    }
}
