//! State-of-the-world ADS: a subscription is a set of names (or every
//! resource), and a response carries every resource it selects, sent when
//! their digest changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use super::session::{Answer, Gone, Protocol, Resend, Session};
use super::xds_type::XdsType;

/// A type's subscription and the digest of what was last sent for it.
#[derive(Default)]
struct Subscription {
    /// `None`: every resource (wildcard). Shared by the proxies that
    /// subscribe to the same names.
    names: Option<Arc<BTreeSet<String>>>,
    digest: Option<u64>,
}

/// A state-of-the-world stream's subscriptions, by type.
pub(super) struct Sotw {
    subscriptions: [Option<Subscription>; 4],
}

impl Protocol for Sotw {
    type Request = DiscoveryRequest;
    const INCREMENTAL: bool = false;

    fn new() -> Self {
        Sotw {
            subscriptions: Default::default(),
        }
    }

    fn node(request: &DiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn header(request: &DiscoveryRequest) -> (&str, &str, Option<&str>) {
        (
            &request.type_url,
            &request.response_nonce,
            request.error_detail.as_ref().map(|e| e.message.as_str()),
        )
    }

    fn names_listeners(request: &DiscoveryRequest) -> bool {
        request.type_url == XdsType::Listener.url() && !request.resource_names.is_empty()
    }

    fn subscribe(
        &mut self,
        session: &Session,
        t: XdsType,
        answer: Answer,
        request: DiscoveryRequest,
    ) -> Option<Resend> {
        let wildcard = request.resource_names.is_empty() && t.wildcard_by_default();
        let subscription = self.subscriptions[t.index()].get_or_insert_with(Subscription::default);
        match answer {
            // A newer response is on its way; the proxy's answer to it will
            // carry its names.
            Answer::Stale => return None,
            // An ACK or NACK naming what it named before: nothing to send
            // (after a NACK, not the rejected thing again).
            Answer::Latest if same_names(&subscription.names, wildcard, &request.resource_names) => {
                return None;
            }
            Answer::Latest | Answer::Initial => {}
        }
        subscription.names = (!wildcard).then(|| {
            session
                .server()
                .names
                .intern(request.resource_names.into_iter().collect())
        });
        // A new subscription is answered even when its digest is unchanged
        // (a reconnecting proxy needs the response).
        Some(Resend::All)
    }

    fn subscribed(&self, t: XdsType) -> bool {
        self.subscriptions[t.index()].is_some()
    }

    async fn respond(&mut self, session: &mut Session, t: XdsType, resend: &Resend) -> Result<Resend, Gone> {
        let (Some(subscription), Some(config)) = (&mut self.subscriptions[t.index()], session.config())
        else {
            // Not synced yet: the first push will answer.
            return Ok(Resend::Nothing);
        };
        let (digest, resources) = config.sotw(t.short(), &subscription.names);
        let changed = subscription.digest != Some(digest);
        if !changed && !resend.any() {
            return Ok(Resend::Nothing);
        }
        subscription.digest = Some(digest);
        session
            .send(t, resources, |version_info, nonce| DiscoveryResponse {
                version_info,
                type_url: t.url().to_string(),
                nonce,
                ..Default::default()
            })
            .await?;
        // A response carries every selected resource: which of them
        // changed is not known here.
        Ok(if changed { Resend::All } else { Resend::Nothing })
    }
}

/// True when a request names the same resources as the subscription (no
/// allocation: this is every ACK).
fn same_names(current: &Option<Arc<BTreeSet<String>>>, wildcard: bool, requested: &[String]) -> bool {
    match current {
        None => wildcard,
        Some(names) => {
            !wildcard && names.len() == requested.len() && requested.iter().all(|n| names.contains(n))
        }
    }
}
