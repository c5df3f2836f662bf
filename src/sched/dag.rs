//! The DAG as a state machine: which steps wait, run or are done, and which may start
//! now. Plain methods, no processes, no I/O: every scheduling decision is here and
//! unit-tested.
//!
//! A step is *ready* when every step it needs has succeeded. It *starts* when a job
//! slot is free (`--jobs`), its memory limit fits the budget beside the running
//! steps' limits (a step that alone exceeds the budget still runs when nothing else
//! does: the run refused it earlier if the host cannot give it), and no running step
//! of this run holds a device request it names (it would only wait for the lease; it
//! waits here instead, keeping its job slot free). A step that ends other than
//! `succeeded` skips everything downstream, once, with the first reason.

use std::collections::BTreeSet;

use crate::evidence::record::StepStatus;
use crate::plan::{Plan, StepKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Waiting,
    Running,
    Done(StepStatus),
}

/// Steps placed off this host (on Slurm) running at once: each holds its
/// attempts' state here until its jobs end, so a sweep of 100 000 cells must not
/// hold them all. Far above a cluster's `MaxArraySize` (1001 by default), so
/// arrays stay whole, and a few hundred MiB at most.
pub(crate) const OFF_HOST_IN_FLIGHT: usize = 4096;

#[derive(Debug)]
pub(crate) struct Dag {
    ids: Vec<String>,
    dependents: Vec<Vec<usize>>,
    /// Needed steps not yet succeeded, per step.
    missing: Vec<usize>,
    state: Vec<State>,
    reasons: Vec<Option<String>>,
    ready: BTreeSet<usize>,
    /// Memory limit per attempt, per step (0: none).
    memory: Vec<u64>,
    devices: Vec<Vec<String>>,
    jobs: usize,
    budget: u64,
    running: usize,
    /// Steps whose attempts run off this host (on a batch scheduler, which
    /// throttles them itself): they take no job slot and none of the memory
    /// budget.
    off_host: Vec<bool>,
    /// Running steps placed off this host, at most [`OFF_HOST_IN_FLIGHT`].
    off_host_used: usize,
    /// Running steps that hold a job slot.
    slots_used: usize,
    mem_used: u64,
    /// For a step that runs interleaved with others (its cells on other revisions),
    /// the group's leader; the leader starts for all of them.
    leader_of: Vec<Option<usize>>,
    /// A leader's followers, still in its group.
    followers: Vec<Vec<usize>>,
}

impl Dag {
    /// The plan's steps, in plan order; `jobs` slots, `budget` bytes of memory.
    pub(crate) fn new(plan: &Plan, jobs: u32, budget: u64) -> Dag {
        let index = |id: &str| plan.steps.iter().position(|s| s.id.0 == id);
        let needs: Vec<Vec<usize>> = plan
            .steps
            .iter()
            .map(|s| s.needs.iter().filter_map(|d| index(&d.0)).collect())
            .collect();
        let memory = plan
            .steps
            .iter()
            .map(|s| plan.memory_of(s).map_or(0, |b| b.0))
            .collect();
        let devices = plan.steps.iter().map(|s| s.devices.clone()).collect();
        let ids = plan.steps.iter().map(|s| s.id.0.clone()).collect();
        let mut dag = Self::from_parts(ids, needs, memory, devices, jobs, budget);
        for g in interleave_groups(plan) {
            dag.group(&g);
        }
        dag
    }

    /// Run `members` as one unit, led by the first.
    fn group(&mut self, members: &[usize]) {
        let Some((&lead, rest)) = members.split_first() else {
            return;
        };
        for &f in rest {
            self.leader_of[f] = Some(lead);
            self.ready.remove(&f);
        }
        self.followers[lead] = rest.to_vec();
        self.ready.remove(&lead);
        self.check_group(lead);
    }

    /// A leader is ready when it and every follower still waiting have what they need.
    fn check_group(&mut self, lead: usize) {
        let all = self.missing[lead] == 0
            && self.state[lead] == State::Waiting
            && self.followers[lead]
                .iter()
                .all(|&f| self.missing[f] == 0 || self.state[f] != State::Waiting);
        if all {
            self.ready.insert(lead);
        }
    }

    /// The steps that start with `i`: itself and its followers still waiting.
    pub(crate) fn members(&self, i: usize) -> Vec<usize> {
        std::iter::once(i)
            .chain(
                self.followers[i]
                    .iter()
                    .copied()
                    .filter(|&f| self.state[f] == State::Running),
            )
            .collect()
    }

    /// `i` became ready: alone, or through its group.
    fn became_ready(&mut self, i: usize) {
        match self.leader_of[i] {
            Some(lead) => self.check_group(lead),
            None if !self.followers[i].is_empty() => self.check_group(i),
            None => {
                self.ready.insert(i);
            }
        }
    }

    /// A skipped leader leaves its followers to run on their own.
    fn disband(&mut self, lead: usize) {
        for f in std::mem::take(&mut self.followers[lead]) {
            self.leader_of[f] = None;
            if self.state[f] == State::Waiting && self.missing[f] == 0 {
                self.ready.insert(f);
            }
        }
    }

    fn from_parts(
        ids: Vec<String>,
        needs: Vec<Vec<usize>>,
        memory: Vec<u64>,
        devices: Vec<Vec<String>>,
        jobs: u32,
        budget: u64,
    ) -> Dag {
        let n = needs.len();
        let mut dependents = vec![Vec::new(); n];
        for (i, ds) in needs.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let missing: Vec<usize> = needs.iter().map(Vec::len).collect();
        Dag {
            ready: (0..n).filter(|&i| missing[i] == 0).collect(),
            ids,
            dependents,
            missing,
            state: vec![State::Waiting; n],
            reasons: vec![None; n],
            memory,
            devices,
            jobs: jobs.max(1) as usize,
            budget,
            running: 0,
            off_host: vec![false; n],
            off_host_used: 0,
            slots_used: 0,
            mem_used: 0,
            leader_of: vec![None; n],
            followers: vec![Vec::new(); n],
        }
    }

    /// Mark the steps whose attempts run off this host.
    pub(crate) fn set_off_host(&mut self, off_host: Vec<bool>) {
        if off_host.len() == self.len() {
            self.off_host = off_host;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.state.len()
    }

    pub(crate) fn running(&self) -> usize {
        self.running
    }

    pub(crate) fn state(&self, i: usize) -> State {
        self.state[i]
    }

    pub(crate) fn reason(&self, i: usize) -> Option<&str> {
        self.reasons[i].as_deref()
    }

    /// Steps that need step `i`.
    pub(crate) fn dependents(&self, i: usize) -> &[usize] {
        &self.dependents[i]
    }

    fn devices_free(&self, i: usize) -> bool {
        self.devices[i].is_empty()
            || !(0..self.len()).any(|j| {
                self.state[j] == State::Running
                    && self.devices[j].iter().any(|d| self.devices[i].contains(d))
            })
    }

    /// The ready steps that may start now, marked running, in plan order.
    pub(crate) fn take_startable(&mut self) -> Vec<usize> {
        let mut out = Vec::new();
        let candidates: Vec<usize> = self.ready.iter().copied().collect();
        let any_off_host = self.off_host.iter().any(|&o| o);
        for i in candidates {
            let off = self.off_host[i];
            if off && self.off_host_used >= OFF_HOST_IN_FLIGHT {
                continue;
            }
            if !off && self.slots_used >= self.jobs {
                if any_off_host {
                    continue;
                }
                break;
            }
            let mem = if off { 0 } else { self.memory[i] };
            if !off && self.slots_used > 0 && self.mem_used.saturating_add(mem) > self.budget {
                continue;
            }
            if !self.devices_free(i) {
                continue;
            }
            self.ready.remove(&i);
            self.state[i] = State::Running;
            // Followers run inside the leader's job slot and memory.
            for f in self.followers[i].clone() {
                if self.state[f] == State::Waiting {
                    self.state[f] = State::Running;
                }
            }
            self.running += 1;
            if off {
                self.off_host_used += 1;
            } else {
                self.slots_used += 1;
            }
            self.mem_used = self.mem_used.saturating_add(mem);
            out.push(i);
        }
        out
    }

    /// Step `i` ended: free its resources, make its dependents ready (success) or
    /// skip everything downstream of it (anything else). Returns the steps newly
    /// skipped, with the reason each was given.
    pub(crate) fn finish(
        &mut self,
        i: usize,
        status: StepStatus,
        reason: Option<String>,
    ) -> Vec<(usize, String)> {
        if self.state[i] == State::Running && self.leader_of[i].is_none() {
            self.running -= 1;
            if self.off_host[i] {
                self.off_host_used -= 1;
            } else {
                self.slots_used -= 1;
                self.mem_used = self.mem_used.saturating_sub(self.memory[i]);
            }
        }
        self.state[i] = State::Done(status);
        self.reasons[i] = reason;
        let mut skipped = Vec::new();
        if status == StepStatus::Succeeded {
            for d in self.dependents[i].clone() {
                self.missing[d] -= 1;
                if self.missing[d] == 0 && self.state[d] == State::Waiting {
                    self.became_ready(d);
                }
            }
            return skipped;
        }
        let why = format!("needs `{}`, which {}", self.ids[i], past(status));
        let mut stack = self.dependents[i].clone();
        while let Some(d) = stack.pop() {
            if self.state[d] != State::Waiting {
                continue;
            }
            self.state[d] = State::Done(StepStatus::Skipped);
            self.ready.remove(&d);
            self.reasons[d] = Some(why.clone());
            skipped.push((d, why.clone()));
            stack.extend(self.dependents[d].iter().copied());
            match self.leader_of[d] {
                // Its group no longer waits for it.
                Some(lead) => {
                    self.followers[lead].retain(|&f| f != d);
                    self.leader_of[d] = None;
                    self.check_group(lead);
                }
                None => self.disband(d),
            }
        }
        skipped
    }

    /// Every step still waiting is skipped with `why`; returns them.
    pub(crate) fn skip_waiting(&mut self, why: &str) -> Vec<(usize, String)> {
        let reason = format!("not started: {why}");
        let mut out = Vec::new();
        for i in 0..self.len() {
            if self.state[i] == State::Waiting {
                self.state[i] = State::Done(StepStatus::Skipped);
                self.ready.remove(&i);
                self.reasons[i] = Some(reason.clone());
                out.push((i, reason.clone()));
            }
        }
        out
    }

    /// The steps running now.
    pub(crate) fn running_steps(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.state[i] == State::Running)
            .collect()
    }

    /// Whether every step succeeded.
    #[cfg(test)]
    pub(crate) fn all_succeeded(&self) -> bool {
        self.state
            .iter()
            .all(|s| *s == State::Done(StepStatus::Succeeded))
    }

    /// The final status of every step (`not_run` for any not done).
    pub(crate) fn statuses(&self) -> Vec<StepStatus> {
        self.state
            .iter()
            .map(|s| match s {
                State::Done(x) => *x,
                _ => StepStatus::NotRun,
            })
            .collect()
    }
}

/// Cells of one step on different revisions with more than one attempt each: run
/// as a group, their attempts interleaved. Members in plan order (the matrix's
/// revision order), when they name the same devices.
pub fn interleave_groups(plan: &Plan) -> Vec<Vec<usize>> {
    let mut groups: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    let mut order: Vec<String> = Vec::new();
    for (i, s) in plan.steps.iter().enumerate() {
        let Some((template, cell)) = &s.cell else {
            continue;
        };
        if !runs_attempts(s.kind) || s.attempts() < 2 || !cell.iter().any(|(a, _)| a == "revision")
        {
            continue;
        }
        let rest: Vec<(String, String)> = cell
            .iter()
            .filter(|(a, _)| a != "revision")
            .cloned()
            .collect();
        let key = crate::plan::matrix::cell_id(template.as_str(), &rest);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(i);
    }
    order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .filter(|g| {
            g.len() > 1
                && g.iter()
                    .all(|&i| plan.steps[i].devices == plan.steps[g[0]].devices)
        })
        .collect()
}

/// Whether a step runs attempts (compare steps only run checks).
pub(crate) fn runs_attempts(kind: StepKind) -> bool {
    kind != StepKind::Compare
}

/// How a status reads after "which": `failed`, `was skipped`, ...
pub(crate) fn past(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Failed => "failed",
        StepStatus::Cancelled => "was cancelled",
        StepStatus::Skipped => "was skipped",
        StepStatus::NotRun => "did not run",
        StepStatus::Succeeded => "succeeded",
        StepStatus::Reused => "was reused",
        StepStatus::UpstreamFailed => "ran on a result that failed after",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a -> b -> c, a -> d; e alone.
    fn dag(jobs: u32, budget: u64, memory: Vec<u64>, devices: Vec<Vec<&str>>) -> Dag {
        let needs = vec![vec![], vec![0], vec![1], vec![0], vec![]];
        let devices = devices
            .into_iter()
            .map(|d| d.into_iter().map(String::from).collect())
            .collect();
        let ids = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        Dag::from_parts(ids, needs, memory, devices, jobs, budget)
    }

    fn none() -> Vec<Vec<&'static str>> {
        vec![vec![]; 5]
    }

    #[test]
    fn readiness_follows_needs_and_jobs_limit_starts() {
        let mut d = dag(2, u64::MAX, vec![0; 5], none());
        assert_eq!(d.take_startable(), vec![0, 4]);
        assert_eq!(d.take_startable(), Vec::<usize>::new(), "both slots taken");
        assert!(d.finish(0, StepStatus::Succeeded, None).is_empty());
        assert_eq!(d.take_startable(), vec![1]);
        d.finish(4, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![3]);
        d.finish(1, StepStatus::Succeeded, None);
        d.finish(3, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![2]);
        d.finish(2, StepStatus::Succeeded, None);
        assert!(d.all_succeeded());
        assert_eq!(d.running(), 0);
    }

    #[test]
    fn a_failure_skips_everything_downstream_once() {
        let mut d = dag(4, u64::MAX, vec![0; 5], none());
        assert_eq!(d.take_startable(), vec![0, 4]);
        let skipped = d.finish(0, StepStatus::Failed, Some("boom".into()));
        let ids: BTreeSet<usize> = skipped.iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, BTreeSet::from([1, 2, 3]));
        assert!(skipped.iter().all(|(_, w)| w == "needs `a`, which failed"));
        assert_eq!(d.state(2), State::Done(StepStatus::Skipped));
        assert_eq!(d.reason(0), Some("boom"));
        assert_eq!(d.take_startable(), Vec::<usize>::new());
        d.finish(4, StepStatus::Succeeded, None);
        assert!(d.skip_waiting("x").is_empty(), "nothing left waiting");
        assert!(!d.all_succeeded());
    }

    #[test]
    fn memory_budget_holds_back_steps_but_never_blocks_a_lone_one() {
        // a and e each want 6 of a budget of 10: one at a time; a huge one alone runs.
        let mut d = dag(4, 10, vec![6, 0, 0, 0, 6], none());
        assert_eq!(d.take_startable(), vec![0]);
        d.finish(0, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![1, 3, 4]);
        let mut big = dag(4, 10, vec![0, 0, 0, 0, 50], none());
        assert_eq!(big.take_startable(), vec![0]);
        big.finish(0, StepStatus::Succeeded, None);
        assert_eq!(big.take_startable(), vec![1, 3], "e waits for room");
        big.finish(1, StepStatus::Succeeded, None);
        big.finish(3, StepStatus::Succeeded, None);
        assert_eq!(big.take_startable(), vec![2]);
        big.finish(2, StepStatus::Succeeded, None);
        assert_eq!(
            big.take_startable(),
            vec![4],
            "alone it may exceed the budget"
        );
    }

    #[test]
    fn a_group_starts_once_every_member_is_ready_in_one_slot() {
        // needs: a; b <- a; c <- b; d <- a; e. Group b (leader) with d and e.
        let mut g = dag(4, u64::MAX, vec![0; 5], none());
        g.group(&[1, 3, 4]);
        assert_eq!(g.take_startable(), vec![0], "e waits for its group");
        assert_eq!(g.running(), 1);
        g.finish(0, StepStatus::Succeeded, None);
        assert_eq!(
            g.take_startable(),
            vec![1],
            "the leader starts for b, d and e"
        );
        assert_eq!(g.members(1), vec![1, 3, 4]);
        assert_eq!(g.running(), 1, "one job slot for the group");
        g.finish(3, StepStatus::Failed, None);
        g.finish(4, StepStatus::Succeeded, None);
        assert_eq!(g.running(), 1);
        g.finish(1, StepStatus::Succeeded, None);
        assert_eq!(g.running(), 0);
        assert_eq!(g.take_startable(), vec![2]);
    }

    #[test]
    fn a_skipped_leader_leaves_its_followers_to_run_alone() {
        let mut g = dag(4, u64::MAX, vec![0; 5], none());
        // c (needs b, needs a) leads e.
        g.group(&[2, 4]);
        assert_eq!(g.take_startable(), vec![0]);
        g.finish(0, StepStatus::Failed, None);
        // b, c and d are skipped; e runs on its own.
        assert_eq!(g.take_startable(), vec![4]);
        assert_eq!(g.members(4), vec![4]);
    }

    #[test]
    fn steps_off_this_host_take_no_job_slot_and_no_memory() {
        // Two slots, a budget of 10: four steps on a batch scheduler start at once
        // beside two local ones, and none of them holds back the third local one
        // when a local one ends.
        let ids: Vec<String> = (0..7).map(|i| format!("s{i}")).collect();
        let mut d = Dag::from_parts(ids, vec![vec![]; 7], vec![6; 7], vec![vec![]; 7], 2, 10);
        d.set_off_host(vec![true, true, false, true, false, true, false]);
        assert_eq!(d.take_startable(), vec![0, 1, 2, 3, 5]);
        d.finish(2, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![4]);
        d.finish(0, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), Vec::<usize>::new());
        d.finish(4, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![6]);
    }

    #[test]
    fn steps_off_this_host_are_held_to_a_bounded_number_in_flight() {
        let n = OFF_HOST_IN_FLIGHT + 10;
        let ids: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let mut d = Dag::from_parts(ids, vec![vec![]; n], vec![0; n], vec![vec![]; n], 2, 10);
        d.set_off_host(vec![true; n]);
        let first = d.take_startable();
        assert_eq!(first.len(), OFF_HOST_IN_FLIGHT);
        assert_eq!(d.take_startable(), Vec::<usize>::new());
        for &i in &first[..3] {
            d.finish(i, StepStatus::Succeeded, None);
        }
        let next = d.take_startable();
        assert_eq!(
            next,
            (OFF_HOST_IN_FLIGHT..OFF_HOST_IN_FLIGHT + 3).collect::<Vec<_>>()
        );
        assert_eq!(d.running(), OFF_HOST_IN_FLIGHT);
    }

    #[test]
    fn steps_sharing_a_device_request_take_turns() {
        let mut d = dag(
            4,
            u64::MAX,
            vec![0; 5],
            vec![vec!["gpu"], vec![], vec![], vec![], vec!["gpu"]],
        );
        assert_eq!(d.take_startable(), vec![0], "e waits for the gpu a holds");
        d.finish(0, StepStatus::Succeeded, None);
        assert_eq!(d.take_startable(), vec![1, 3, 4]);
    }

    #[test]
    fn waiting_and_running_steps_are_ended_at_the_end() {
        let mut d = dag(1, u64::MAX, vec![0; 5], none());
        assert_eq!(d.take_startable(), vec![0]);
        let skipped = d.skip_waiting("interrupted");
        assert_eq!(skipped.len(), 4);
        assert_eq!(d.reason(4), Some("not started: interrupted"));
        assert_eq!(d.running_steps(), vec![0]);
        d.finish(0, StepStatus::Cancelled, Some("abandoned".into()));
        assert_eq!(d.running(), 0);
        assert_eq!(d.statuses()[0], StepStatus::Cancelled);
    }
}
