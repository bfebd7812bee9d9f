//! Feedback from the proxies: what each connected proxy was sent, ACKed
//! and NACKed (`acks.rs`), which store revisions a push carried
//! (`push_revisions.rs`), why streams ended (`stream_ends.rs`), all
//! recorded through one `Feedback` (`recorder.rs`) by both protocols
//! alike; the streams refused before they were served
//! (`refusals.rs`); the objects each proxy rejected, left out of its
//! configuration (`rejections.rs`); and which proxies should have each
//! object, by their scopes (`audience.rs`).

mod acks;
mod audience;
mod push_revisions;
mod recorder;
mod refusals;
mod rejections;
mod stream_ends;

pub use acks::{Nack, ProxyStatus, TypeStatus};
pub use audience::Audience;
pub use push_revisions::PushRevisions;
pub(crate) use recorder::Feedback;
pub(crate) use refusals::RefusalCounters;
pub use refusals::RefusedStreams;
pub(crate) use rejections::{LeftOutByNode, Rejections};
pub(crate) use stream_ends::EndReason;
pub use stream_ends::StreamEnds;
