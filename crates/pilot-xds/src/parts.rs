//! Generation in parts, for a caller that builds a proxy's resources once
//! and shares them: the ADS push pipeline (pilot-ads) generates the
//! outbound half once per class of proxy, clusters and load assignments
//! once per push, and route configurations from virtual hosts shared
//! between classes. Each part reads the routing model
//! ([`MeshConfig::model`](crate::MeshConfig::model)), compiled once per
//! push. Put together, the parts give what [`generate`] gives.
//!
//! [`generate`]: crate::generate

pub use crate::clusters::{EdsCluster, eds_clusters, load_assignment, outbound as outbound_clusters};
pub use crate::generate::{generate_inbound, generate_outbound};
pub use crate::listeners::{ListenerPlan, listeners as listener_plan};
pub use crate::routes::{admits, admitted, domains, route_configuration, virtual_host_routes};
pub use crate::sni_dnat::{clusters as sni_dnat_clusters, serves_auto_passthrough};
pub use crate::util::any;
