//! [`XdsOptions`]: how the server batches pushes and sends responses.

use std::time::Duration;

/// How the server batches and sends.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct XdsOptions {
    /// A push waits until no change has arrived for this long...
    pub debounce_quiet: Duration,
    /// ...but no longer than this after the first change.
    pub debounce_max: Duration,
    /// A change that comes alone, `debounce_quiet` or more after the last
    /// change and not while a push was being built, is pushed at once,
    /// with whatever is queued behind it; the changes after it are
    /// debounced (the default). A lone change (one route edited) then
    /// costs no quiet period, and a burst (a directory applied) at most
    /// one push more than a debounce alone. False waits out the quiet
    /// period for every push, as before; kept so benchmarks can measure
    /// both in one run.
    pub debounce_leading: bool,
    /// Response bytes h2 may hold for one stream (the proxy's
    /// flow-control window closed, or its socket slow) before the stream's
    /// task waits (1 MiB; h2's `max_send_buf_size`, and never more than
    /// the proxy's window lets out). A proxy that does not read holds at
    /// most this much of the server's memory, plus the part that went
    /// over it, the message being written and the one queued behind it
    /// (mostly slices of configuration every proxy shares); a push
    /// meanwhile reaches it as the configuration of its time once it reads
    /// again, not as every response in between.
    pub send_buffer: usize,
    /// Share Envoy clusters, load assignments, listeners and encoded
    /// virtual hosts between proxy classes, keep virtual hosts whose rules
    /// did not change from the previous push, and rebuild, after endpoint
    /// changes only, just the load assignments that changed (the default). False makes every class generate everything
    /// itself on every push, as before sharing existed; it is kept so the
    /// `ads` bench can measure both in one run.
    pub incremental: bool,
    /// State-of-the-world streams are sent, of load assignments and route
    /// configurations, only those whose version differs from what the
    /// stream was last sent (the default). False sends every subscribed
    /// one whenever any changed, as before; kept so the `ads` bench can
    /// measure both in one run.
    pub sotw_changed_only: bool,
    /// The namespace whose selector-less Sidecar is the mesh's default
    /// (Istio's `meshConfig.rootNamespace`; `istio-system`).
    pub root_namespace: String,
    /// Where services, VirtualServices and DestinationRules without an
    /// `exportTo` of their own are visible (`*`, `.`, namespaces; empty:
    /// everywhere).
    pub default_export_to: Vec<String>,
    /// The trust domain of workload identities (`cluster.local`), which
    /// outbound clusters expect in their servers' certificates.
    pub trust_domain: String,
    /// The control-plane revision this server is (`--revision`; `""` the
    /// default): configuration labelled `istio.io/rev` for another revision
    /// is not served ([`pilot_model::in_revision`]).
    pub revision: String,
    /// The mesh config's extension providers (`--mesh-config`'s
    /// `extensionProviders`): the external authorizers CUSTOM
    /// AuthorizationPolicies name.
    pub extension_providers: std::sync::Arc<pilot_routing::ExtensionProviders>,
}

impl Default for XdsOptions {
    fn default() -> Self {
        XdsOptions {
            debounce_quiet: Duration::from_millis(10),
            debounce_max: Duration::from_millis(50),
            debounce_leading: true,
            send_buffer: 1 << 20,
            incremental: true,
            sotw_changed_only: true,
            root_namespace: pilot_routing::DEFAULT_ROOT_NAMESPACE.to_string(),
            default_export_to: Vec::new(),
            trust_domain: pilot_xds::security::DEFAULT_TRUST_DOMAIN.into(),
            revision: String::new(),
            extension_providers: Default::default(),
        }
    }
}
