//! HTML for the console: escaping of every text and attribute value that
//! comes from an object, a proxy or a service ([`esc`]), and the frame of
//! every page ([`page`]): no script, one stylesheet of our own, a
//! `<meta http-equiv=refresh>` so that an open page follows the mesh.

use std::fmt::Write;

/// `text` safe inside an element or a quoted attribute value: `&`, `<`,
/// `>`, `"` and `'` as character references.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `segment` safe as one path segment of a console link: everything but
/// unreserved characters percent-encoded (then escaped for the attribute
/// by the caller's [`esc`], which leaves it unchanged).
pub(crate) fn path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// The link to an object's page.
pub(crate) fn object_href(kind: &str, namespace: &str, name: &str) -> String {
    format!(
        "/ui/objects/{}/{}/{}",
        path_segment(kind),
        path_segment(namespace),
        path_segment(name)
    )
}

/// The link to a service's page.
pub(crate) fn service_href(host: &str) -> String {
    format!("/ui/services/{}", path_segment(host))
}

/// The link to a proxy's page.
pub(crate) fn proxy_href(node: &str) -> String {
    format!("/ui/proxies/{}", path_segment(node))
}

/// `<a href="href">text</a>`, both escaped.
pub(crate) fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", esc(href), esc(text))
}

/// How often an open page reloads itself, in seconds.
pub(crate) const REFRESH_SECONDS: u32 = 5;

/// A whole page: `title` (escaped here) and `body` (already HTML).
pub(crate) fn page(title: &str, body: &str) -> String {
    let title = esc(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>{title} · pilot</title>\
         <link rel=\"icon\" href=\"/ui/favicon.svg\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"/ui/style.css\"></head>\n\
         <body><header><a class=\"brand\" href=\"/ui\">pilot console</a>\
         <span class=\"note\">read-only · reloads every {REFRESH_SECONDS} s</span></header>\n\
         <main><h1>{title}</h1>\n{body}</main></body></html>\n"
    )
}

/// A table: `head` cells (escaped here) and `rows` of cells that are
/// already HTML.
pub(crate) fn table(class: &str, head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<table class=\"{}\"><thead><tr>", esc(class));
    for cell in head {
        let _ = write!(out, "<th>{}</th>", esc(cell));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// A state word in a badge whose class is the word in lower case
/// (`SYNCED`, `STALE`, `NACKED`, `error`, `warning` ...).
pub(crate) fn badge(word: &str) -> String {
    let class: String = word
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("<span class=\"badge {}\">{}</span>", esc(&class), esc(word))
}

/// The console's stylesheet, served at `/ui/style.css` (a file of its own:
/// the Content-Security-Policy allows no inline style).
pub(crate) const STYLE: &str = r#"body{font-family:system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2b45;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:baseline}
header a.brand{color:#fff;font-weight:bold;text-decoration:none}
header .note{color:#b8c2d6;font-size:.85em}
main{padding:0 1.2em 2em}
h1{font-size:1.4em;word-break:break-all}
h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;background:#fff;margin:.4em 0;min-width:40%}
th,td{border:1px solid #d5d9e0;padding:.3em .6em;text-align:left;vertical-align:top;font-size:.9em}
th{background:#eceff4}
code,pre{font-family:ui-monospace,monospace;font-size:.85em}
pre{background:#fff;border:1px solid #d5d9e0;padding:.5em;white-space:pre-wrap;word-break:break-all}
.badge{display:inline-block;padding:0 .45em;border-radius:.3em;font-size:.8em;font-weight:bold;background:#d5d9e0}
.badge.synced,.badge.acked,.badge.winning,.badge.true{background:#cdebd3;color:#14532d}
.badge.stale,.badge.pending,.badge.not-sent,.badge.warning,.badge.shadowed{background:#fdecc8;color:#713f12}
.badge.nacked,.badge.withheld,.badge.rejected,.badge.error,.badge.false{background:#f8d0d0;color:#7f1d1d}
.empty{color:#667085;font-style:italic}
svg.routes{background:#fff;border:1px solid #d5d9e0;max-width:100%;height:auto}
svg.routes text{font-family:system-ui,sans-serif;font-size:12px;fill:#1d2430}
svg.routes .host rect{fill:#dbe4f5;stroke:#1d2b45}
svg.routes .route rect{fill:#e4f3e6;stroke:#2f7d3b}
svg.routes .route.shadowed rect{fill:#f2f2f2;stroke:#9aa1ad;stroke-dasharray:4 3}
svg.routes .route.shadowed text{fill:#6b7280}
svg.routes .route.rejected rect{fill:#fde2e2;stroke:#b91c1c;stroke-width:2}
svg.routes .destination rect{fill:#fff7e0;stroke:#a16207}
svg.routes .endpoint rect{fill:#f3e8ff;stroke:#6b21a8}
svg.routes .missing rect{fill:#fde2e2;stroke:#b91c1c}
svg.routes line,svg.routes path{stroke:#4b5563;fill:none}
svg.routes .weight{font-weight:bold}
"#;

/// The console's icon, served at `/ui/favicon.svg` (so that the browser's
/// request for one is answered).
pub(crate) const FAVICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"><circle cx=\"8\" cy=\"8\" r=\"7\" fill=\"#1d2b45\"/><path d=\"M4 8h8M8 4v8\" stroke=\"#fff\" stroke-width=\"2\"/></svg>\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_from_objects_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"y\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        let page = page("<b>", "");
        assert!(page.contains("<h1>&lt;b&gt;</h1>"), "{page}");
        assert_eq!(
            link("/ui/x?a=1&b=\"2\"", "<i>"),
            "<a href=\"/ui/x?a=1&amp;b=&quot;2&quot;\">&lt;i&gt;</a>"
        );
    }

    #[test]
    fn link_segments_are_percent_encoded() {
        assert_eq!(
            object_href("VirtualService", "default", "a/b c\"<"),
            "/ui/objects/VirtualService/default/a%2Fb%20c%22%3C"
        );
        assert_eq!(
            proxy_href("sidecar~10.0.0.1~a.b~c"),
            "/ui/proxies/sidecar~10.0.0.1~a.b~c"
        );
    }
}
