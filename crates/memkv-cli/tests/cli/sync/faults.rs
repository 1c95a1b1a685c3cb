//! The same agents with faults: syncs killed with SIGKILL at random moments (and started again),
//! the server restarted, connections cut mid-request. Afterwards, as without faults: both
//! folders equal the store, no write is lost, nothing was seen half-written, nothing uploaded
//! twice.

use std::time::Duration;

use super::converge::{Agents, check_no_double_uploads, check_nothing_lost, explain, in_step};
use super::{Rng, SyncProc, World, wait_for};

#[test]
fn kills_restarts_and_cut_connections_lose_nothing() {
    with_faults(World::new(&[]));
}

#[test]
fn kills_restarts_and_cut_connections_lose_nothing_on_postgres() {
    let Some(cluster) = crate::common::pg::cluster() else {
        return;
    };
    with_faults(World::on(Some(cluster.fresh_url()), &[]));
}

fn with_faults(mut world: World) {
    let (a, sa) = world.folder("a");
    let (b, sb) = world.folder("b");
    let mut syncs = [
        Some(SyncProc::start(&world, &a, &sa, "alpha", &[])),
        Some(SyncProc::start(&world, &b, &sb, "beta", &[])),
    ];
    let mut writing = Agents::start(&a, &b, [11, 12], 80);
    // The faults, while the agents write: 12 of them, 100 to 400 ms apart.
    let mut rng = Rng::new(7);
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
        match rng.below(4) {
            0 | 1 => {
                let k = rng.below(2) as usize;
                if let Some(mut s) = syncs[k].take() {
                    s.kill9();
                }
                let (f, s, name) = if k == 0 {
                    (&a, &sa, "alpha")
                } else {
                    (&b, &sb, "beta")
                };
                syncs[k] = Some(SyncProc::start(&world, f, s, name, &[]));
            }
            2 => world.restart_server(),
            _ => world.proxy.cut(),
        }
    }
    let lasts = writing.wait();
    let pairs = [(a.as_path(), sa.as_path()), (b.as_path(), sb.as_path())];
    let converged = wait_for(Duration::from_secs(90), || in_step(&world, &pairs));
    let torn = writing.stop();
    if !converged {
        // What each sync said last, for the cause.
        let tails: String = syncs
            .iter()
            .flatten()
            .map(|s| {
                let log = s.log();
                let lines: Vec<&str> = log.lines().collect();
                lines[lines.len().saturating_sub(60)..].join("\n") + "\n---\n"
            })
            .collect();
        panic!(
            "did not converge:\n{}\nthe syncs' last lines:\n{tails}",
            explain(&world, &pairs)
        );
    }
    assert_eq!(torn, Vec::<String>::new(), "files seen half-written");
    let logs: String = syncs.iter().flatten().map(|s| s.log()).collect();
    check_nothing_lost(&world, &a, &lasts, &logs);
    check_no_double_uploads(&world);
    drop(syncs);
}
