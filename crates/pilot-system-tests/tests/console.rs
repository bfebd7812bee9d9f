//! The console at `/ui` in a real headless Chromium (Debian's `chromium`,
//! installed by scripts/install-deps): pilot-discovery with bookinfo's
//! services, its networking objects (subsets and the 80/20 canary of
//! reviews), two v1alpha2 rules on ratings of which the second is
//! shadowed by the first, and two real Envoys that reject a rule (its
//! regex is over their RE2 limit) and are served without it.
//!
//! Every page loads without a console message (the pages have no script:
//! any message is a policy violation or an error) and every request it
//! made to the server was answered with success (Chromium's own record of
//! its requests, `--log-net-log`);
//! the route picture of reviews shows both subsets with their weights (in
//! the DOM of the SVG); the picture of ratings tells the winning route
//! from the shadowed one; the rejected rule is the first object of the
//! overview, its page says which proxies withhold it and Envoy's message,
//! and each proxy's page says what it rejected. The test saves
//! screenshots in `target/console-screenshots/`, and with
//! `PILOT_WRITE_SCREENSHOTS=1` in `docs/guide/console/` (the guide's).
//!
//! Under `CI=true` a missing chromium fails; elsewhere the test says
//! loudly that it skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pilot_system_tests::{Mesh, Store, get};
use pilot_test_support::{Discovery, Envoy, NACKED_REGEX, eventually, pilotctl};
use serde_json::Value;

const ENVOYS: usize = 2;

/// The ratings rules: a catch-all with the higher precedence, and a rule
/// for one user after it that can never match (pilot-analyze's PLT0104).
const RATINGS_RULES: &str = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: ratings-all, namespace: default}\nspec:\n  destination: {name: ratings}\n  precedence: 2\n  route: [{labels: {version: v1}}]\n---\napiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: ratings-jason, namespace: default}\nspec:\n  destination: {name: ratings}\n  precedence: 1\n  match: {request: {headers: {end-user: {exact: jason}}}}\n  route: [{labels: {version: v1}}]\n";

/// A rule pilot accepts and the test Envoys refuse.
fn bad_rule() -> String {
    format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: reviews-cookie, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  precedence: 9\n  match: {{request: {{headers: {{cookie: {{regex: \"{NACKED_REGEX}\"}}}}}}}}\n  route: [{{labels: {{version: v2}}}}]\n"
    )
}

/// The chromium binary, or `None` after a loud skip (a failure under
/// `CI=true`).
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium is not on PATH (Debian package chromium; run scripts/install-deps)"
        );
        eprintln!(
            "\n*** SKIPPED: the console tests need chromium (Debian package chromium; run scripts/install-deps) ***\n"
        );
    }
    found
}

/// A headless Chromium run on one page.
struct Browser {
    binary: PathBuf,
    profile: tempfile::TempDir,
}

/// What Chromium made of a page: its DOM after load, the console
/// messages it logged, and each request it made with the status line of
/// the answer (none when nothing answered).
struct Loaded {
    dom: String,
    console: Vec<String>,
    requests: Vec<(String, Option<String>)>,
}

impl Browser {
    fn new(binary: PathBuf) -> Self {
        Browser {
            binary,
            profile: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn run(&self, url: &str, action: &str, extra: &[String]) -> (String, String) {
        let output = Command::new(&self.binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--disable-background-networking",
                "--window-size=1400,1500",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(extra)
            .arg(action)
            .arg(url)
            .stdin(Stdio::null())
            .output()
            .expect("chromium runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "chromium failed on {url}: {stderr}");
        (stdout, stderr)
    }

    /// The page's DOM, its console messages and its requests.
    fn load(&self, url: &str) -> Loaded {
        let netlog = self.profile.path().join("netlog.json");
        let _ = std::fs::remove_file(&netlog);
        let (dom, stderr) = self.run(
            url,
            "--dump-dom",
            &[format!("--log-net-log={}", netlog.display())],
        );
        let console = stderr
            .lines()
            .filter(|line| line.contains(":CONSOLE"))
            .map(str::to_string)
            .collect();
        let log: Value = serde_json::from_str(&std::fs::read_to_string(&netlog).expect("Chromium's net log"))
            .expect("Chromium's net log is JSON");
        Loaded {
            dom,
            console,
            requests: requests(&log),
        }
    }

    /// A screenshot of the page in `path`.
    fn screenshot(&self, url: &str, path: &Path) {
        let (_, stderr) = self.run(url, &format!("--screenshot={}", path.display()), &[]);
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        assert!(size > 0, "no screenshot of {url} in {}: {stderr}", path.display());
    }
}

/// Each URL requested in a Chromium net log, with the status line of its
/// answer: `URL_REQUEST_START_JOB` events name the URL, and
/// `HTTP_TRANSACTION_READ_RESPONSE_HEADERS` events of the same source the
/// answer.
fn requests(log: &Value) -> Vec<(String, Option<String>)> {
    let types = &log["constants"]["logEventTypes"];
    let start = types["URL_REQUEST_START_JOB"].as_u64();
    let headers = types["HTTP_TRANSACTION_READ_RESPONSE_HEADERS"].as_u64();
    let mut out: Vec<(u64, String, Option<String>)> = Vec::new();
    for event in log["events"].as_array().into_iter().flatten() {
        let source = event["source"]["id"].as_u64().unwrap_or_default();
        let kind = event["type"].as_u64();
        if kind == start
            && let Some(url) = event["params"]["url"].as_str()
        {
            out.push((source, url.to_string(), None));
        } else if kind == headers
            && let Some(status) = event["params"]["headers"][0].as_str()
            && let Some(request) = out.iter_mut().rev().find(|(s, _, _)| *s == source)
        {
            request.2 = Some(status.to_string());
        }
    }
    out.into_iter().map(|(_, url, status)| (url, status)).collect()
}

/// Loads `path` of the server and checks that the page logged nothing to
/// the console, that every request it made to the server succeeded (its
/// stylesheet among them), and that it is a console page.
fn page(browser: &Browser, server: &Discovery, path: &str) -> String {
    let url = format!("{}{path}", server.url);
    let loaded = browser.load(&url);
    assert!(
        loaded.console.is_empty(),
        "{url} logged to the console:\n{}",
        loaded.console.join("\n")
    );
    let own: Vec<&(String, Option<String>)> = loaded
        .requests
        .iter()
        .filter(|(requested, _)| requested.starts_with(&server.url))
        .collect();
    for (requested, status) in &own {
        // Chromium asks for the favicon by itself once the page has
        // loaded, and the page may be dumped before that answer arrives:
        // no answer yet is no failure there. An answer must be 200.
        if status.is_none() && requested.ends_with("/ui/favicon.svg") {
            continue;
        }
        assert!(
            status.as_deref().is_some_and(|s| s.contains(" 200 ")),
            "{url}: the request for {requested} was answered {status:?}"
        );
    }
    for needed in [url.clone(), format!("{}/ui/style.css", server.url)] {
        assert!(
            own.iter().any(|(requested, _)| *requested == needed),
            "{url}: Chromium did not request {needed}: {:?}",
            loaded.requests
        );
    }
    // (A request elsewhere would be refused by the page's
    // Content-Security-Policy, which Chromium reports on the console; the
    // net log also holds Chromium's own background requests.)
    assert!(loaded.dom.contains("pilot console"), "{url}: {}", loaded.dom);
    loaded.dom
}

/// The part of `text` from the first `start` to the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start} in {text}"));
    let rest = &text[from..];
    let to = rest.find(end).map(|i| i + end.len()).unwrap_or(rest.len());
    &rest[..to]
}

/// The elements of `svg` that open with `<tag` and carry `class="class..."`.
fn elements<'a>(svg: &'a str, tag: &str, class: &str) -> Vec<&'a str> {
    let open = format!("<{tag} class=\"{class}");
    svg.match_indices(&open)
        .map(|(at, _)| {
            let rest = &svg[at..];
            &rest[..rest.find('>').map(|i| i + 1).unwrap_or(rest.len())]
        })
        .collect()
}

#[test]
fn the_console_shows_the_mesh_in_a_real_browser() {
    let Some(binary) = chromium() else { return };
    let browser = Browser::new(binary);
    let mesh = Mesh::bookinfo();
    let server = mesh.discovery(&Store::Memory, &["--status-interval", "200ms"]);
    let url = Some(server.url.as_str());
    for file in [
        "examples/bookinfo/networking/subsets.yaml",
        "examples/bookinfo/networking/reviews-80-20.yaml",
    ] {
        let applied = pilotctl(url, &["apply", "-f", file], &[], None);
        assert_eq!(applied.code, 0, "{applied:?}");
    }
    let created = pilotctl(url, &["create", "-f", "-"], &[], Some(RATINGS_RULES));
    assert_eq!(created.code, 0, "{created:?}");

    let nodes: Vec<String> = (0..ENVOYS)
        .map(|i| {
            format!(
                "sidecar~10.0.0.{}~console{i}.default~default.svc.cluster.local",
                60 + i
            )
        })
        .collect();
    let envoys: Vec<Envoy> = nodes
        .iter()
        .map(|node| Envoy::ads(node, &[("INTERCEPTION_MODE", "NONE")], server.xds_port, false).unwrap())
        .collect();
    eventually("the 80/20 VirtualService to reach both Envoys", || {
        acked(&get(url, "virtualservices", "reviews"), ENVOYS as u64)
    });

    // A rule the Envoys reject: withheld from both.
    let created = pilotctl(url, &["create", "-f", "-"], &[], Some(&bad_rule()));
    assert_eq!(created.code, 0, "{created:?}");
    eventually("the rejected rule to be withheld by both Envoys", || {
        get(url, "routerules", "reviews-cookie")["status"]["withheld"] == ENVOYS as u64
    });

    // The overview: the rejected rule first among the objects, the
    // proxies by state.
    let overview = page(&browser, &server, "/ui");
    let objects = between(&overview, "<table class=\"objects\">", "</table>");
    let first = between(objects, "<tbody><tr>", "</tr>");
    assert!(
        first.contains("reviews-cookie") && first.contains("NACKED"),
        "the rejected rule is not first: {objects}"
    );
    let proxies = between(&overview, "<table class=\"proxies\">", "</table>");
    for node in &nodes {
        assert!(proxies.contains(node.as_str()), "{proxies}");
    }
    let replicas = between(&overview, "<table class=\"replicas\">", "</table>");
    assert!(replicas.contains("SYNCED"), "{replicas}");

    // reviews: the 80/20 split drawn, both subsets with their weights.
    let reviews = page(
        &browser,
        &server,
        "/ui/services/reviews.default.svc.cluster.local",
    );
    let svg = between(&reviews, "<svg class=\"routes\"", "</svg>");
    let edges = elements(svg, "g", "edge");
    for (subset, weight) in [("v1", 80), ("v2", 20)] {
        assert!(
            edges
                .iter()
                .any(|e| e.contains(&format!("data-subset=\"{subset}\""))
                    && e.contains(&format!("data-weight=\"{weight}\""))),
            "no edge to subset {subset} with weight {weight}: {edges:?}"
        );
        assert!(svg.contains(&format!(">{weight}%</text>")), "{svg}");
        assert!(
            elements(svg, "g", "destination")
                .iter()
                .any(|d| d.contains(&format!("data-subset=\"{subset}\""))),
            "no destination box for subset {subset}: {svg}"
        );
        assert!(svg.contains(&format!(">subset {subset}</text>")), "{svg}");
    }
    // The rejected rule's route is drawn as the proxies see it: rejected.
    let rejected = elements(svg, "g", "route winning rejected");
    assert!(
        rejected.len() == 1 && rejected[0].contains("reviews-cookie"),
        "{svg}"
    );
    assert!(
        svg.contains(&format!("WITHHELD by {ENVOYS} of {ENVOYS} proxies")),
        "{svg}"
    );
    // Its endpoints: reviews v1 and v2 each have one instance.
    assert!(elements(svg, "g", "endpoint").len() >= 2, "{svg}");

    // ratings: the catch-all wins, the rule after it is shadowed.
    let ratings = page(
        &browser,
        &server,
        "/ui/services/ratings.default.svc.cluster.local",
    );
    let svg = between(&ratings, "<svg class=\"routes\"", "</svg>");
    let winning = elements(svg, "g", "route winning");
    let shadowed = elements(svg, "g", "route shadowed");
    assert!(winning.len() == 1 && winning[0].contains("ratings-all"), "{svg}");
    assert!(
        shadowed.len() == 1 && shadowed[0].contains("ratings-jason"),
        "{svg}"
    );
    assert!(ratings.contains("PLT0104"), "{ratings}");

    // The rejected rule's page: which proxies withhold it, and why.
    let object = page(&browser, &server, "/ui/objects/RouteRule/default/reviews-cookie");
    let distribution = between(&object, "<table class=\"distribution\">", "</table>");
    assert_eq!(distribution.matches("WITHHELD").count(), ENVOYS, "{distribution}");
    assert!(distribution.contains("program size"), "{distribution}");
    // A fine object's page: ACKed by both.
    let vs = page(&browser, &server, "/ui/objects/VirtualService/default/reviews");
    let distribution = between(&vs, "<table class=\"distribution\">", "</table>");
    assert_eq!(distribution.matches("ACKED").count(), ENVOYS, "{distribution}");

    // Each proxy's page: what it rejected, its scope.
    for node in &nodes {
        let proxy = page(&browser, &server, &format!("/ui/proxies/{node}"));
        let withheld = between(&proxy, "<table class=\"withheld\">", "</table>");
        assert!(
            withheld.contains("RouteRule default/reviews-cookie"),
            "{withheld}"
        );
        assert!(proxy.contains("<table class=\"scope\">"), "{proxy}");
        assert!(proxy.contains("reviews.default.svc.cluster.local"), "{proxy}");
    }

    // Screenshots.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("target/console-screenshots")];
    if std::env::var("PILOT_WRITE_SCREENSHOTS").as_deref() == Ok("1") {
        dirs.push(root.join("docs/guide/console"));
    }
    for dir in &dirs {
        std::fs::create_dir_all(dir).expect("the screenshots' directory");
        for (name, path) in [
            ("overview.png", "/ui".to_string()),
            (
                "service-reviews.png",
                "/ui/services/reviews.default.svc.cluster.local".to_string(),
            ),
            (
                "service-ratings.png",
                "/ui/services/ratings.default.svc.cluster.local".to_string(),
            ),
            (
                "object-rejected.png",
                "/ui/objects/RouteRule/default/reviews-cookie".to_string(),
            ),
            ("proxy.png", format!("/ui/proxies/{}", nodes[0])),
        ] {
            browser.screenshot(&format!("{}{path}", server.url), &dir.join(name));
        }
    }
    drop(envoys);
    server.terminate();
}

/// True when `object`'s status is about its current version, ACKed by
/// `proxies` proxies.
fn acked(object: &Value, proxies: u64) -> bool {
    let status = &object["status"];
    status["observedVersion"] == object["metadata"]["resourceVersion"] && status["acked"] == proxies
}
