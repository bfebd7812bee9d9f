//! The route picture of one service, drawn as inline SVG by our own code:
//! four columns, left to right: the host, its routes in the order they
//! apply (each with its matches; a shadowed route dashed and grey, with
//! what shadows it), the destinations and subsets each route sends to
//! (each edge labelled with its weight), and the endpoints of each
//! destination. Every text is escaped; every element a test or a reader
//! may look for carries a class and `data-` attributes (`data-subset`,
//! `data-weight`, `data-state`).

use std::fmt::Write;

use super::html::esc;

/// One route of the picture.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RouteBox {
    /// Its name as pilot-routing compiled it (`namespace/name[/route]`),
    /// with the protocol (`http`, `tcp`, `tls`) and index.
    pub(crate) label: String,
    /// Each match in words; empty: every request.
    pub(crate) matches: Vec<String>,
    /// What the route does besides forwarding (a redirect, a direct
    /// response, a fault).
    pub(crate) action: Option<String>,
    /// Why it never wins (the finding's message), when it is shadowed.
    pub(crate) shadowed: Option<String>,
    /// What the proxies did with its object when some rejected it (they
    /// are served without it, or refuse the push that has it).
    pub(crate) rejected: Option<String>,
    /// The destinations it sends to (indexes into
    /// [`Picture::destinations`]) and their weights in percent of the
    /// route's traffic, with the raw weight.
    pub(crate) to: Vec<(usize, u32, u32)>,
}

/// One destination (a service, or a subset of it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DestinationBox {
    /// The service's hostname.
    pub(crate) host: String,
    /// The subset's name, if a subset.
    pub(crate) subset: Option<String>,
    /// The port, if the route names one.
    pub(crate) port: Option<u16>,
    /// Its endpoints (indexes into [`Picture::endpoints`]).
    pub(crate) endpoints: Vec<usize>,
}

/// A service, its routes, destinations and endpoints.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Picture {
    /// The host the routes belong to.
    pub(crate) host: String,
    /// In the order they apply; none: the whole service.
    pub(crate) routes: Vec<RouteBox>,
    /// Every destination some route names (or the host itself).
    pub(crate) destinations: Vec<DestinationBox>,
    /// `address:port` of each endpoint, with its labels in words.
    pub(crate) endpoints: Vec<(String, String)>,
}

const HOST_X: u32 = 10;
const HOST_W: u32 = 250;
const ROUTE_X: u32 = 300;
const ROUTE_W: u32 = 330;
const DEST_X: u32 = 720;
const DEST_W: u32 = 270;
const END_X: u32 = 1040;
const END_W: u32 = 230;
const WIDTH: u32 = END_X + END_W + 10;
const LINE: u32 = 15;
const GAP: u32 = 14;

/// About how wide a character of the picture's font is, in pixels: a
/// text longer than its box allows is cut (the page's tables have it in
/// full, and each box's `<title>` too).
const CHAR_W: u32 = 7;

fn cut(text: &str, width: u32) -> String {
    let max = (width.saturating_sub(16) / CHAR_W) as usize;
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A box with lines of text at `(x, y)`, `w` wide; its height.
fn text_box(out: &mut String, x: u32, y: u32, w: u32, lines: &[String], title: &str) -> u32 {
    let h = 8 + LINE * lines.len().max(1) as u32;
    let _ = write!(
        out,
        "<title>{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" rx=\"5\"/>",
        esc(title)
    );
    for (i, line) in lines.iter().enumerate() {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            x + 8,
            y + LINE * (i as u32 + 1),
            esc(&cut(line, w))
        );
    }
    h
}

/// The picture as an `<svg>` element.
pub(crate) fn draw(picture: &Picture) -> String {
    let mut body = String::new();
    // Routes, one under another.
    let mut route_mid = Vec::new();
    let mut y = 10;
    for (i, route) in picture.routes.iter().enumerate() {
        let mut lines = vec![route.label.clone()];
        if route.matches.is_empty() {
            lines.push("match: every request".into());
        }
        lines.extend(route.matches.iter().map(|m| format!("match: {m}")));
        if let Some(action) = &route.action {
            lines.push(action.clone());
        }
        let (class, state) = match (&route.shadowed, &route.rejected) {
            (Some(_), _) => ("route shadowed", "shadowed"),
            (None, Some(_)) => ("route winning rejected", "rejected"),
            (None, None) => ("route winning", "winning"),
        };
        if route.shadowed.is_some() {
            lines.push("SHADOWED: never matches".into());
        }
        if let Some(rejected) = &route.rejected {
            lines.push(rejected.clone());
        }
        let mut title = route.label.clone();
        if let Some(why) = &route.shadowed {
            title.push_str(&format!(": shadowed: {why}"));
        }
        if let Some(rejected) = &route.rejected {
            title.push_str(&format!(": {rejected}"));
        }
        let _ = write!(
            body,
            "<g class=\"{class}\" data-state=\"{state}\" data-index=\"{i}\" data-route=\"{}\">",
            esc(&route.label)
        );
        let h = text_box(&mut body, ROUTE_X, y, ROUTE_W, &lines, &title);
        body.push_str("</g>");
        route_mid.push((y, h));
        y += h + GAP;
    }
    let routes_bottom = y;
    // Destinations, then each destination's endpoints beside it.
    let mut dest_mid = Vec::new();
    let mut end_mid: Vec<Option<u32>> = vec![None; picture.endpoints.len()];
    let mut end_y = 10;
    let mut y = 10;
    for destination in &picture.destinations {
        let mut lines = vec![destination.host.clone()];
        match &destination.subset {
            Some(subset) => lines.push(format!("subset {subset}")),
            None => lines.push("every instance".into()),
        }
        if let Some(port) = destination.port {
            lines.push(format!("port {port}"));
        }
        let class = if destination.endpoints.is_empty() {
            "destination missing"
        } else {
            "destination"
        };
        let _ = write!(
            body,
            "<g class=\"{class}\" data-host=\"{}\" data-subset=\"{}\" data-endpoints=\"{}\">",
            esc(&destination.host),
            esc(destination.subset.as_deref().unwrap_or("")),
            destination.endpoints.len()
        );
        let title = format!("{}: {} endpoint(s)", lines.join(" "), destination.endpoints.len());
        let h = text_box(&mut body, DEST_X, y, DEST_W, &lines, &title);
        body.push_str("</g>");
        let mid = y + h / 2;
        dest_mid.push(mid);
        end_y = end_y.max(y);
        for &endpoint in &destination.endpoints {
            let Some((address, labels)) = picture.endpoints.get(endpoint) else {
                continue;
            };
            if end_mid[endpoint].is_none() {
                let _ = write!(body, "<g class=\"endpoint\" data-address=\"{}\">", esc(address));
                let lines = vec![address.clone(), labels.clone()];
                let h = text_box(
                    &mut body,
                    END_X,
                    end_y,
                    END_W,
                    &lines,
                    &format!("{address} {labels}"),
                );
                body.push_str("</g>");
                end_mid[endpoint] = Some(end_y + h / 2);
                end_y += h + 6;
            }
            let _ = write!(
                body,
                "<path class=\"to-endpoint\" d=\"M{} {mid} L{END_X} {}\"/>",
                DEST_X + DEST_W,
                end_mid[endpoint].unwrap_or(mid)
            );
        }
        y += h + GAP;
        y = y.max(end_y);
    }
    if picture.destinations.is_empty() {
        let _ = write!(
            body,
            "<g class=\"destination missing\"><text x=\"{DEST_X}\" y=\"24\">no destination</text></g>"
        );
    }
    let height = routes_bottom.max(y).max(end_y).max(60) + 10;
    // The host, centred on the routes.
    let host_y = height / 2 - 20;
    let mut svg = format!(
        "<svg class=\"routes\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"routes of {}\">",
        esc(&picture.host)
    );
    let _ = write!(svg, "<g class=\"host\" data-host=\"{}\">", esc(&picture.host));
    text_box(
        &mut svg,
        HOST_X,
        host_y,
        HOST_W,
        &["host".into(), picture.host.clone()],
        &picture.host,
    );
    svg.push_str("</g>");
    let host_mid = host_y + 19;
    for (top, h) in &route_mid {
        let mid = top + h / 2;
        let _ = write!(
            svg,
            "<path class=\"to-route\" d=\"M{} {host_mid} L{ROUTE_X} {mid}\"/>",
            HOST_X + HOST_W
        );
    }
    // Edges route -> destination, labelled with the weight where they
    // leave the route (spread over its right side, one under another).
    for (route, (top, h)) in picture.routes.iter().zip(&route_mid) {
        let n = route.to.len().max(1) as u32;
        let step = ((h - 8) / n).clamp(4, 16);
        let first = top + h / 2 - step * (n - 1) / 2;
        for (k, &(destination, percent, weight)) in route.to.iter().enumerate() {
            let mid = first + step * k as u32;
            let Some(to) = dest_mid.get(destination) else {
                continue;
            };
            let subset = picture.destinations[destination].subset.as_deref().unwrap_or("");
            let (x1, x2) = (ROUTE_X + ROUTE_W, DEST_X);
            let _ = write!(
                svg,
                "<g class=\"edge\" data-route=\"{}\" data-subset=\"{}\" data-weight=\"{weight}\" data-percent=\"{percent}\">\
                 <path d=\"M{x1} {mid} C{} {mid} {} {to} {x2} {to}\"/>\
                 <text class=\"weight\" x=\"{}\" y=\"{}\">{percent}%</text></g>",
                esc(&route.label),
                esc(subset),
                x1 + 60,
                x2 - 60,
                x1 + 6,
                mid - 2,
            );
        }
    }
    svg.push_str(&body);
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_draws_both_subsets_with_their_weights_and_escapes_names() {
        let picture = Picture {
            host: "reviews.default.svc.cluster.local".into(),
            routes: vec![
                RouteBox {
                    label: "http[0] default/<reviews>".into(),
                    matches: vec![],
                    action: None,
                    shadowed: None,
                    rejected: None,
                    to: vec![(0, 80, 80), (1, 20, 20)],
                },
                RouteBox {
                    label: "http[1] default/<reviews>".into(),
                    matches: vec!["uri prefix /a".into()],
                    action: None,
                    shadowed: Some("spec.http[0] matches first".into()),
                    rejected: None,
                    to: vec![(1, 100, 100)],
                },
            ],
            destinations: vec![
                DestinationBox {
                    host: "reviews.default.svc.cluster.local".into(),
                    subset: Some("v1".into()),
                    port: None,
                    endpoints: vec![0],
                },
                DestinationBox {
                    host: "reviews.default.svc.cluster.local".into(),
                    subset: Some("v2".into()),
                    port: None,
                    endpoints: vec![],
                },
            ],
            endpoints: vec![("127.0.0.1:20000".into(), "version=v1".into())],
        };
        let svg = draw(&picture);
        assert!(svg.contains("data-subset=\"v1\" data-weight=\"80\""), "{svg}");
        assert!(svg.contains("data-subset=\"v2\" data-weight=\"20\""), "{svg}");
        assert!(
            svg.contains(">80%</text>") && svg.contains(">20%</text>"),
            "{svg}"
        );
        assert!(svg.contains("class=\"route shadowed\""), "{svg}");
        assert!(svg.contains("class=\"route winning\""), "{svg}");
        assert!(svg.contains("class=\"destination missing\""), "{svg}");
        assert!(!svg.contains("<reviews>"), "{svg}");
        assert!(svg.contains("&lt;reviews&gt;"), "{svg}");
    }
}
