//! Connection caps from the open-files limit: each connection is a file
//! descriptor, and a server out of descriptors can accept nothing, not even
//! a probe. The caps of the REST listener (`--max-connections`, the
//! webhook's too), its probes' reserve and ADS (`--xds-max-connections`)
//! must fit in the limit, beside [`KEPT`] descriptors for the store's
//! clients, the journal, the services file, logs and the runtime. A cap not
//! given is derived from what the limit leaves (REST a quarter, at most
//! [`REST_CAP`]; ADS the rest, at most [`XDS_CAP`]); caps given that the
//! limit cannot hold stop the server at start.

/// Descriptors kept for everything but connections.
pub(crate) const KEPT: u64 = 256;

/// The REST cap's value when the limit leaves room for it.
pub(crate) const REST_CAP: usize = 10_000;

/// The ADS cap's value when the limit leaves room for it: one process
/// serves tens of thousands of proxies (about 15 KB each).
pub(crate) const XDS_CAP: usize = 100_000;

/// The connection caps in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Per REST listener (the API's, and the webhook's with it).
    pub rest: usize,
    /// ADS.
    pub xds: usize,
}

/// The caps for the open-files limit `limit` (`None`: unlimited), the caps
/// given (`None`: derive), and `rest_listeners` REST listeners (each with
/// its probes' reserve of `reserve`).
pub(crate) fn caps(
    limit: Option<u64>,
    rest: Option<usize>,
    xds: Option<usize>,
    rest_listeners: usize,
    reserve: usize,
) -> Result<Caps, String> {
    let listeners = rest_listeners.max(1) as u64;
    let Some(limit) = limit else {
        return Ok(Caps {
            rest: rest.unwrap_or(REST_CAP),
            xds: xds.unwrap_or(XDS_CAP),
        });
    };
    let room = limit.saturating_sub(KEPT + listeners * reserve as u64);
    let fits = |rest: u64, xds: u64| rest * listeners + xds <= room;
    let derived_rest = |xds: u64| (room.saturating_sub(xds) / listeners).min(REST_CAP as u64);
    let (chosen_rest, chosen_xds) = match (rest.map(|r| r as u64), xds.map(|x| x as u64)) {
        (Some(rest), Some(xds)) => (rest, xds),
        (Some(rest), None) => (rest, room.saturating_sub(rest * listeners).min(XDS_CAP as u64)),
        (None, Some(xds)) => (derived_rest(xds), xds),
        (None, None) => {
            let rest = (room / (4 * listeners)).min(REST_CAP as u64);
            (rest, room.saturating_sub(rest * listeners).min(XDS_CAP as u64))
        }
    };
    if chosen_rest == 0 || chosen_xds == 0 || !fits(chosen_rest, chosen_xds) {
        let given = match (rest, xds) {
            (Some(r), Some(x)) => format!("--max-connections {r} and --xds-max-connections {x}"),
            (Some(r), None) => format!("--max-connections {r}"),
            (None, Some(x)) => format!("--xds-max-connections {x}"),
            (None, None) => "the default --max-connections and --xds-max-connections".to_string(),
        };
        let webhook = if listeners > 1 {
            " (twice: the webhook has its own)"
        } else {
            ""
        };
        return Err(format!(
            "{given} cannot fit in the open-files limit of {limit} (ulimit -n): REST connections{webhook}, \
             ADS connections, {reserve} probe connections per REST listener and {KEPT} descriptors for the \
             store, files and logs must all fit; lower --max-connections / --xds-max-connections, or raise \
             the limit (at least {} for these)",
            KEPT + listeners * (reserve as u64 + chosen_rest.max(1)) + chosen_xds.max(1)
        ));
    }
    Ok(Caps {
        rest: chosen_rest as usize,
        xds: chosen_xds as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_the_limit_or_the_server_does_not_start() {
        // Plenty of descriptors: the defaults.
        assert_eq!(
            caps(Some(1 << 20), None, None, 1, 16),
            Ok(Caps {
                rest: 10_000,
                xds: 100_000
            })
        );
        assert_eq!(
            caps(None, Some(5), None, 1, 16),
            Ok(Caps {
                rest: 5,
                xds: 100_000
            })
        );
        // 1,024: 752 for connections, a quarter for REST.
        assert_eq!(
            caps(Some(1024), None, None, 1, 16),
            Ok(Caps { rest: 188, xds: 564 })
        );
        // Given ones are kept; the other takes what is left.
        assert_eq!(
            caps(Some(1024), Some(100), None, 1, 16),
            Ok(Caps { rest: 100, xds: 652 })
        );
        assert_eq!(
            caps(Some(1024), None, Some(700), 1, 16),
            Ok(Caps { rest: 52, xds: 700 })
        );
        // With the webhook, REST's share counts twice.
        assert_eq!(
            caps(Some(1024), None, None, 2, 16),
            Ok(Caps { rest: 92, xds: 552 })
        );
        let refused = caps(Some(1024), Some(10_000), None, 1, 16).unwrap_err();
        assert!(refused.contains("--max-connections 10000"), "{refused}");
        assert!(refused.contains("open-files limit of 1024"), "{refused}");
        assert!(caps(Some(1024), Some(400), Some(400), 1, 16).is_err());
        assert!(caps(Some(200), None, None, 1, 16).is_err());
    }
}
