//! The replay: a trace's box costs run again on `P` modelled threads under each scheduler.
//!
//! Every phase is an event simulation: each thread takes boxes (its own list's front, a
//! victim's back, or the shared FIFO's head) whenever it is free, a box taking its recorded
//! cost times the machine's speed, plus `moved` when its previous run was on another thread,
//! plus `remote` when its data sits on another NUMA node, all times the thread's noise for the
//! phase; each thread starts the phase after a random wake-up delay. The phase ends at the
//! last thread's end plus the barrier.
//!
//! pbs's mappings come from its plan ([`super::plan::plan_pbs`]: the real balancer under the
//! executor's own rules, fed with the recorded box loads of the iteration just ended); the
//! balancer's cost is its steps times a fitted cost per box and step ([`Machine::balancer_box`],
//! growing with log2 of the vCores as the assignment does), so that the replay is
//! deterministic for a trace. It stops the iteration ([`Rebalancing::Stop`]), runs in the
//! first idle thread's slack, a step at a time ([`Rebalancing::IdleTime`]), or on a balancer
//! thread of its own beside the workers ([`Rebalancing::Thread`]), as the executor does; by
//! default in slack while a step fits there, else on the thread, which takes a worker's core
//! for a time slice ([`Machine::slice`]), or is lent the last worker's core
//! ([`Rebalancing::LentCore`]: the others steal its boxes, the thread runs whole phases).
//! Left out: memory bandwidth, hyper-threads, the time slicing of more workers than cores,
//! and noise that lasts: the plan's measurement noise is drawn afresh every iteration, which
//! the executor's medians filter out where a core slowed for several iterations would not be.
//!
//! The remappers ([`REMAPPERS`]: the seed papers', and diffusion) replay as the `Remapping` executor runs them:
//! owner lists with no stealing, their remappings between iterations on the critical path,
//! costed by their real time here ([`super::plan::plan_remap`]).

use pbs_scheduler::executor::IdleParts;
use pbs_scheduler::executors::{Lending, PbsOptions, STEAL_MIN_PHASE};
use pbs_scheduler::report::IdleShares;

use super::machine::Machine;
use super::plan::{unit_cost, PbsPlan};
use super::trace::Trace;
use pbs::rng::SplitMix64;

/// The schedulers the model replays.
pub const SCHEDULERS: [&str; 4] = ["pbs", "static", "eager", "ws"];

/// The remappers the model replays beside them ([`super::plan::plan_remap`]); `norcb` is not
/// one: a trace holds box costs, not the particles' motion its cuts follow.
pub const REMAPPERS: [&str; 6] = ["rcb", "packsteal", "vector-rcb", "vector-greedy", "norm-greedy", "diffusion"];

/// Where pbs's balancer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebalancing {
    /// Between iterations, all threads waiting, the assignments of each step shared by all
    /// threads (the executor with `overlap: false`).
    Stop,
    /// Between iterations, on one thread: the executor the 16-core measurements were taken
    /// with, before its assignments ran on the pool, and before an imbalance had to be one
    /// thread's to be fixed ([`pbs_scheduler::executors::RebalancePolicy::without_waiting`]).
    StopSerial,
    /// In the first idle thread's slack, a step at a time, while a step fits in a phase's
    /// slack, else as [`Rebalancing::Stop`].
    IdleTime,
    /// In slack while a step fits there, else as [`Rebalancing::Thread`] (`PBS_LEND=never`).
    IdleTimeOrThread,
    /// On a balancer thread beside the workers, serially, sharing a core: see [`replay`].
    Thread,
    /// As [`Rebalancing::IdleTimeOrThread`], the last worker lending the thread its core
    /// where that pays ([`Lending::pays`], on the run's units and the last iteration's time):
    /// the executor's default (`PBS_LEND=auto`) where the workers hold every core.
    LentCore,
}

impl Rebalancing {
    /// By the names of `pbs-bench model --rebalancing`.
    pub fn by_name(name: &str) -> Option<Rebalancing> {
        Some(match name {
            "overlap" => Rebalancing::IdleTimeOrThread,
            "idle" => Rebalancing::IdleTime,
            "thread" => Rebalancing::Thread,
            "stop" => Rebalancing::Stop,
            "lend" => Rebalancing::LentCore,
            _ => return None,
        })
    }

    /// Whether a rebalancing that starts over lands at once, as the executor's runs off the
    /// critical path do ([`PbsOptions::restart_lands_at_once`]). `IdleTime` runs are
    /// planned as stopping ones, which they are whenever a step outlasts the slack: the plan
    /// is made before the replay knows where each run goes.
    pub fn lands_restart_at_once(self) -> bool {
        matches!(self, Rebalancing::IdleTimeOrThread | Rebalancing::Thread | Rebalancing::LentCore)
            && PbsOptions::default().restart_lands_at_once
    }
}

/// Share of a balancer step that the pool's threads speed up as if perfectly, when the
/// executor stops for a rebalancing and runs its assignments on all of them: a step on `P`
/// threads takes `1 − share + share / P` of its time alone. The assignments are 70 % of a step
/// at 16 vCores on this VM, but on the 16-core lease the pool took 0.42–1.18 × one thread's
/// time over 1,024 and 4,096 boxes and 16–256 vCores (docs/results.md, "Sixteen threads"):
/// shares of 0.27–0.62 where it helped, 0.4 between them.
const ASSIGNMENT_SHARE: f64 = 0.4;

/// A balancer step's time on a pool of `threads` over its time alone ([`ASSIGNMENT_SHARE`]).
fn on_the_pool(threads: usize) -> f64 {
    1.0 - ASSIGNMENT_SHARE + ASSIGNMENT_SHARE / threads as f64
}

/// One modelled run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Modelled {
    /// `pbs`, `static`, `eager`, `ws` or one of [`REMAPPERS`].
    pub scheduler: String,
    /// Modelled threads.
    pub threads: usize,
    /// NUMA nodes the threads are spread over (consecutive threads share a node).
    pub numa_nodes: usize,
    /// `Σ busy / (threads × wall)`.
    pub efficiency: f64,
    /// Where the rest of the wall time went, as `pbs-bench run` splits it; `executor` is pbs's
    /// own work in a phase ([`Machine::executor_thread`]), 0 for the others.
    pub idle_shares: IdleShares,
    /// Mean iteration time, ms.
    pub iter_ms: f64,
    /// Rebalancing on the critical path / wall time.
    pub rebalance_critical_fraction: f64,
    /// Box executions whose data sat on another node than their thread.
    pub remote_fraction: f64,
    /// Box executions on the same thread as that box's previous execution, among those with
    /// a previous one (docs/design.md's affinity).
    pub affinity: f64,
    /// Rebalancings taken on (pbs), or remappings computed (the remappers).
    pub rebalances: usize,
    /// Rebalancings given up, still under way after `PbsOptions::max_pending` iterations in
    /// idle time or `max_pending_on_thread` on the balancer thread (pbs).
    pub rebalances_abandoned: usize,
    /// Per phase of an iteration, `Σ max_thread work / Σ mean_thread work` (docs/design.md's
    /// vector imbalance, as `pbs-bench run` reports it: work stolen counts for the thief).
    pub phase_max_avg: Vec<f64>,
}

/// Who runs what in one phase.
#[derive(Clone)]
struct Lists {
    /// Per thread, its boxes in the order it runs them (front first).
    own: Vec<std::collections::VecDeque<u32>>,
}

/// How idle threads find work.
#[derive(Clone, Copy)]
enum Steal<'a> {
    /// They do not.
    Never,
    /// From the back of the first thread in their order with a box left, up to two boxes,
    /// run at once (pbs).
    Neighbours(&'a [Vec<u32>]),
    /// Half of a random victim's remaining boxes, from the back (work stealing).
    Half,
}

/// The state of the replay that lasts across phases.
#[derive(Clone)]
struct Boxes {
    /// Thread of each box's previous run.
    last: Vec<u32>,
    /// NUMA node holding each box's data (first touch; moved with pbs's migrations).
    home: Vec<u32>,
    remote: u64,
    runs: u64,
    /// Runs of a box that ran before, and those on the same thread as its previous run.
    reruns: u64,
    same_thread: u64,
}

const NONE: u32 = u32::MAX;

impl Boxes {
    /// `n` boxes that have not run yet, their data nowhere yet.
    fn new(n: usize) -> Boxes {
        Boxes { last: vec![NONE; n], home: vec![NONE; n], remote: 0, runs: 0, reruns: 0, same_thread: 0 }
    }
}

/// Replays `iterations` iterations of `trace` under `scheduler` on `threads` threads over
/// `numa_nodes` nodes.
#[allow(clippy::too_many_arguments)]
pub fn replay(
    trace: &Trace,
    scheduler: &str,
    threads: usize,
    numa_nodes: usize,
    machine: &Machine,
    plan: Option<&PbsPlan>,
    rebalancing: Rebalancing,
    iterations: usize,
) -> Result<Modelled, String> {
    if threads == 0 || numa_nodes == 0 || numa_nodes > threads {
        return Err(format!("{threads} threads over {numa_nodes} NUMA nodes: need 1 ≤ nodes ≤ threads"));
    }
    let remapper = REMAPPERS.contains(&scheduler);
    if (scheduler == "pbs" || remapper) && plan.is_none() {
        return Err(format!("{scheduler} needs its plan (plan_pbs, plan_remap)"));
    }
    let n = trace.boxes();
    let node_of = |t: usize| (t * numa_nodes / threads) as u32;
    let mut state = Boxes::new(n);
    let mut rng = SplitMix64::new(0x5eed ^ threads as u64);
    let (mut wall, mut busy, mut critical) = (0.0, 0.0, 0.0);
    // Where the threads' idle time went (docs/design.md, "Idle time"), seconds; and the wall
    // time outside the phases.
    let (mut idle, mut phases_wall) = (IdleParts::default(), 0.0);
    let barrier = machine.barrier_at(threads);
    // pbs's own work in each phase and between iterations (the leases measured none for
    // static, ws and eager, whose phase is the pool's; the remappers' was not measured).
    let (executor, between) =
        if scheduler == "pbs" { (machine.executor_at(threads), machine.iteration_at(threads)) } else { (0.0, 0.0) };
    let blocks: Vec<Vec<u32>> =
        (0..threads).map(|t| ((t * n / threads) as u32..((t + 1) * n / threads) as u32).collect()).collect();
    // pbs: the owners in force, the next planned rebalancing, one under way in slack.
    let mut owners: Vec<u32> = plan.map_or_else(Vec::new, |p| p.initial.clone());
    let mut order = neighbour_order(trace, &owners, threads, &node_of);
    let mut next_event = 0;
    let mut pending: Option<(usize, f64, usize)> = None; // in slack: (event, unit time, units left)
    let mut pending_age = 0;
    let mut away: Option<Away> = None; // on the balancer thread
    let (mut rebalances, mut abandoned, mut phase_count) = (0, 0, 0usize);
    // What the executor learns: a unit's time from its initial balancing (on the pool), then
    // from its last run; and the slack per phase of the last iteration.
    let unit = machine.speed * unit_cost(machine.balancer_box, n, threads.min(n));
    let mut unit_seen = unit * on_the_pool(threads);
    let mut slack_now = 0.0;
    // The balancer time a run in slack spent in this iteration's phases, and its overrun.
    let (mut slack_spent, mut slack_over) = (0.0, 0.0);
    // Per phase of an iteration: Σ max_thread work, Σ mean_thread work.
    let mut phase_busy: Vec<(f64, f64)> = Vec::new();
    // `Stealing::Auto` as the executor decides it: at the end of each iteration, from its busy
    // time over threads and phases, for every phase of the next (none in the first); idle
    // time measured in an iteration that did not steal is not counted for one that will.
    let options = PbsOptions::default();
    let (mut steal_on, mut iteration_work) = (false, 0.0);
    for i in 0..iterations {
        let iteration_start = wall;
        let phases = &trace.costs[trace.recorded(i)];
        for (p, costs) in phases.iter().enumerate() {
            if phase_busy.len() <= p {
                phase_busy.resize(p + 1, (0.0, 0.0));
            }
            let noise: Vec<f64> = (0..threads).map(|_| 1.0 - machine.noise * rng.next_f64().max(1e-12).ln()).collect();
            // The worker whose core the balancer thread has: it runs nothing, the others steal
            // all its boxes.
            let lender = away.as_ref().filter(|a| a.lent && a.remaining > 0.0).map(|_| threads - 1);
            let (lists, steal) = match scheduler {
                "static" => (lists_of(&blocks), Steal::Never),
                "ws" => {
                    // rayon's join: the worker that takes the phase splits the range and keeps
                    // its first block; the others steal the rest in an order that changes from
                    // one phase to the next, each from a random block (measured affinity on 16
                    // cores: 0.93 at 2 threads, 0.32–0.48 at 4, 0.07–0.15 at 16).
                    let mut perm: Vec<usize> = (0..threads).collect();
                    for i in (2..threads).rev() {
                        perm.swap(i, 1 + (rng.next_f64() * i as f64) as usize % i);
                    }
                    let shuffled: Vec<Vec<u32>> = perm.iter().map(|&b| blocks[b].clone()).collect();
                    (lists_of(&shuffled), Steal::Half)
                }
                "pbs" => {
                    let mut own = vec![Vec::new(); threads];
                    for (k, &o) in owners.iter().enumerate() {
                        own[o as usize].push(k as u32);
                    }
                    let steal = if steal_on || lender.is_some() { Steal::Neighbours(&order) } else { Steal::Never };
                    (lists_of(&own), steal)
                }
                _ if remapper => {
                    let mut own = vec![Vec::new(); threads];
                    for (k, &o) in owners.iter().enumerate() {
                        own[o as usize].push(k as u32);
                    }
                    (lists_of(&own), Steal::Never)
                }
                "eager" => (Lists { own: Vec::new() }, Steal::Never),
                other => {
                    let known = [&SCHEDULERS[..], &REMAPPERS[..]].concat().join(", ");
                    return Err(format!("unknown scheduler {other:?}; expected one of {known}"));
                }
            };
            let mut wake: Vec<f64> = (0..threads).map(|_| -machine.wake * rng.next_f64().max(1e-12).ln()).collect();
            let run = |noise: &[f64], wake: &[f64], lists: Lists, state: &mut Boxes, rng: &mut SplitMix64| {
                let cost = |k: u32, t: usize, state: &Boxes| {
                    let k = k as usize;
                    let mut c = machine.speed * costs[k];
                    if state.last[k] != NONE && state.last[k] != t as u32 {
                        c += machine.moved;
                    }
                    if state.home[k] != NONE && state.home[k] != node_of(t) {
                        c += machine.remote;
                    }
                    c * noise[t]
                };
                if scheduler == "eager" {
                    run_fifo(n, wake, machine, state, &cost, &node_of, rng)
                } else {
                    run_lists(lists, steal, lender, wake, machine, state, &cost, &node_of, rng)
                }
            };
            let last_of = |ends: &[(f64, f64)]| ends.iter().fold(0.0f64, |m, e| m.max(e.0));
            // The balancer thread shares a core with one worker (the modelled machine has a
            // core per worker; the OS moves the thread about: a different worker each phase),
            // which is away for the thread's time slice (or what the balancer has left) before
            // it starts the phase: its neighbours steal its boxes, but the phase cannot end
            // without it. The phase is also run without the thread, so that what sharing
            // costs is known.
            let (mut alone, mut away_for) = (None, 0.0);
            if let Some(a) = away.as_ref().filter(|a| a.remaining > 0.0 && !a.lent) {
                let (mut state, mut rng) = (state.clone(), rng.clone());
                alone = Some(last_of(&run(&noise, &wake, lists.clone(), &mut state, &mut rng)));
                away_for = a.remaining.min(machine.slice);
                wake[phase_count % threads] += away_for;
            }
            phase_count += 1;
            let ends = run(&noise, &wake, lists, &mut state, &mut rng);
            let working = ends.iter().enumerate().filter(|&(t, _)| lender != Some(t));
            let (first, last) = working.fold((f64::INFINITY, 0.0f64), |(a, b), (_, &(e, _))| (a.min(e), b.max(e)));
            let work: Vec<f64> = ends.iter().map(|e| e.1).collect();
            let total = work.iter().sum::<f64>();
            busy += total;
            iteration_work += total;
            let per_phase = &mut phase_busy[p];
            per_phase.0 += work.iter().copied().fold(0.0, f64::max);
            per_phase.1 += total / threads as f64;
            slack_now += last - first;
            let mut phase = last + barrier + executor;
            // The lender runs nothing: its whole phase is waiting, as the executor counts it.
            let spans = ends.iter().enumerate().map(|(t, &(end, work))| match lender {
                Some(l) if l == t => (0.0, 0.0, 0.0),
                _ => (wake[t], end, work),
            });
            let mut parts = IdleParts { barrier, executor, ..IdleParts::default() };
            for (start, end, work) in spans {
                parts.late_start += start / threads as f64;
                parts.between_tasks += (end - start - work).max(0.0) / threads as f64;
                parts.waiting += (last - end) / threads as f64;
            }
            // A rebalancing under way runs a unit at a time from the first idle thread's end
            // while another thread works; a unit that outlasts them holds the barrier.
            if let Some((_, unit, left)) = pending.as_mut() {
                let mut at = first;
                while *left > 0 && at < last {
                    at += *unit;
                    *left -= 1;
                }
                let over = (at - last).max(0.0);
                slack_spent += at - first;
                slack_over += over;
                phase += over;
                critical += over;
                // The balancing thread's overrun is time between its tasks; the others wait.
                parts.between_tasks += over / threads as f64;
                parts.waiting += over * (threads - 1) as f64 / threads as f64;
            }
            // On its thread: its slice on the shared core, then the first idle worker's core;
            // on a lent core, the whole phase.
            if let (Some(a), Some(alone)) = (away.as_mut(), alone) {
                critical += (last - alone).max(0.0);
                a.remaining -= away_for + (phase - first.max(away_for)).max(0.0);
            } else if let Some(a) = away.as_mut().filter(|_| lender.is_some()) {
                a.remaining -= phase;
            }
            wall += phase;
            phases_wall += phase;
            idle.add(&parts, 1.0);
        }
        wall += between;
        critical += between;
        let last_iteration = wall - iteration_start;
        let mut slack_per_phase = std::mem::take(&mut slack_now) / phases.len().max(1) as f64;
        let stole = steal_on;
        steal_on = std::mem::take(&mut iteration_work) / (threads * phases.len().max(1)) as f64 >= STEAL_MIN_PHASE;
        if steal_on && !stole {
            slack_per_phase = 0.0;
        }
        // Between iterations: take on an ended rebalancing (give up a late one), or decide the
        // next one.
        let ended = match (pending.as_ref(), away.as_ref()) {
            (Some(&(e, unit, 0)), _) => Some((e, unit)),
            (_, Some(a)) if a.remaining <= 0.0 => Some((a.event, a.unit)),
            _ => None,
        };
        // A run back from the balancer thread is taken on only if it balances this iteration's
        // loads better than the owners in force (the executor's check on fresh loads).
        let stale = |e: usize| {
            let loads = trace.loads(i);
            let imbalance = |o: &[u32]| pbs::metrics::max_avg(&pbs::metrics::charges(o, &loads, threads));
            away.is_some() && imbalance(&plan.expect("pbs has a plan").events[e].owners) >= imbalance(&owners)
        };
        // A run back from the thread is checked on fresh loads (taken on or not), serially.
        if ended.is_some() && away.is_some() {
            let c = machine.take_on_cost(n, threads);
            wall += c;
            critical += c;
        }
        if let Some((_, run_unit)) = ended.filter(|&(e, _)| stale(e)) {
            unit_seen = run_unit;
            abandoned += 1;
            (pending, away) = (None, None);
        } else if let Some((e, run_unit)) = ended {
            unit_seen = run_unit;
            let moved =
                take_on(&mut owners, &plan.expect("pbs has a plan").events[e].owners, &mut state, threads, &node_of);
            let c = machine.migrate * moved as f64;
            wall += c;
            critical += c;
            order = neighbour_order(trace, &owners, threads, &node_of);
            rebalances += 1;
            (pending, away) = (None, None);
        } else if pending.is_some() || away.is_some() {
            pending_age += 1;
            if pending_age > if away.is_some() { options.max_pending_on_thread } else { options.max_pending } {
                abandoned += 1;
                (pending, away) = (None, None);
            }
        }
        // A run in slack whose overruns cost more than the balancer thread would for the same
        // time goes on there, as the executor moves it (the modelled thread shares a worker's
        // core unless one is lent).
        let (spent, over) = (std::mem::take(&mut slack_spent), std::mem::take(&mut slack_over));
        if let Some((event, unit, left)) = pending.filter(|p| p.2 > 0) {
            let lendable = rebalancing == Rebalancing::LentCore;
            if matches!(rebalancing, Rebalancing::IdleTimeOrThread | Rebalancing::LentCore) {
                let remaining = unit * left as f64;
                let lent = lendable && Lending::pays(remaining, last_iteration, threads);
                let share = if lent { 1.0 / threads as f64 } else { 1.0 };
                if over > share * spent {
                    away = Some(Away { event, unit, remaining, lent });
                    (pending, pending_age) = (None, 0);
                }
            }
        }
        if let Some(plan) = plan.filter(|_| remapper) {
            // A remapping runs between iterations, on the critical path, as the executor runs it.
            if let Some(ev) = plan.events.iter().find(|e| e.at == i) {
                let moved = take_on(&mut owners, &ev.owners, &mut state, threads, &node_of);
                let c = machine.speed * ev.cost.unwrap_or(0.0) + machine.migrate * moved as f64;
                wall += c;
                critical += c;
                rebalances += 1;
            }
        }
        if let Some(plan) = plan.filter(|_| scheduler == "pbs") {
            while next_event < plan.events.len() && plan.events[next_event].at < i {
                next_event += 1; // decided while another was under way: skipped
            }
            let idle = pending.is_none() && away.is_none();
            if next_event < plan.events.len() && plan.events[next_event].at == i && idle {
                let ev = &plan.events[next_event];
                let fits = unit_seen <= slack_per_phase;
                let many = threads > 1;
                let (in_slack, on_thread) = match rebalancing {
                    Rebalancing::Stop | Rebalancing::StopSerial => (false, false),
                    Rebalancing::IdleTime => (many && fits, false),
                    Rebalancing::IdleTimeOrThread | Rebalancing::LentCore => (many && fits, many && !fits),
                    Rebalancing::Thread => (false, many),
                };
                pending_age = 0;
                // Deciding and (off the critical path) sending the run out read every box.
                let decide = machine.start_cost(n, threads);
                wall += decide;
                critical += decide;
                if in_slack {
                    pending = Some((next_event, unit, ev.units));
                } else if on_thread {
                    // Serially: the thread has no pool to share the assignments with.
                    let remaining = unit * ev.units as f64;
                    let lent =
                        rebalancing == Rebalancing::LentCore && Lending::pays(remaining, last_iteration, threads);
                    away = Some(Away { event: next_event, unit, remaining, lent });
                } else {
                    let parallel = if rebalancing == Rebalancing::StopSerial { 1.0 } else { on_the_pool(threads) };
                    let cost = unit * ev.units as f64 * parallel;
                    let moved = take_on(&mut owners, &ev.owners, &mut state, threads, &node_of);
                    let c = cost + machine.migrate * moved as f64 + machine.lists_box * n as f64;
                    wall += c;
                    critical += c;
                    order = neighbour_order(trace, &owners, threads, &node_of);
                    rebalances += 1;
                }
                next_event += 1;
            }
        }
    }
    Ok(Modelled {
        scheduler: scheduler.into(),
        threads,
        numa_nodes,
        efficiency: if wall > 0.0 { busy / threads as f64 / wall } else { 0.0 },
        idle_shares: IdleShares::of_run(&idle, wall - phases_wall, wall),
        iter_ms: wall / iterations.max(1) as f64 * 1e3,
        rebalance_critical_fraction: if wall > 0.0 { critical / wall } else { 0.0 },
        remote_fraction: state.remote as f64 / state.runs.max(1) as f64,
        affinity: state.same_thread as f64 / state.reruns.max(1) as f64,
        rebalances,
        rebalances_abandoned: abandoned,
        phase_max_avg: phase_busy.iter().map(|&(max, mean)| if mean > 0.0 { max / mean } else { 1.0 }).collect(),
    })
}

/// A rebalancing under way on the balancer thread.
struct Away {
    /// Its event in the plan.
    event: usize,
    /// One unit's time (what the executor learns from it).
    unit: f64,
    /// Balancer seconds left.
    remaining: f64,
    /// Whether a worker lends it its core.
    lent: bool,
}

fn lists_of(lists: &[Vec<u32>]) -> Lists {
    Lists { own: lists.iter().map(|l| l.iter().copied().collect()).collect() }
}

/// Takes on new owners; moved boxes' data follows them (first touch on the new owner).
/// Returns the most boxes one thread receives (the moves run in parallel).
fn take_on(
    owners: &mut [u32],
    new: &[u32],
    state: &mut Boxes,
    threads: usize,
    node_of: &dyn Fn(usize) -> u32,
) -> usize {
    let mut received = vec![0usize; threads];
    for (k, (o, &n)) in owners.iter_mut().zip(new).enumerate() {
        if *o != n {
            received[n as usize] += 1;
            state.home[k] = node_of(n as usize);
            *o = n;
        }
    }
    received.into_iter().max().unwrap_or(0)
}

/// For pbs's thieves: every thread's others, those on its own NUMA node first, then nearest
/// cell first (centroids of the owned boxes), as the executor orders its victims.
fn neighbour_order(trace: &Trace, owners: &[u32], threads: usize, node_of: &dyn Fn(usize) -> u32) -> Vec<Vec<u32>> {
    if owners.is_empty() {
        return Vec::new();
    }
    let (nx, plane) = (trace.header.nx, trace.header.nx * trace.header.ny);
    let mut sum = vec![([0.0; 3], 0usize); threads];
    for (k, &o) in owners.iter().enumerate() {
        let s = &mut sum[o as usize];
        let at = [k % nx, (k % plane) / nx, k / plane];
        for (total, v) in s.0.iter_mut().zip(at) {
            *total += v as f64;
        }
        s.1 += 1;
    }
    let c: Vec<[f64; 3]> = sum.iter().map(|s| s.0.map(|v| v / s.1.max(1) as f64)).collect();
    (0..threads)
        .map(|t| {
            let mut others: Vec<u32> = (0..threads as u32).filter(|&j| j as usize != t).collect();
            let d = |j: u32| (0..3).map(|a| (c[j as usize][a] - c[t][a]).powi(2)).sum::<f64>();
            let away = |j: u32| node_of(j as usize) != node_of(t);
            others.sort_by(|&a, &b| away(a).cmp(&away(b)).then(d(a).total_cmp(&d(b))).then(a.cmp(&b)));
            others
        })
        .collect()
}

/// Thread `t` runs box `k`: its cost (priced before the run is recorded, as the box stood),
/// added to the thread's `busy` time and returned.
fn run_box(
    state: &mut Boxes,
    k: u32,
    t: usize,
    cost: &dyn Fn(u32, usize, &Boxes) -> f64,
    node_of: &dyn Fn(usize) -> u32,
    busy: &mut f64,
) -> f64 {
    let c = cost(k, t, state);
    *busy += c;
    let k = k as usize;
    if state.home[k] == NONE {
        state.home[k] = node_of(t);
    }
    state.remote += u64::from(state.home[k] != node_of(t));
    state.runs += 1;
    if state.last[k] != NONE {
        state.reruns += 1;
        state.same_thread += u64::from(state.last[k] == t as u32);
    }
    state.last[k] = t as u32;
    c
}

/// A phase over per-thread lists, with stealing as `steal` says. Returns every thread's
/// (end, busy).
#[allow(clippy::too_many_arguments)]
fn run_lists(
    mut lists: Lists,
    steal: Steal<'_>,
    lender: Option<usize>,
    wake: &[f64],
    machine: &Machine,
    state: &mut Boxes,
    cost: &dyn Fn(u32, usize, &Boxes) -> f64,
    node_of: &dyn Fn(usize) -> u32,
    rng: &mut SplitMix64,
) -> Vec<(f64, f64)> {
    let threads = wake.len();
    let mut ends = vec![(0.0, 0.0); threads];
    // Threads by the time they are free (earliest first; ties by id).
    let mut free: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF64, usize)>> =
        (0..threads).filter(|&t| lender != Some(t)).map(|t| std::cmp::Reverse((OrdF64(wake[t]), t))).collect();
    while let Some(std::cmp::Reverse((OrdF64(now), t))) = free.pop() {
        if let Some(k) = lists.own[t].pop_front() {
            let c = run_box(state, k, t, cost, node_of, &mut ends[t].1);
            free.push(std::cmp::Reverse((OrdF64(now + c), t)));
            continue;
        }
        let victim = match steal {
            Steal::Never => None,
            // A thief takes any box its owner has not started, as the executor's do.
            Steal::Neighbours(order) => order[t].iter().map(|&v| v as usize).find(|&v| !lists.own[v].is_empty()),
            Steal::Half => {
                let busy: Vec<usize> = (0..threads).filter(|&v| lists.own[v].len() >= 2).collect();
                (!busy.is_empty()).then(|| busy[(rng.next_f64() * busy.len() as f64) as usize % busy.len()])
            }
        };
        let Some(v) = victim else {
            ends[t].0 = now;
            continue;
        };
        let mut at = now + machine.steal;
        match steal {
            Steal::Half => {
                // Work stealing: the stolen half becomes the thief's own range, which others
                // may split again (a thread with boxes of its own never steals, and a half
                // is at most half: no two threads pass boxes back and forth).
                let len = lists.own[v].len();
                let stolen: Vec<u32> = lists.own[v].drain(len - len / 2..).collect();
                lists.own[t].extend(stolen);
            }
            _ => {
                // pbs: the thief runs the pair it claimed at once (the executor's thieves do).
                let len = lists.own[v].len();
                let stolen: Vec<u32> = lists.own[v].drain(len.saturating_sub(2)..).collect();
                for k in stolen {
                    at += run_box(state, k, t, cost, node_of, &mut ends[t].1);
                }
            }
        }
        free.push(std::cmp::Reverse((OrdF64(at), t)));
    }
    ends
}

/// eager: one shared FIFO of boxes in index order; each free thread takes the head, a pop
/// taking an exponential time of mean [`Machine::eager_pop_at`]. The queue goes to any of the
/// threads that reach it within [`Machine::eager_window`] of the first, at random (a contended
/// cache line is handed over in no fixed order): without it the replay handed a box to the
/// same thread as last time 0.6–0.85 × as often as chance, where the 16-core table measured
/// chance, `1 / threads`, and only a pop long enough to mix the order (0.2 µs, md's boxes are
/// about 1 µs) brought it near, which made eager 10–23 % slow at 2–8 threads.
fn run_fifo(
    n: usize,
    wake: &[f64],
    machine: &Machine,
    state: &mut Boxes,
    cost: &dyn Fn(u32, usize, &Boxes) -> f64,
    node_of: &dyn Fn(usize) -> u32,
    rng: &mut SplitMix64,
) -> Vec<(f64, f64)> {
    let threads = wake.len();
    let mut ends = vec![(0.0, 0.0); threads];
    let mut free: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF64, usize)>> =
        (0..threads).map(|t| std::cmp::Reverse((OrdF64(wake[t]), t))).collect();
    let mut next = 0u32;
    let mut waiting = Vec::new();
    while let Some(std::cmp::Reverse((OrdF64(first), t))) = free.pop() {
        // Every thread at the queue within the window of the first, one of them at random.
        waiting.clear();
        waiting.push((first, t));
        while let Some(&std::cmp::Reverse((OrdF64(at), u))) = free.peek() {
            if at > first + machine.eager_window {
                break;
            }
            free.pop();
            waiting.push((at, u));
        }
        // Which head each of them gets is random; each still takes it at its own time (the
        // next head goes to the others, none waits for the draw: delaying them by up to the
        // window made eager 15–25 % slow again, docs/model.md).
        let (now, t) = waiting.swap_remove(rng.below(waiting.len()));
        for &(other, u) in &waiting {
            free.push(std::cmp::Reverse((OrdF64(other), u)));
        }
        if next as usize == n {
            ends[t].0 = now;
            continue;
        }
        let k = next;
        next += 1;
        let c = run_box(state, k, t, cost, node_of, &mut ends[t].1);
        let pop = -machine.eager_pop_at(threads) * rng.next_f64().max(1e-12).ln();
        free.push(std::cmp::Reverse((OrdF64(now + c + pop), t)));
    }
    ends
}

/// A totally ordered time (the replay's times are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::plan::{plan_pbs, plan_remap, Event};

    /// The imbalance of pbs's mapping on a trace iteration, for tests.
    fn plan_max_avg(trace: &Trace, plan: &PbsPlan, threads: usize, iteration: usize) -> f64 {
        use pbs::metrics;
        let owners = plan.events.iter().rev().find(|e| e.at < iteration).map_or(&plan.initial, |e| &e.owners);
        metrics::max_avg(&metrics::charges(owners, &trace.loads(iteration), threads))
    }

    fn trace(name: &str) -> Trace {
        Trace::kept(name).unwrap()
    }

    /// A phase over lists, traced by hand: threads free earliest first take their own list's
    /// front; an idle pbs thief pays the steal and runs up to two boxes from the back of the
    /// first victim in its order with any left; a work-stealing thief moves the back half of a
    /// list with two or more to its own (none with one); a thread with nothing to take ends
    /// where it is. Costs (box `k` takes `k + 1`) add to the thread's busy time; a box's first
    /// run sets its data's node; runs on another node than the data's count as remote, reruns
    /// on the same thread as such.
    #[test]
    fn a_phase_over_lists_runs_as_traced_by_hand() {
        let machine = Machine { steal: 0.1, ..Machine::fitted(1.0) };
        let cost = |k: u32, _: usize, _: &Boxes| f64::from(k + 1);
        let node_of = |t: usize| t as u32;
        let lists = |l: &[&[u32]]| lists_of(&l.iter().map(|l| l.to_vec()).collect::<Vec<_>>());
        let mut rng = SplitMix64::new(1);
        let mut run = |l: Lists, steal: Steal<'_>, lender: Option<usize>, wake: &[f64], state: &mut Boxes| {
            run_lists(l, steal, lender, wake, &machine, state, &cost, &node_of, &mut rng)
        };
        let order = vec![vec![1], vec![0]];
        let wake = [0.0, 0.5];
        // Thread 0 runs 0, 1, 2 (ends at 6); thread 1 runs 4 (0.5 + 5), then steals 3 from
        // thread 0's back at 5.5 + 0.1 and runs it (ends at 9.6).
        let mut state = Boxes::new(5);
        let ends = run(lists(&[&[0, 1, 2, 3], &[4]]), Steal::Neighbours(&order), None, &wake, &mut state);
        assert_eq!(ends, vec![(6.0, 6.0), (5.5 + 0.1 + 4.0, 9.0)]);
        assert_eq!((state.last.clone(), state.home.clone()), (vec![0, 0, 0, 1, 1], vec![0, 0, 0, 1, 1]));
        // Again on the same state: without stealing thread 0 runs all four of its boxes; box 3's
        // data stays on node 1 (the replay moves data only where pbs migrates).
        let ends = run(lists(&[&[0, 1, 2, 3], &[4]]), Steal::Never, None, &wake, &mut state);
        assert_eq!(ends, vec![(10.0, 10.0), (5.5, 5.0)]);
        assert_eq!((state.runs, state.reruns, state.same_thread, state.remote), (10, 5, 4, 1));
        // A lender runs nothing. Thread 0 runs 5 then 4; thread 1 steals pairs from the back of
        // its list, 1 then 0 at 0.5 + 0.1, 3 then 2 at 3.6 + 0.1.
        let mut state = Boxes::new(6);
        let (three, lender) = ([vec![1], vec![0], vec![0]], Some(2));
        let list = lists(&[&[5, 4, 3, 2, 1, 0], &[], &[]]);
        let ends = run(list, Steal::Neighbours(&three), lender, &[0.0, 0.5, 0.0], &mut state);
        assert_eq!(ends, vec![(11.0, 11.0), (0.5 + 0.1 + 2.0 + 1.0 + 0.1 + 4.0 + 3.0, 10.0), (0.0, 0.0)]);
        assert_eq!(state.last, vec![1, 1, 1, 1, 0, 0]);
        // Work stealing: thread 0 takes box 0 first (equal times go by id); thread 1 moves the
        // back half of the five left, rounded down (4 and 5), to its own list at 0.1.
        let mut state = Boxes::new(6);
        let ends = run(lists(&[&[0, 1, 2, 3, 4, 5], &[]]), Steal::Half, None, &[0.0, 0.0], &mut state);
        assert_eq!(ends, vec![(10.0, 10.0), (0.1 + 5.0 + 6.0, 11.0)]);
        assert_eq!(state.last, vec![0, 0, 0, 0, 1, 1]);
        // One box left is no half: the thief ends at once.
        let ends = run(lists(&[&[0, 1], &[]]), Steal::Half, None, &[0.0, 0.0], &mut Boxes::new(2));
        assert_eq!(ends, vec![(3.0, 3.0), (0.0, 0.0)]);
    }

    /// eager's queue, traced by hand: with no pop time and no window, boxes go in index order
    /// to the thread free first; within the window, the head goes to any thread waiting, at
    /// random, which takes it at its own time; a pop adds an exponential time of the machine's
    /// mean.
    #[test]
    fn the_shared_queue_runs_as_traced_by_hand() {
        let cost = |k: u32, _: usize, _: &Boxes| f64::from(k + 1);
        let node_of = |_: usize| 0;
        let mut rng = SplitMix64::new(1);
        let exact = Machine { eager_window: 0.0, eager_pop: 0.0, eager_pop_thread: 0.0, ..Machine::fitted(1.0) };
        let mut state = Boxes::new(5);
        let ends = run_fifo(5, &[0.0, 0.5], &exact, &mut state, &cost, &node_of, &mut rng);
        assert_eq!(ends, vec![(1.0 + 3.0 + 5.0, 9.0), (0.5 + 2.0 + 4.0, 6.0)]);
        assert_eq!(state.last, vec![0, 1, 0, 1, 0]);
        // Two threads 0.05 apart within a window of 0.1: either gets the one box.
        let window = Machine { eager_window: 0.1, ..exact };
        let mut won = [0; 2];
        for _ in 0..200 {
            let ends = run_fifo(1, &[0.0, 0.05], &window, &mut Boxes::new(1), &cost, &node_of, &mut rng);
            let t = usize::from(ends[1].1 > 0.0);
            assert_eq!((ends[t].0, ends[1 - t]), ([0.0, 0.05][t] + 1.0, ([0.0, 0.05][1 - t], 0.0)));
            won[t] += 1;
        }
        assert!(won.iter().all(|&w| w > 60), "{won:?}");
        // Pops of mean 0.25 + 0.125 per thread: 2,000 boxes of cost 1 on one thread.
        let popping = Machine { eager_pop: 0.25, eager_pop_thread: 0.125, ..exact };
        let one = |_: u32, _: usize, _: &Boxes| 1.0;
        let ends = run_fifo(2000, &[0.0], &popping, &mut Boxes::new(2000), &one, &node_of, &mut rng);
        let mean_pop = (ends[0].0 - 2000.0) / 2000.0;
        assert!((mean_pop - 0.375).abs() < 0.03, "mean pop {mean_pop}");
    }

    /// New owners are taken with their data (first touch on the new owner's node), and the
    /// most boxes one thread receives is what the move costs; pbs's thieves look at the threads
    /// on their own node first, then by the distance between the centroids of their boxes,
    /// then by id.
    #[test]
    fn owners_are_taken_on_with_their_data_and_victims_are_ordered_by_node_then_distance() {
        let node_of = |t: usize| (t / 2) as u32;
        let mut owners = vec![0, 0, 1, 1, 2, 3];
        let mut state = Boxes { home: vec![0, 0, 0, 0, 1, 1], ..Boxes::new(6) };
        assert_eq!(take_on(&mut owners, &[3, 0, 3, 1, 2, 3], &mut state, 4, &node_of), 2);
        assert_eq!((owners, state.home), (vec![3, 0, 3, 1, 2, 3], vec![1, 0, 1, 0, 1, 1]));
        // A row of 8 boxes: threads 0 and 1 (node 0) at its ends, 2 and 3 (node 1) between.
        let mut t = trace("md-gravity-32x32.trace");
        (t.header.nx, t.header.ny, t.header.nz) = (8, 1, 1);
        let order = neighbour_order(&t, &[0, 2, 2, 3, 3, 3, 1, 1], 4, &node_of);
        assert_eq!(order, vec![vec![1, 2, 3], vec![0, 3, 2], vec![3, 0, 1], vec![2, 1, 0]]);
        // Centroids are means: thread 2's four boxes around thread 0's one are nearer to it
        // than thread 3's one box three along, though their sum is not.
        t.header.nx = 10;
        let order = neighbour_order(&t, &[1, 1, 1, 2, 2, 0, 2, 2, 3, 1], 4, &node_of);
        assert_eq!(order[0], vec![1, 2, 3]);
        assert!(neighbour_order(&t, &[], 4, &node_of).is_empty());
    }

    /// Static blocks never run a box away from its data; work stealing, blind to locality
    /// but for its first thread's block, does on several nodes, and pbs's owners keep theirs;
    /// every scheduler does all the work.
    #[test]
    fn remote_runs_follow_the_schedulers_locality() {
        let trace = trace("md-gravity-32x32.trace");
        let machine = Machine::fitted(1.0);
        let plan = plan_pbs(&trace, 8, 4, 12, &machine, Rebalancing::Stop).unwrap();
        let run = |s: &str| replay(&trace, s, 8, 4, &machine, Some(&plan), Rebalancing::Stop, 12).unwrap();
        let (st, ws, eager, pbs) = (run("static"), run("ws"), run("eager"), run("pbs"));
        assert_eq!(st.remote_fraction, 0.0);
        assert!(ws.remote_fraction > 0.3 && eager.remote_fraction > 0.3, "{ws:?} {eager:?}");
        assert!(pbs.remote_fraction < 0.1 * ws.remote_fraction, "{pbs:?} vs {ws:?}");
        for m in [&st, &ws, &eager, &pbs] {
            assert!(m.efficiency > 0.0 && m.efficiency <= 1.0 + 1e-9, "{m:?}");
            assert!(m.iter_ms > 0.0);
            idle_adds_up(m);
        }
        // Static blocks wait longest where the loads differ; pbs's stopping rebalancings are
        // between iterations.
        assert!(st.idle_shares.in_phases.waiting > pbs.idle_shares.in_phases.waiting + 0.1, "{st:?} {pbs:?}");
        assert!(pbs.idle_shares.between_iterations > 0.0 && st.idle_shares.between_iterations == 0.0);
        assert!(pbs.rebalances >= 1, "the first measured iteration rebalances");
        let imbalance = plan_max_avg(&trace, &plan, 8, 11);
        assert!(imbalance < 1.1, "{imbalance}");
        assert!(replay(&trace, "pbs", 8, 9, &machine, Some(&plan), Rebalancing::Stop, 2).is_err(), "9 nodes");
        assert!(replay(&trace, "pbs", 8, 0, &machine, Some(&plan), Rebalancing::Stop, 2).is_err(), "no node");
        assert!(replay(&trace, "static", 0, 1, &machine, None, Rebalancing::Stop, 2).is_err(), "no thread");
        assert!(replay(&trace, "pbs", 8, 1, &machine, None, Rebalancing::Stop, 2).is_err(), "no plan");
        assert!(replay(&trace, "metis", 8, 1, &machine, None, Rebalancing::Stop, 2).is_err());
    }

    /// Every task's modelled time is its traced cost at the machine's speed, plus `moved` where
    /// another thread ran the box last and `remote` where its data sits on another node than
    /// the thread's (then times the thread's noise, none here): the busy time of a run, under
    /// every scheduler, is the trace's work plus those two prices times the runs that paid
    /// them, as the run counts them (affinity, remote fraction).
    #[test]
    fn a_task_costs_its_trace_plus_its_move_and_its_remote_data() {
        let trace = trace("md-gravity-32x32.trace");
        let (threads, nodes, iterations) = (8, 4, 6);
        let machine = Machine { noise: 0.0, moved: 2e-7, remote: 5e-7, ..Machine::fitted(1.3) };
        let plan = plan_pbs(&trace, threads, nodes, iterations, &machine, Rebalancing::Stop).unwrap();
        let traced: f64 = (0..iterations).map(|i| trace.costs[trace.recorded(i)].iter().flatten().sum::<f64>()).sum();
        let phases: usize = (0..iterations).map(|i| trace.costs[trace.recorded(i)].len()).sum();
        let runs = (trace.boxes() * phases) as f64;
        let reruns = runs - trace.boxes() as f64;
        for scheduler in ["static", "ws", "eager", "pbs"] {
            let m = replay(&trace, scheduler, threads, nodes, &machine, Some(&plan), Rebalancing::Stop, iterations)
                .unwrap();
            let busy = m.efficiency * threads as f64 * m.iter_ms * 1e-3 * iterations as f64;
            let moved = reruns * (1.0 - m.affinity);
            let remote = runs * m.remote_fraction;
            let want = machine.speed * traced + machine.moved * moved + machine.remote * remote;
            assert!((busy / want - 1.0).abs() < 1e-9, "{scheduler}: busy {busy} s, want {want} s: {m:?}");
            if scheduler != "static" {
                assert!(moved > 0.0 && remote > 0.0, "{scheduler}: both prices paid: {m:?}");
            }
        }
    }

    /// A thread wakes into a phase an exponential time of mean `wake` after it starts: the
    /// late starts, a share of the wall, are positive and grow with `wake`; none without it.
    #[test]
    fn threads_wake_late_by_the_machine_s_wake_up_time() {
        let trace = trace("md-gravity-32x32.trace");
        let late = |wake: f64| {
            let machine = Machine { noise: 0.0, wake, ..Machine::fitted(1.0) };
            let m = replay(&trace, "static", 8, 1, &machine, None, Rebalancing::Stop, 6).unwrap();
            idle_adds_up(&m);
            m.idle_shares.in_phases.late_start
        };
        let (none, some, more) = (late(0.0), late(2e-6), late(8e-6));
        assert_eq!(none, 0.0);
        assert!(0.0 < some && some < more, "{none} {some} {more}");
    }

    /// A trace of `N` boxes in a row, traced by hand: `costs[i][k]` are box `k`'s seconds in
    /// each of the `phases` phases of iteration `i`.
    fn hand_trace<const N: usize>(costs: &[[f64; N]], phases: usize) -> Trace {
        let header = super::super::trace::Header {
            format: super::super::trace::FORMAT.into(),
            app: "stencil".into(),
            scenario: "by hand".into(),
            nx: N,
            ny: 1,
            nz: 1,
            seed: 0,
            phases: vec![phases; costs.len()],
        };
        Trace { header, costs: costs.iter().map(|c| vec![c.to_vec(); phases]).collect() }
    }

    /// The hand traces' machine: no noise, barrier, wake-up, steal or pop time, no price for
    /// a moved box or remote data; a box migrated by a rebalancing costs 0.1 µs, taking on a
    /// run back from the balancer thread 0.25 µs a box, the new owner lists 0.05 µs a box.
    fn hand_machine(balancer_box: f64) -> Machine {
        Machine {
            speed: 1.0,
            barrier: 0.0,
            barrier_log2: 0.0,
            noise: 0.0,
            wake: 0.0,
            steal: 0.0,
            eager_pop: 0.0,
            eager_pop_thread: 0.0,
            eager_window: 0.0,
            moved: 0.0,
            remote: 0.0,
            migrate: 0.1e-6,
            balancer_box,
            loads_box: 0.0,
            start_box: 0.0,
            start_fixed: 0.0,
            take_on_box: 0.25e-6,
            lists_box: 0.05e-6,
            slice: 0.0,
            executor_thread: 0.0,
            iteration_fixed: 0.0,
            iteration_thread: 0.0,
        }
    }

    /// A rebalancing in idle time, traced by hand on 2 threads owning a box each: box 0 takes
    /// 10 µs, box 1 4 µs (5 in the third iteration), so thread 1 is idle from its end to the
    /// phase's. Decided at iteration 0's end (5 units of 3 µs, a first unit time seen of
    /// 3 × (0.6 + 0.4 / 2) = 2.4 µs, within the 6 µs of idle time), it runs a unit at a time
    /// from the first thread's end while another works: 2 units ending exactly with the
    /// phase in iteration 1, 2 in iteration 2, the second 1 µs past its end (the overrun), the
    /// last in iteration 3, after which its owners are taken on (a box to each thread, 0.1 µs
    /// as they receive in parallel). Wall 10 + 10 + 11 + 10 + 0.1 µs, 1.1 µs of it the
    /// balancer's; the overrun is between the balancing thread's tasks and the other thread's
    /// wait. Where the balancer thread could take it, it stays (1 µs over 6 spent), and a run
    /// ended in idle time is not checked as one back from that thread is. With 2.5 µs of idle
    /// time a phase, it still fits the first unit time seen, and runs there; with 2 µs a phase
    /// over two phases, it does not (the idle time is per phase), and the executor stops for
    /// it: 3 × 5 × 0.8 µs on the pool, the move and the new owner lists (0.05 µs a box). A run
    /// of 100 units is given up after 25 iterations under way. A remapper pays its recorded
    /// time and the move between iterations, at each of its plan's. One thread has no idle
    /// time and no other core: it stops for a run. A run of no iteration is all zeros. Also
    /// traced: two boxes moved to one thread (priced twice), a decision skipped while another
    /// is under way, each start's price.
    #[test]
    fn a_rebalancing_in_idle_time_runs_as_traced_by_hand() {
        let machine = hand_machine(0.75e-6); // × 2 boxes × (1 + log2 2) = 3 µs a unit
        assert_eq!(machine.speed * unit_cost(machine.balancer_box, 2, 2), 3e-6);
        let plan = PbsPlan {
            initial: vec![0, 1],
            events: vec![Event { at: 0, owners: vec![1, 0], units: 5, cost: None }],
            balancer_units: 0,
            balancer_seconds: 0.0,
        };
        let us = 1e-6;
        let trace = hand_trace(
            &[[10.0 * us, 4.0 * us], [10.0 * us, 4.0 * us], [10.0 * us, 5.0 * us], [10.0 * us, 4.0 * us]],
            1,
        );
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        for rebalancing in [Rebalancing::IdleTime, Rebalancing::IdleTimeOrThread] {
            let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), rebalancing, 4).unwrap();
            let wall = 41.1 * us;
            assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{rebalancing:?}: {m:?}");
            assert!(close(m.iter_ms, wall / 4.0 * 1e3), "{rebalancing:?}: {m:?}");
            assert!(close(m.rebalance_critical_fraction, 1.1 * us / wall), "{rebalancing:?}: {m:?}");
            assert!(close(m.efficiency, 57.0 * us / 2.0 / wall), "{rebalancing:?}: {m:?}");
            let i = &m.idle_shares.in_phases;
            assert!(close(i.between_tasks, 0.5 * us / wall), "{rebalancing:?}: {m:?}");
            assert!(close(i.waiting, ((3.0 * 6.0 + 5.0) / 2.0 + 0.5) * us / wall), "{rebalancing:?}: {m:?}");
            idle_adds_up(&m);
        }
        // Boxes of 4, 4, 4 and 1 µs owned by threads 0, 0, 0 and 1 (11 µs idle a phase): two
        // units of 3 µs end within iteration 1, and thread 1 receives two boxes (0.2 µs):
        // 12 + 12 + 0.2 + 9 µs.
        let two = PbsPlan {
            initial: vec![0, 0, 0, 1],
            events: vec![Event { at: 0, owners: vec![0, 1, 1, 1], units: 2, cost: None }],
            balancer_units: 0,
            balancer_seconds: 0.0,
        };
        let four = Machine { balancer_box: 3.0 * us / unit_cost(1.0, 4, 2), ..machine };
        let trace = hand_trace(&[[4.0 * us, 4.0 * us, 4.0 * us, 1.0 * us]; 3], 1);
        let m = replay(&trace, "pbs", 2, 1, &four, Some(&two), Rebalancing::IdleTime, 3).unwrap();
        assert_eq!(m.rebalances, 1, "{m:?}");
        assert!(close(m.iter_ms, 33.2 * us / 3.0 * 1e3) && close(m.rebalance_critical_fraction, 0.2 / 33.2), "{m:?}");
        // 2.5 µs idle a phase: 0.5 µs over in each of five iterations, then taken on.
        let trace = hand_trace(&[[10.0 * us, 7.5 * us]; 6], 1);
        let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), Rebalancing::IdleTime, 6).unwrap();
        assert_eq!(m.rebalances, 1, "{m:?}");
        assert!(close(m.rebalance_critical_fraction, 2.6 * us / (62.6 * us)), "{m:?}");
        // 2 µs idle in each of two phases: stopped for, after the first iteration.
        let trace = hand_trace(&[[10.0 * us, 8.0 * us]; 2], 2);
        let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), Rebalancing::IdleTime, 2).unwrap();
        assert_eq!(m.rebalances, 1, "{m:?}");
        assert!(close(m.iter_ms, 52.2 * us / 2.0 * 1e3), "{m:?}");
        assert!(close(m.rebalance_critical_fraction, 12.2 / 52.2), "{m:?}");
        // A remapper's plan: at the end of iterations 0 and 2, its recorded time at the
        // machine's speed and the move (boxes of 5, 5 and 4 µs going from threads 0, 0, 1 to
        // 1, 1, 0 and back: thread 1, then thread 0, receives two, 0.2 µs), on the critical
        // path; 4 phases of 10 µs.
        let remap = PbsPlan {
            initial: vec![0, 0, 1],
            events: vec![
                Event { at: 0, owners: vec![1, 1, 0], units: 0, cost: Some(5.0 * us) },
                Event { at: 2, owners: vec![0, 0, 1], units: 0, cost: Some(5.0 * us) },
            ],
            balancer_units: 0,
            balancer_seconds: 0.0,
        };
        let trace = hand_trace(&[[5.0 * us, 5.0 * us, 4.0 * us]; 4], 1);
        let m = replay(&trace, "rcb", 2, 1, &machine, Some(&remap), Rebalancing::Stop, 4).unwrap();
        assert_eq!(m.rebalances, 2, "{m:?}");
        assert!(close(m.iter_ms, 50.4 * us / 4.0 * 1e3) && close(m.rebalance_critical_fraction, 10.4 / 50.4), "{m:?}");
        // One thread: nothing runs in idle time or on the balancer thread; the executor stops
        // for the run (5 units of 1.5 µs on 2 boxes and 1 vCore, all on the pool of one) and
        // the owner lists (0.1 µs): 14 + 7.6 + 14 µs.
        let alone = PbsPlan {
            initial: vec![0, 0],
            events: vec![Event { owners: vec![0, 0], ..plan.events[0].clone() }],
            ..plan.clone()
        };
        let trace = hand_trace(&[[10.0 * us, 4.0 * us]; 2], 1);
        for rebalancing in [Rebalancing::IdleTimeOrThread, Rebalancing::LentCore] {
            let m = replay(&trace, "pbs", 1, 1, &machine, Some(&alone), rebalancing, 2).unwrap();
            assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{rebalancing:?}: {m:?}");
            assert!(close(m.iter_ms, 35.6 * us / 2.0 * 1e3), "{rebalancing:?}: {m:?}");
            assert!(close(m.rebalance_critical_fraction, 7.6 / 35.6), "{rebalancing:?}: {m:?}");
        }
        // No iteration: an empty run, all zeros; boxes of no cost: phases as even as can be.
        let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), Rebalancing::IdleTime, 0).unwrap();
        assert_eq!((m.efficiency, m.iter_ms, m.rebalance_critical_fraction, m.rebalances), (0.0, 0.0, 0.0, 0), "{m:?}");
        let idle = hand_trace(&[[0.0, 0.0]; 2], 1);
        let m = replay(&idle, "static", 2, 1, &machine, None, Rebalancing::Stop, 2).unwrap();
        assert_eq!((m.efficiency, m.phase_max_avg.as_slice()), (0.0, &[1.0][..]), "{m:?}");
        // Three decisions: at iteration 0 (5 units, 2 a phase in iterations 1 and 2, the last in
        // 3, taken on at 3's end), at 1 (while that one is under way: skipped), at 5 (one unit,
        // run in iteration 6). Each start costs 0.5 µs, each move 0.1: 8 × 10 + 1.2 µs.
        let three = PbsPlan {
            events: vec![
                plan.events[0].clone(),
                Event { at: 1, owners: vec![0, 1], units: 1, cost: None },
                Event { at: 5, owners: vec![0, 1], units: 1, cost: None },
            ],
            ..plan.clone()
        };
        let starting = Machine { start_fixed: 0.5 * us, ..machine };
        let trace = hand_trace(&[[10.0 * us, 4.0 * us]; 8], 1);
        let m = replay(&trace, "pbs", 2, 1, &starting, Some(&three), Rebalancing::IdleTime, 8).unwrap();
        assert_eq!((m.rebalances, m.rebalances_abandoned), (2, 0), "{m:?}");
        assert!(close(m.iter_ms, 81.2 * us / 8.0 * 1e3) && close(m.rebalance_critical_fraction, 1.2 / 81.2), "{m:?}");
        // 100 units, 2 an iteration: given up once under way for more than the executor's
        // `max_pending` iterations (25), and not before.
        let long = PbsPlan { events: vec![Event { units: 100, ..plan.events[0].clone() }], ..plan.clone() };
        let max_pending = PbsOptions::default().max_pending;
        for (iterations, abandoned) in [(max_pending + 1, 0), (max_pending + 2, 1)] {
            let trace = hand_trace(&vec![[10.0 * us, 4.0 * us]; iterations], 1);
            let m = replay(&trace, "pbs", 2, 1, &machine, Some(&long), Rebalancing::IdleTime, iterations).unwrap();
            assert_eq!((m.rebalances, m.rebalances_abandoned), (0, abandoned), "{iterations} iterations: {m:?}");
        }
    }

    /// A rebalancing on a lent core, traced by hand on 3 threads: boxes of 5, 5, 4 and 4 µs in
    /// a row, owned by threads 0, 0, 1 and 2, so thread 0 ends each phase at 10 µs and the
    /// others at 4. Decided at iteration 0's end, one unit of 25 µs (its time seen on the pool,
    /// 25 × 0.6 + 25 × 0.4 / 3 = 18.3 µs, is over the 6 µs of idle time a phase) goes to the
    /// balancer thread, and on 10 µs iterations a lent core pays (3 iterations out cost the
    /// others 3 × 10 / 2 = 15 µs, less than the run's 25). While it is out, the last worker,
    /// thread 2, runs nothing and waits its whole phase; thread 1, its nearest neighbour,
    /// steals its box after its own; the phases still last 10 µs, and the run is done after 3
    /// of them (25 − 30 ≤ 0). Taken on at iteration 3's end (1 µs to check, 0.1 µs to move
    /// boxes 1 and 2, one to each of two threads, in parallel: the new owners 0, 1, 2, 2 load
    /// the threads 5, 5 and 8 µs, better than 10, 4, 4), iteration 4 lasts 8 µs. Wall
    /// 4 × 10 + 1.1 + 8 µs; box 3 moved to thread 1 while the run was out and to thread 2
    /// after, boxes 1 and 2 with the new owners, so 12 of the 16 reruns are on the thread of
    /// the box's last run.
    ///
    /// A run that starts in idle time goes on on a lent core when its overrun there is more
    /// than a thread's share of the time it spent (lending costs the others one thread's
    /// share): 7 units of 5 µs, 5 × 0.6 + 5 × 0.4 / 3 = 3.7 µs seen, fit the 6 µs of idle
    /// time; in iteration 1 two units run from 4 µs to 14, 4 µs over the phase's end for 10
    /// spent (over a third of it, not over all of it: not lent, it stays). The 25 µs left
    /// then go out on a lent core for iterations 2 to 4, and the new owners run in iteration
    /// 5: wall 10 + 14 + 3 × 10 + 1.1 + 8 µs. With 5 units, the loan pays on the last
    /// iteration's 14 µs, where it would not on one as long as the run so far.
    #[test]
    fn a_rebalancing_on_a_lent_core_runs_as_traced_by_hand() {
        let us = 1e-6;
        let per_unit = |boxes: usize, threads: usize| unit_cost(1.0, boxes, threads);
        let costs = [5.0 * us, 5.0 * us, 4.0 * us, 4.0 * us];
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        let plan = |units| PbsPlan {
            initial: vec![0, 0, 1, 2],
            events: vec![Event { at: 0, owners: vec![0, 1, 2, 2], units, cost: None }],
            balancer_units: 0,
            balancer_seconds: 0.0,
        };
        // One unit of 25 µs, on a lent core from iteration 1 to 3.
        let machine = hand_machine(25.0 * us / per_unit(4, 3));
        assert!(Lending::pays(25.0 * us, 10.0 * us, 3) && !Lending::pays(25.0 * us, 10.0 * us, 2));
        for (iterations, rebalances) in [(3, 0), (5, 1)] {
            let trace = hand_trace(&vec![costs; iterations], 1);
            let m = replay(&trace, "pbs", 3, 1, &machine, Some(&plan(1)), Rebalancing::LentCore, iterations).unwrap();
            assert_eq!((m.rebalances, m.rebalances_abandoned), (rebalances, 0), "{iterations} iterations: {m:?}");
            idle_adds_up(&m);
            if iterations == 3 {
                assert!(close(m.iter_ms, 10.0 * us * 1e3), "still out, nothing on the wall: {m:?}");
                // Box 3 moved to thread 1 in iteration 1: 7 of the 8 reruns where they were.
                assert!(close(m.affinity, 7.0 / 8.0), "{m:?}");
                continue;
            }
            let wall = 49.1 * us;
            assert!(close(m.iter_ms, wall / 5.0 * 1e3), "{m:?}");
            assert!(close(m.rebalance_critical_fraction, 1.1 * us / wall), "{m:?}");
            assert!(close(m.efficiency, 90.0 * us / 3.0 / wall), "{m:?}");
            assert!(close(m.affinity, 12.0 / 16.0), "{m:?}");
            // Waiting: 6 + 6 µs in iteration 0; 2 and the lender's 10 in each of 1 to 3;
            // 3 + 3 in iteration 4; over 3 threads.
            let i = &m.idle_shares.in_phases;
            assert!(close(i.waiting, (12.0 + 3.0 * 12.0 + 6.0) / 3.0 * us / wall), "{m:?}");
            assert_eq!((i.late_start, i.between_tasks), (0.0, 0.0), "{m:?}");
        }
        // Seven units of 5 µs: two in idle time, then out on a lent core.
        let machine = hand_machine(5.0 * us / per_unit(4, 3));
        let trace = hand_trace(&[costs; 6], 1);
        let m = replay(&trace, "pbs", 3, 1, &machine, Some(&plan(7)), Rebalancing::LentCore, 6).unwrap();
        assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{m:?}");
        let wall = 63.1 * us;
        assert!(close(m.iter_ms, wall / 6.0 * 1e3), "{m:?}");
        assert!(close(m.rebalance_critical_fraction, 5.1 * us / wall), "{m:?}");
        // Five units: the 15 µs left after iteration 1 still pay a loan on its 14 µs (2
        // iterations out cost the others 14 µs), where they would not on iterations of 30 µs
        // or more (1 iteration out, 15 µs or more); out for iterations 2 and 3.
        assert!(Lending::pays(15.0 * us, 14.0 * us, 3) && !Lending::pays(15.0 * us, 30.0 * us, 3));
        let m = replay(&hand_trace(&[costs; 5], 1), "pbs", 3, 1, &machine, Some(&plan(5)), Rebalancing::LentCore, 5)
            .unwrap();
        assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{m:?}");
        let wall = 53.1 * us;
        assert!(close(m.iter_ms, wall / 5.0 * 1e3) && close(m.rebalance_critical_fraction, 5.1 * us / wall), "{m:?}");
        // Not lent, it stays in idle time (4 µs over 10 spent is not over all of it): two
        // units in each of iterations 1 to 3, 4 µs over each, the last in iteration 4, taken
        // on there with no check: 3 × 4 + 0.1 µs on the critical path of a 70.1 µs wall.
        let m = replay(&trace, "pbs", 3, 1, &machine, Some(&plan(7)), Rebalancing::IdleTimeOrThread, 6).unwrap();
        assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{m:?}");
        let wall = 70.1 * us;
        assert!(close(m.iter_ms, wall / 6.0 * 1e3), "{m:?}");
        assert!(close(m.rebalance_critical_fraction, 12.1 * us / wall), "{m:?}");
        // Each overrun is time between the balancing thread's tasks and the other two's wait:
        // 4 / 3 and 8 / 3 µs of each of the three, besides the phases' own 12 / 3 (and 6 / 3
        // under the new owners).
        let i = &m.idle_shares.in_phases;
        assert!(close(i.between_tasks, 4.0 * us / wall), "{m:?}");
        assert!(close(i.waiting, (4.0 + 3.0 * (4.0 + 8.0 / 3.0) + 4.0 + 2.0) * us / wall), "{m:?}");
        idle_adds_up(&m);
    }

    /// A rebalancing on the balancer thread sharing a core, traced by hand on 2 threads: boxes
    /// of 5, 5 and 4 µs owned by threads 0, 0 and 1 (phases of 10 µs, 6 of idle time). One
    /// unit of 20 µs (16 seen on the pool) does not fit the idle time and goes to the thread,
    /// which no core is lent to on 2 threads. In each phase it first takes a worker's core for
    /// its time slice (3 µs here, or what it has left), each phase the next worker's, whose
    /// boxes start that late; then it runs on the first idle worker's core to the phase's end.
    /// Iteration 1: thread 1 starts at 3 and ends at 7, 3 + 3 µs done, the phase still 10 µs;
    /// iteration 2: thread 0 starts at 3 and ends at 13, 3 µs on the critical path, 3 + 9 µs
    /// done; iteration 3: 2 µs left, thread 1 starts at 2. Back at iteration 3's end, taken on
    /// (0.75 µs to check, 0.1 µs to move box 1), iteration 4 lasts 9 µs. Wall 10 + 10 + 13 + 10
    /// + 0.85 + 9 µs, 3.85 of them the balancer's.
    #[test]
    fn a_rebalancing_on_a_thread_sharing_a_core_runs_as_traced_by_hand() {
        let us = 1e-6;
        let machine = Machine { slice: 3.0 * us, ..hand_machine(20.0 * us / unit_cost(1.0, 3, 2)) };
        let plan = PbsPlan {
            initial: vec![0, 0, 1],
            events: vec![Event { at: 0, owners: vec![0, 1, 1], units: 1, cost: None }],
            balancer_units: 0,
            balancer_seconds: 0.0,
        };
        let trace = hand_trace(&[[5.0 * us, 5.0 * us, 4.0 * us]; 5], 1);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), Rebalancing::IdleTimeOrThread, 5).unwrap();
        assert_eq!((m.rebalances, m.rebalances_abandoned), (1, 0), "{m:?}");
        let wall = 52.85 * us;
        assert!(close(m.iter_ms, wall / 5.0 * 1e3), "{m:?}");
        assert!(close(m.rebalance_critical_fraction, 3.85 * us / wall), "{m:?}");
        assert!(close(m.efficiency, 70.0 * us / 2.0 / wall), "{m:?}");
        idle_adds_up(&m);
        // Still out after iteration 2.
        let m = replay(&trace, "pbs", 2, 1, &machine, Some(&plan), Rebalancing::IdleTimeOrThread, 3).unwrap();
        assert_eq!(m.rebalances, 0, "{m:?}");
        assert!(close(m.iter_ms, 33.0 * us / 3.0 * 1e3), "{m:?}");
    }

    /// pbs's thieves start where the executor's do (`Stealing::Auto`): from the iteration after
    /// one whose busy time per thread and phase reached `STEAL_MIN_PHASE` (20 µs). Boxes of 16,
    /// 16 and 10 µs owned by threads 0, 0 and 1: 21 µs a thread, so in iteration 1 thread 1,
    /// done at 10, takes box 1 from thread 0 and the phase ends at 26 instead of 32. Half as
    /// long, nobody steals.
    #[test]
    fn pbs_steals_from_the_iteration_after_one_of_long_enough_phases() {
        let us = 1e-6;
        let plan = PbsPlan { initial: vec![0, 0, 1], events: vec![], balancer_units: 0, balancer_seconds: 0.0 };
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        assert!(21.0 * us >= STEAL_MIN_PHASE && 10.5 * us < STEAL_MIN_PHASE);
        let run = |scale: f64| {
            let trace = hand_trace(&[[16.0 * scale * us, 16.0 * scale * us, 10.0 * scale * us]; 2], 1);
            replay(&trace, "pbs", 2, 1, &hand_machine(0.0), Some(&plan), Rebalancing::Stop, 2).unwrap()
        };
        let (long, short) = (run(1.0), run(0.5));
        assert!(close(long.iter_ms, (32.0 + 26.0) / 2.0 * us * 1e3), "{long:?}");
        assert!(close(short.iter_ms, 16.0 * us * 1e3), "{short:?}");
    }

    /// Work stealing's model deals the blocks as rayon's join does: the first worker keeps the
    /// first block, the others get the rest in a new random order each phase. On 3 threads
    /// with a box each (none to steal), box 0 always reruns where it ran, boxes 1 and 2 half
    /// the time (both move or neither): 2/3 of the reruns over 400 iterations.
    #[test]
    fn work_stealing_keeps_the_first_block_and_deals_the_others_at_random() {
        let trace = hand_trace(&[[4e-6; 3]; 400], 1);
        let m = replay(&trace, "ws", 3, 1, &hand_machine(0.0), None, Rebalancing::Stop, 400).unwrap();
        assert!((m.affinity - 2.0 / 3.0).abs() < 0.06, "{m:?}");
    }

    /// On the balancer thread, the worker sharing its core is away for the thread's time
    /// slice, and the phase waits for it: on 16 threads over 32×32 boxes a rebalancing costs
    /// the critical path more than stopping for it (whose assignments run on every thread),
    /// and with no slice (the thread only in idle cores) next to nothing.
    #[test]
    fn the_balancer_thread_holds_the_phases_up_for_its_time_slice() {
        let trace = trace("md-gravity-32x32.trace");
        // The balancer thread alone: pbs's own work in phases, the same either way, left out.
        let machine = Machine::fitted(1.0).timed_in_part();
        let plan = plan_pbs(&trace, 16, 1, 200, &machine, Rebalancing::Stop).unwrap();
        let run = |r, m: &Machine| replay(&trace, "pbs", 16, 1, m, Some(&plan), r, 200).unwrap();
        let (stop, thread) = (run(Rebalancing::Stop, &machine), run(Rebalancing::Thread, &machine));
        let unsliced = run(Rebalancing::Thread, &Machine { slice: 0.0, ..machine });
        assert!(stop.rebalances >= 1 && thread.rebalances >= 1, "{stop:?} {thread:?}");
        assert!(thread.rebalance_critical_fraction > stop.rebalance_critical_fraction, "{thread:?} vs {stop:?}");
        assert!(unsliced.rebalance_critical_fraction < 0.5 * thread.rebalance_critical_fraction, "{unsliced:?}");
        assert!(thread.efficiency <= 1.0 + 1e-9 && unsliced.efficiency <= 1.0 + 1e-9, "{thread:?}");
        // The worker away for the slice starts late.
        assert!(thread.idle_shares.in_phases.late_start > unsliced.idle_shares.in_phases.late_start, "{thread:?}");
        [stop, thread, unsliced].iter().for_each(idle_adds_up);
    }

    /// With efficiency, the idle shares account for the whole wall time.
    fn idle_adds_up(m: &Modelled) {
        let i = &m.idle_shares;
        let sum = m.efficiency + i.in_phases.total() + i.between_iterations;
        assert!((sum - 1.0).abs() < 1e-9, "{sum}: {m:?}");
        if m.scheduler != "pbs" {
            assert_eq!(i.in_phases.executor, 0.0, "only pbs's own work in phases is modelled");
        }
    }

    /// pbs's own work in each phase is on the wall and in the idle split as `executor`,
    /// `executor_at(threads)` a phase, so it grows with the threads it sweeps; its work between
    /// iterations is on the critical path; the machine as the first leases timed pbs has
    /// neither.
    #[test]
    fn pbs_pays_its_own_work_per_phase_and_thread() {
        let trace = trace("md-gravity-32x32.trace");
        let machine = Machine::fitted(1.0);
        let at = |threads, m: &Machine| {
            let plan = plan_pbs(&trace, threads, 1, 20, m, Rebalancing::Stop).unwrap();
            replay(&trace, "pbs", threads, 1, m, Some(&plan), Rebalancing::Stop, 20).unwrap()
        };
        let (four, sixteen, in_part) = (at(4, &machine), at(16, &machine), at(16, &machine.timed_in_part()));
        let phases = trace.costs[0].len() as f64;
        for (m, threads) in [(&four, 4), (&sixteen, 16)] {
            let per_phase = m.idle_shares.in_phases.executor * m.iter_ms * 1e-3 / phases;
            assert!((per_phase / machine.executor_at(threads) - 1.0).abs() < 1e-9, "{m:?}");
        }
        assert!(sixteen.idle_shares.in_phases.executor > 2.0 * four.idle_shares.in_phases.executor);
        assert_eq!(in_part.idle_shares.in_phases.executor, 0.0);
        assert!(sixteen.iter_ms > in_part.iter_ms, "{sixteen:?} {in_part:?}");
        let critical_ms = |m: &Modelled| m.rebalance_critical_fraction * m.iter_ms;
        assert!(critical_ms(&sixteen) > critical_ms(&in_part), "{sixteen:?} {in_part:?}");
        [four, sixteen, in_part].iter().for_each(idle_adds_up);
    }

    /// A lent core: the thread runs whole phases on the lender's core instead of taking a
    /// worker away for its slice, so the phases no longer wait for it; the lender's boxes are
    /// all run by the others (every box of every phase runs once, as the busy time shows).
    /// On md contraction's trace: on gravity's, from the runtime's start, the first run comes
    /// back later than the falling load allows and is given up (docs/model.md).
    #[test]
    fn a_lent_core_takes_the_balancer_thread_off_the_phases() {
        let trace = trace("md-contraction-32x32.trace");
        // The balancer thread alone: pbs's own work in phases, the same either way, left out.
        let machine = Machine::fitted(1.0).timed_in_part();
        let plan = plan_pbs(&trace, 16, 1, 200, &machine, Rebalancing::IdleTimeOrThread).unwrap();
        let run = |r| replay(&trace, "pbs", 16, 1, &machine, Some(&plan), r, 200).unwrap();
        let (thread, lent) = (run(Rebalancing::IdleTimeOrThread), run(Rebalancing::LentCore));
        assert!(thread.rebalances >= 1 && lent.rebalances >= 1, "{thread:?} {lent:?}");
        assert!(lent.rebalance_critical_fraction < 0.5 * thread.rebalance_critical_fraction, "{lent:?} vs {thread:?}");
        assert!(lent.efficiency > thread.efficiency && lent.efficiency <= 1.0 + 1e-9, "{lent:?} vs {thread:?}");
        let work = |m: &Modelled| m.efficiency * m.iter_ms * 16.0;
        assert!((work(&lent) / work(&thread) - 1.0).abs() < 0.05, "the same work: {lent:?} vs {thread:?}");
        [thread, lent].iter().for_each(idle_adds_up);
    }

    /// Overlapped, the balancer's units run in slack: less on the critical path than
    /// stopping for them, and the same rebalancings are taken on.
    #[test]
    fn overlapping_takes_the_balancer_off_the_critical_path() {
        let trace = trace("stencil-drift-32x32.trace");
        let machine = Machine::fitted(1.0);
        let plan = plan_pbs(&trace, 4, 1, 20, &machine, Rebalancing::Stop).unwrap();
        let stop = replay(&trace, "pbs", 4, 1, &machine, Some(&plan), Rebalancing::Stop, 20).unwrap();
        let overlap = replay(&trace, "pbs", 4, 1, &machine, Some(&plan), Rebalancing::IdleTimeOrThread, 20).unwrap();
        assert!(stop.rebalances >= 1);
        assert!(overlap.rebalance_critical_fraction < stop.rebalance_critical_fraction, "{overlap:?} vs {stop:?}");
    }

    /// Every remapper replays from its plan: the first iteration remaps, the boxes stay with
    /// their data on one node, and a remapper without its plan or unknown is an error.
    /// Each phase of a multi-phase app gets its own imbalance: work stealing evens both out,
    /// static blocks leave md contraction's force phase uneven, and a vector placement
    /// balances both phases where it has the phases' costs.
    #[test]
    fn each_phase_has_its_imbalance() {
        let trace = Trace::record("md-split", "contraction", 24, 24, 3, 1).unwrap();
        let machine = Machine::fitted(1.0);
        let run = |s: &str| {
            let plan = REMAPPERS.contains(&s).then(|| plan_remap(&trace, s, 8, 6, machine.noise).unwrap());
            replay(&trace, s, 8, 1, &machine, plan.as_ref(), Rebalancing::Stop, 6).unwrap().phase_max_avg
        };
        let (st, ws, greedy) = (run("static"), run("ws"), run("vector-greedy"));
        assert!(st.len() == 2 && ws.len() == 2 && greedy.len() == 2);
        assert!(ws.iter().all(|&m| (1.0..1.1).contains(&m)), "{ws:?}");
        assert!(st[1] > 1.3, "{st:?}");
        assert!(greedy.iter().all(|&m| m < st[1]), "{greedy:?} against {st:?}");
    }

    /// pbs steals in a phase shorter than `STEAL_MIN_PHASE` per thread when the iteration's
    /// phases together reach it, as the executor decides (it steals in every phase of an
    /// iteration or in none, from the second iteration on); with the other phase short too,
    /// it never steals.
    #[test]
    fn stealing_is_decided_per_iteration_as_the_executor_decides_it() {
        // 8×8 boxes on 4 threads, a fixed mapping (quadrants, no rebalancing). Phase 0: 16 µs
        // in the 3×3 boxes of one corner (one thread's), 4 µs per thread on average; phase 1
        // uniform, `per_thread` per thread.
        let (nx, ny, threads) = (8, 8, 4);
        let short: Vec<f64> = (0..nx * ny).map(|k| if k % nx < 3 && k / nx < 3 { 16e-6 / 9.0 } else { 0.0 }).collect();
        let trace = |per_thread: f64| Trace {
            header: super::super::trace::Header {
                format: super::super::trace::FORMAT.into(),
                app: "md".into(),
                scenario: "synthetic".into(),
                nx,
                ny,
                nz: 1,
                seed: 1,
                phases: vec![2; 4],
            },
            costs: vec![vec![short.clone(), vec![per_thread * threads as f64 / (nx * ny) as f64; nx * ny]]; 4],
        };
        let quadrants = (0..nx * ny).map(|k| ((k % nx >= nx / 2) as u32) + 2 * ((k / nx >= ny / 2) as u32)).collect();
        let plan = PbsPlan { initial: quadrants, events: Vec::new(), balancer_units: 0, balancer_seconds: 0.0 };
        let machine = Machine::fitted(1.0);
        let short_phase = |per_thread: f64| {
            replay(&trace(per_thread), "pbs", threads, 1, &machine, Some(&plan), Rebalancing::Stop, 20)
                .unwrap()
                .phase_max_avg[0]
        };
        // Mean per phase and thread: (4 + 100) / 2 µs, then (4 + 8) / 2 µs.
        let (beside_long, beside_short) = (short_phase(100e-6), short_phase(8e-6));
        assert!(beside_short > 2.5, "no stealing: {beside_short}");
        assert!(beside_long < beside_short / 1.5, "stealing in every iteration: {beside_long}, {beside_short}");
    }

    #[test]
    fn the_remappers_replay_from_their_plans() {
        let trace = trace("md-contraction-32x32.trace");
        let machine = Machine::fitted(1.0);
        for name in REMAPPERS {
            let plan = plan_remap(&trace, name, 8, 12, machine.noise).unwrap();
            assert_eq!(plan.events.first().map(|e| e.at), Some(0), "{name}: the first iteration remaps");
            let m = replay(&trace, name, 8, 1, &machine, Some(&plan), Rebalancing::Stop, 12).unwrap();
            assert!(m.efficiency > 0.0 && m.efficiency <= 1.0 + 1e-9, "{name}: {m:?}");
            assert!(m.rebalances >= 1 && m.rebalance_critical_fraction > 0.0, "{name}: {m:?}");
            idle_adds_up(&m);
            assert_eq!(m.remote_fraction, 0.0, "{name}: one node");
            // The remapped owners balance the iteration they were made for better than the
            // uniform start did (PackStealLB, whose packs are small, only part of the way).
            let max_avg = |owners: &[u32]| pbs::metrics::max_avg(&pbs::metrics::charges(owners, &trace.loads(0), 8));
            let (start, remapped) = (max_avg(&plan.initial), max_avg(&plan.events[0].owners));
            assert!(remapped < start && remapped < 1.3, "{name}: {remapped} from {start}");
            assert!(replay(&trace, name, 8, 1, &machine, None, Rebalancing::Stop, 2).is_err(), "{name}: no plan");
        }
        assert!(plan_remap(&trace, "norcb", 8, 2, machine.noise).unwrap_err().contains("unknown remapper"));
    }

    #[test]
    fn a_replay_longer_than_its_recording_plays_it_back_and_forth() {
        let trace = Trace::record("md", "gravity", 4, 4, 3, 1).unwrap();
        let order: Vec<usize> = (0..8).map(|i| trace.recorded(i)).collect();
        assert_eq!(order, [0, 1, 2, 1, 0, 1, 2, 1]);
    }
}
