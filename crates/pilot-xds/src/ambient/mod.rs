//! What pilot serves ztunnel, the node proxy of Istio's ambient mode,
//! over delta xDS: its messages (`proto`) and their generation from the
//! model.

pub mod authorization;
pub mod proto;
