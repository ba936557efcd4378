//! An orchestrator at a release, as `--orchestrator` names it (`nomad@1.5`; the bare name is
//! its current releases): the rows of its table that hold for that release and the
//! [`CallPattern`] they make.

use std::fmt;

use super::{Behaviour, CallPattern, Orchestrator, Release, kubernetes, nomad};

/// One `--orchestrator` value: an orchestrator, pinned to a release or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Profile {
    /// The orchestrator.
    pub orchestrator: Orchestrator,
    /// The release it is pinned to (`None`: its current releases).
    pub release: Option<Release>,
}

impl From<Orchestrator> for Profile {
    fn from(orchestrator: Orchestrator) -> Self {
        Profile { orchestrator, release: None }
    }
}

impl Profile {
    /// Parses one `--orchestrator` value: a name, `all`, or `<name>@<release>` with a
    /// release its table knows (from [`Orchestrator::oldest`] on).
    pub fn parse(word: &str) -> Result<Vec<Profile>, String> {
        let Some((name, text)) = word.split_once('@') else {
            return Ok(Orchestrator::parse(word)?.into_iter().map(Profile::from).collect());
        };
        let o = match Orchestrator::parse(name)?.as_slice() {
            [o] => *o,
            _ => return Err(format!("{word:?}: a release pins one orchestrator (nomad@1.5), not all of them")),
        };
        let known = format!(
            "the {} table (docs/orchestrators.md) knows {} from {} on; without a release, {} is its current releases",
            o.title(),
            o.title(),
            o.oldest(),
            o.name()
        );
        let release = Release::parse(text).ok_or_else(|| {
            format!("{word:?}: {text:?} is not a release (major.minor or major.minor.patch, such as {}@{}); {known}", o, o.oldest())
        })?;
        if release < o.oldest() {
            return Err(format!("{word:?}: {release} is older than any row knows; {known}"));
        }
        Ok(vec![Profile { orchestrator: o, release: Some(release) }])
    }

    /// Its title in prose (`Nomad 1.5`, `Docker Swarm`).
    pub fn title(self) -> String {
        match self.release {
            Some(r) => format!("{} {r}", self.orchestrator.title()),
            None => self.orchestrator.title().to_owned(),
        }
    }

    /// The rows of its table that hold for its release, in the table's order.
    pub fn rows(self) -> impl Iterator<Item = &'static Behaviour> {
        self.orchestrator.table().iter().filter(move |b| b.range.holds(self.release))
    }

    /// The row of behaviour `id` that holds for its release.
    pub fn behaviour(self, id: &str) -> Option<&'static Behaviour> {
        self.rows().find(|b| b.id == id)
    }

    /// How it calls a plugin: the current pattern with the rows of its release.
    pub fn pattern(self) -> CallPattern {
        let mut p = *self.orchestrator.pattern();
        match self.orchestrator {
            Orchestrator::Nomad => nomad::pin(&mut p, self.release),
            Orchestrator::Kubernetes => kubernetes::pin(&mut p, self.release),
            Orchestrator::Swarm => {}
        }
        p
    }
}

impl fmt::Display for Profile {
    /// `nomad`, `nomad@1.5`: the suffix of an instance's id and the matrix's column.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.release {
            Some(r) => write!(f, "{}@{r}", self.orchestrator),
            None => write!(f, "{}", self.orchestrator),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::{Layout, ids};

    fn one(word: &str) -> Profile {
        let mut all = Profile::parse(word).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.len(), 1, "{word}");
        all.remove(0)
    }

    #[test]
    fn a_value_is_a_name_all_or_a_name_at_a_release_the_table_knows() {
        assert_eq!(Profile::parse("all").unwrap().len(), 3);
        assert_eq!(one("nomad"), Profile::from(Orchestrator::Nomad));
        assert_eq!(one("nomad@1.5").to_string(), "nomad@1.5");
        assert_eq!(one("Kubernetes@1.26").title(), "Kubernetes 1.26");
        let old = Profile::parse("nomad@1.2").unwrap_err();
        assert!(old.contains("older than any row knows") && old.contains("from 1.3.0 on"), "{old}");
        let junk = Profile::parse("kubernetes@latest").unwrap_err();
        assert!(junk.contains("not a release") && junk.contains("from 1.17.0 on"), "{junk}");
        assert!(Profile::parse("all@1.5").unwrap_err().contains("one orchestrator"));
        assert!(Profile::parse("mesos@1.0").unwrap_err().contains("nomad, kubernetes, swarm"));
        assert!(one("nomad") < one("nomad@1.5"), "the current releases sort first");
    }

    /// The fields of a pattern that differ between two profiles, by the row they come from.
    fn changed(a: Profile, b: Profile) -> Vec<&'static str> {
        let (p, q) = (a.pattern(), b.pattern());
        let mut rows = Vec::new();
        if p.layout != q.layout {
            rows.push(ids::STAGING);
        }
        if p.parallel_controller_publish != q.parallel_controller_publish {
            rows.push(ids::CONCURRENCY_CONTROLLER);
        }
        assert_eq!(CallPattern { layout: q.layout, parallel_controller_publish: q.parallel_controller_publish, ..p }, q, "{a} {b}");
        rows
    }

    #[test]
    fn a_pinned_release_changes_exactly_the_rows_that_changed_since() {
        let current = one("nomad");
        // Before PR #17996's backports and PR #20532: parallel controller RPCs, no namespace.
        assert_eq!(changed(current, one("nomad@1.5")), [ids::STAGING, ids::CONCURRENCY_CONTROLLER]);
        assert_eq!(one("nomad@1.5").pattern().layout, Layout::NomadNoNamespace);
        assert!(one("nomad@1.5").pattern().parallel_controller_publish);
        // 1.5.8 has the serialiser, not the namespace.
        assert_eq!(changed(current, one("nomad@1.5.8")), [ids::STAGING]);
        assert_eq!(changed(current, one("nomad@1.7.8")), Vec::<&str>::new());
        assert_eq!(changed(current, one("nomad@1.7.7")), [ids::STAGING]);
        // The kubelet's staging path named by the PV before 1.24 (kubernetes PR #107065).
        assert_eq!(changed(one("kubernetes"), one("kubernetes@1.23")), [ids::STAGING]);
        assert_eq!(one("kubernetes@1.23").pattern().layout, Layout::KubeletPvName);
        assert_eq!(changed(one("kubernetes"), one("kubernetes@1.26")), Vec::<&str>::new());
        assert_eq!(changed(one("swarm"), one("swarm@23.0")), Vec::<&str>::new());
    }

    #[test]
    fn every_release_from_the_oldest_has_exactly_one_row_per_behaviour() {
        for o in Orchestrator::ALL {
            // The oldest, each release a row names and the start of its series, the current.
            let mut probes: Vec<Option<Release>> = vec![None, Some(o.oldest())];
            for r in o.table().iter().flat_map(|b| b.range.releases()) {
                probes.extend([Some(*r), Some(r.series_start())]);
            }
            let every: std::collections::BTreeSet<&str> = o.table().iter().map(|b| b.id).collect();
            for release in probes {
                let p = Profile { orchestrator: o, release };
                let ids: Vec<&str> = p.rows().map(|b| b.id).collect();
                let distinct: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
                assert_eq!(ids.len(), distinct.len(), "{p}: two rows of one behaviour hold");
                assert_eq!(distinct, every, "{p}: a behaviour without a row");
            }
        }
    }
}
