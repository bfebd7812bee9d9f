//! The conformance suite of [`Membership`]: several pilot-discovery replicas
//! on one store see each other's records, and at most one at a time is the
//! elected status writer.
//!
//! A backend provides a [`MembershipFactory`]: an async function from a
//! list of replica names and a ttl to one membership per name, all on one
//! fresh backend (one etcd prefix, one Kubernetes namespace). Then
//! [`membership_conformance_suite!`](crate::membership_conformance_suite)
//! expands to one test per property. A backend with a single replica (the
//! in-memory store's [`LocalMembership`](pilot_model::LocalMembership))
//! runs the single-replica properties only:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use pilot_model::{LocalMembership, Membership};
//!
//! pilot_store::membership_conformance_suite!(single: |replicas: Vec<String>, _ttl: Duration| async move {
//!     replicas
//!         .into_iter()
//!         .map(|name| Arc::new(LocalMembership::new(name)) as Arc<dyn Membership>)
//!         .collect::<Vec<_>>()
//! });
//! # fn main() {}
//! ```
//!
//! The properties:
//! - single replica: publish then `members` returns the record, a second
//!   publish replaces it, a lone campaigner wins, resign withdraws it;
//! - several replicas: they see each other (ordered by name); at most one
//!   of several campaigners holds the election, and the holder keeps it
//!   while it campaigns; a replica dropped without resign leaves `members`
//!   and the election within its ttl (plus slack) and another campaigner
//!   takes over; resign withdraws the record and frees the election at once.
//!
//! Expiry is polled with a deadline of the ttl plus [`EXPIRY_SLACK`], never
//! asserted as a duration.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::future::{BoxFuture, join_all};
use pilot_model::{ConnectedProxy, Membership, ProxyDistribution, ReplicaRecord, TypeRecord};

use super::check::{equal, holds, ok};

/// Makes memberships for the named replicas, all on one fresh backend that
/// shares nothing with earlier calls, each with the given ttl (a backend
/// whose records never expire may ignore it).
pub trait MembershipFactory: Send + Sync {
    /// One membership per name, in the same order.
    fn make(&self, replicas: Vec<String>, ttl: Duration) -> BoxFuture<'static, Vec<Arc<dyn Membership>>>;
}

impl<F, Fut> MembershipFactory for F
where
    F: Fn(Vec<String>, Duration) -> Fut + Send + Sync,
    Fut: Future<Output = Vec<Arc<dyn Membership>>> + Send + 'static,
{
    fn make(&self, replicas: Vec<String>, ttl: Duration) -> BoxFuture<'static, Vec<Arc<dyn Membership>>> {
        Box::pin(self(replicas, ttl))
    }
}

/// How long past a replica's ttl the suite waits for its record and its
/// election to expire (clock granularity: Kubernetes' `renewTime` has
/// microseconds but `leaseDurationSeconds` whole seconds; etcd's lease
/// expiry runs on the leader's ticker).
pub const EXPIRY_SLACK: Duration = Duration::from_secs(10);

/// The ttl the multi-replica properties give the factory: short, so expiry
/// tests take seconds, and whole seconds, as Kubernetes Leases count.
pub const MEMBERSHIP_TTL: Duration = Duration::from_secs(3);

/// Expands to one `#[test]` per membership property, each on fresh
/// memberships from `$factory` (an async `Fn(Vec<String>, Duration) ->
/// Vec<Arc<dyn Membership>>`). `single: $factory` runs only the
/// single-replica properties.
#[macro_export]
macro_rules! membership_conformance_suite {
    (single: $factory:expr) => {
        $crate::conformance_suite!(@each $factory;
            membership_publish_read_back, membership_lone_campaigner_wins, membership_resign_withdraws);
    };
    ($factory:expr) => {
        $crate::membership_conformance_suite!(single: $factory);
        $crate::conformance_suite!(@each $factory;
            membership_replicas_see_each_other, membership_one_writer_at_a_time,
            membership_dead_replica_expires, membership_resign_frees_the_election);
    };
}

/// A record for `replica` with `proxies` proxies named `<replica>-<i>`.
pub fn replica_record(replica: &str, proxies: usize) -> ReplicaRecord {
    ReplicaRecord {
        replica: replica.to_string(),
        rest_address: Some("127.0.0.1:8080".into()),
        xds_address: Some("127.0.0.1:15010".into()),
        proxies: (0..proxies)
            .map(|i| {
                let node_id = format!("sidecar~10.0.0.{i}~{replica}-{i}.default~default.svc.cluster.local");
                ConnectedProxy {
                    node_id: node_id.clone(),
                    node_name: None,
                    incremental: i % 2 == 1,
                    types: [(
                        "CDS".to_string(),
                        TypeRecord {
                            sent: Some("2".into()),
                            acked: Some("2".into()),
                            nack: None,
                        },
                    )]
                    .into_iter()
                    .collect(),
                    distribution: ProxyDistribution {
                        node_id,
                        acked: Some([("RouteRule".to_string(), 7 + i as u64)].into_iter().collect()),
                        nack: None,
                        withheld: Vec::new(),
                    },
                    process: None,
                }
            })
            .collect(),
        // Whole seconds: the record's time survives RFC 3339.
        writer: false,
        published: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + proxies as u64),
    }
}

async fn make(factory: &dyn MembershipFactory, names: &[&str]) -> Vec<Arc<dyn Membership>> {
    let made = factory
        .make(names.iter().map(|n| n.to_string()).collect(), MEMBERSHIP_TTL)
        .await;
    equal(
        made.len(),
        names.len(),
        "the factory must make one membership per replica name",
    );
    for (membership, name) in made.iter().zip(names) {
        equal(
            membership.replica(),
            *name,
            "the factory must make the memberships in the order of the names (replica())",
        );
    }
    made
}

async fn members(membership: &dyn Membership) -> Vec<ReplicaRecord> {
    ok(membership.members().await, "members() must succeed")
}

fn names(records: &[ReplicaRecord]) -> Vec<&str> {
    records.iter().map(|r| r.replica.as_str()).collect()
}

/// Publish, then `members` returns the record; a second publish replaces
/// it (one record per replica, the newest).
pub async fn membership_publish_read_back(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-a"]).await;
    let a = &*made[0];
    let before = members(a).await;
    holds(
        before.is_empty(),
        "members() of a fresh backend, before any publish, must be empty",
        names(&before),
    );
    let first = replica_record("pilot-a", 2);
    ok(a.publish(&first).await, "publish must succeed");
    equal(
        members(a).await,
        vec![first],
        "members() must return the record published, exactly",
    );
    let second = replica_record("pilot-a", 3);
    ok(a.publish(&second).await, "a second publish must succeed");
    equal(
        members(a).await,
        vec![second],
        "a second publish must replace the first (one record per replica, the newest)",
    );
    let none = replica_record("pilot-a", 0);
    ok(
        a.publish(&none).await,
        "publish of a record with no proxies must succeed",
    );
    equal(
        members(a).await,
        vec![none],
        "a record with no proxies must be returned as published",
    );
}

/// A replica alone wins the election, and keeps it while it campaigns.
pub async fn membership_lone_campaigner_wins(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-a"]).await;
    let a = &*made[0];
    for round in 0..3 {
        holds(
            ok(a.campaign().await, "campaign must succeed"),
            &format!("round {round}: a lone replica's campaign must win (true)"),
            false,
        );
    }
}

/// Resign withdraws the record at once.
pub async fn membership_resign_withdraws(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-a"]).await;
    let a = &*made[0];
    ok(
        a.publish(&replica_record("pilot-a", 1)).await,
        "publish must succeed",
    );
    holds(
        ok(a.campaign().await, "campaign must succeed"),
        "a lone replica's campaign must win (true)",
        false,
    );
    ok(a.resign().await, "resign must succeed");
    let left = members(a).await;
    holds(
        left.is_empty(),
        "resign must withdraw the replica's record at once: members() must be empty",
        names(&left),
    );
}

/// Two replicas see each other's records, ordered by replica name whatever
/// the order they published in; each sees the other's replacement.
pub async fn membership_replicas_see_each_other(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-b", "pilot-a"]).await;
    let (b, a) = (&*made[0], &*made[1]);
    ok(
        b.publish(&replica_record("pilot-b", 2)).await,
        "publish must succeed",
    );
    ok(
        a.publish(&replica_record("pilot-a", 1)).await,
        "publish must succeed",
    );
    let expected = vec![replica_record("pilot-a", 1), replica_record("pilot-b", 2)];
    equal(
        members(a).await,
        expected.clone(),
        "members() must return every replica's record, ordered by replica name (read by pilot-a)",
    );
    equal(
        members(b).await,
        expected,
        "members() must return every replica's record, ordered by replica name (read by pilot-b)",
    );
    ok(
        b.publish(&replica_record("pilot-b", 0)).await,
        "a second publish must succeed",
    );
    equal(
        members(a).await,
        vec![replica_record("pilot-a", 1), replica_record("pilot-b", 0)],
        "another replica's second publish must replace its first, as read by pilot-a",
    );
}

/// Three replicas campaign concurrently, round after round: exactly one
/// wins each round, and it is the same one every round (the holder keeps
/// it while it campaigns).
pub async fn membership_one_writer_at_a_time(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-a", "pilot-b", "pilot-c"]).await;
    let mut holder = None;
    for round in 0..6 {
        let results = join_all(made.iter().map(|m| m.campaign())).await;
        let winners: Vec<&str> = made
            .iter()
            .zip(&results)
            .filter(|(_, won)| *ok(won.as_ref(), "campaign must succeed"))
            .map(|(m, _)| m.replica())
            .collect();
        holds(
            winners.len() == 1,
            &format!("round {round}: exactly one of several concurrent campaigns must win; winners"),
            &winners,
        );
        match holder {
            None => holder = Some(winners[0].to_string()),
            Some(ref held) => equal(
                winners[0],
                held.as_str(),
                &format!("round {round}: the holder must keep the election while it campaigns"),
            ),
        }
    }
}

/// Polls `check` every 200 ms until it is true or `deadline` passes; while
/// polling, `alive` publishes and campaigns (a live replica renews).
async fn until_while_alive<F, Fut>(
    deadline: Instant,
    alive: &dyn Membership,
    record: &ReplicaRecord,
    mut check: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    loop {
        ok(
            alive.publish(record).await,
            "a live replica's publish (its renewal) must succeed",
        );
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A replica dropped without resign (kill -9) leaves `members` and the
/// election within its ttl plus slack, while the live replica keeps
/// renewing; the live one then takes the election.
pub async fn membership_dead_replica_expires(factory: &dyn MembershipFactory) {
    let mut made = make(factory, &["pilot-a", "pilot-b"]).await;
    let (Some(b), Some(a)) = (made.pop(), made.pop()) else {
        unreachable!("make checked there is one membership per name")
    };
    let ttl = a.ttl();
    ok(
        a.publish(&replica_record("pilot-a", 2)).await,
        "publish must succeed",
    );
    holds(
        ok(a.campaign().await, "campaign must succeed"),
        "the first campaign on a fresh backend must win (true)",
        false,
    );
    let b_record = replica_record("pilot-b", 1);
    ok(b.publish(&b_record).await, "publish must succeed");
    holds(
        !ok(b.campaign().await, "campaign must succeed"),
        "a campaign while another replica holds the election must lose (false)",
        true,
    );
    equal(
        names(&members(&*b).await),
        vec!["pilot-a", "pilot-b"],
        "members() must return every live replica's record, ordered by name",
    );
    // a dies: no resign, no further renewal.
    drop(a);
    let deadline = Instant::now() + ttl + EXPIRY_SLACK;
    let live: &dyn Membership = &*b;
    let expired = until_while_alive(deadline, live, &b_record, move || async move {
        names(&members(live).await) == ["pilot-b"]
    })
    .await;
    assert!(
        expired,
        "a replica that stopped renewing must leave members() within its ttl ({ttl:?}) plus \
         {EXPIRY_SLACK:?}: its record is still listed"
    );
    let took_over = until_while_alive(deadline, live, &b_record, move || async move {
        ok(live.campaign().await, "campaign must succeed")
    })
    .await;
    assert!(
        took_over,
        "a replica that stopped renewing must lose the election within its ttl ({ttl:?}) plus \
         {EXPIRY_SLACK:?}: the live replica's campaign still loses"
    );
    equal(
        members(&*b).await,
        vec![b_record],
        "members() must return only the live replica's record once the other expired",
    );
}

/// A holder that resigns withdraws its record and frees the election at
/// once: the next campaign of another replica wins, with no ttl to wait.
pub async fn membership_resign_frees_the_election(factory: &dyn MembershipFactory) {
    let made = make(factory, &["pilot-a", "pilot-b"]).await;
    let (a, b) = (&*made[0], &*made[1]);
    ok(
        a.publish(&replica_record("pilot-a", 1)).await,
        "publish must succeed",
    );
    ok(
        b.publish(&replica_record("pilot-b", 1)).await,
        "publish must succeed",
    );
    holds(
        ok(a.campaign().await, "campaign must succeed"),
        "the first campaign on a fresh backend must win (true)",
        false,
    );
    holds(
        !ok(b.campaign().await, "campaign must succeed"),
        "a campaign while another replica holds the election must lose (false)",
        true,
    );
    ok(a.resign().await, "resign must succeed");
    equal(
        members(b).await,
        vec![replica_record("pilot-b", 1)],
        "resign must withdraw the replica's record at once, as the others read it",
    );
    holds(
        ok(b.campaign().await, "campaign must succeed"),
        "the holder's resign must free the election at once: the next campaign must win (true)",
        false,
    );
    holds(
        ok(b.campaign().await, "campaign must succeed"),
        "the new holder must keep the election while it campaigns (true)",
        false,
    );
}
