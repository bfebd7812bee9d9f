//! Small conversions into Envoy's protobuf types.

use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, SocketAddress, address, config_source,
    socket_address,
};
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration, UInt32Value};
use prost::Name;

/// A message packed into `Any`.
pub fn any<M: prost::Message + Name>(message: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    }
}

/// A TCP socket address.
pub(crate) fn socket(address: &str, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: address.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

/// Configuration delivered over the ADS stream.
pub(crate) fn ads() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    }
}

/// A protobuf duration.
pub(crate) fn duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A protobuf `UInt32Value` from a non-negative count.
pub(crate) fn u32_value(n: i32) -> UInt32Value {
    UInt32Value {
        value: u32::try_from(n).unwrap_or(0),
    }
}
