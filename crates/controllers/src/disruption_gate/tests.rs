#![allow(clippy::unwrap_used)]

use super::*;

fn pod(name: &str, phase: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "db"}},
        "status": {"phase": phase, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}
        ]},
    }))
    .unwrap()
}

fn budget(
    name: &str,
    allowed: i32,
    current: i32,
    desired: i32,
    observed: i64,
) -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": {"minAvailable": desired, "selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": current,
            "desiredHealthy": desired, "expectedPods": current, "observedGeneration": observed},
    }))
    .unwrap()
}

#[test]
fn a_pod_goes_as_an_eviction_would_let_it() {
    let open = budget("b", 1, 4, 3, 2);
    let shut = budget("b", 0, 3, 3, 2);
    let stale = budget("b", 1, 4, 3, 1);
    let unhealthy = budget("b", 0, 2, 3, 2);
    let other = budget("c", 1, 4, 3, 2);
    let refused = |why: &str| {
        Verdict::Refuse(Refusal {
            budget: "b".into(),
            allowed: 0,
            why: why.into(),
        })
    };
    // (case, pod, budgets, verdict)
    let cases: Vec<(&str, Pod, Vec<&PodDisruptionBudget>, Verdict)> = vec![
        ("no budget", pod("p", "Running", true), vec![], Verdict::Free),
        ("a ready pod spends", pod("p", "Running", true), vec![&open], Verdict::Spend("b".into())),
        (
            "none left",
            pod("p", "Running", true),
            vec![&shut],
            refused("The disruption budget b needs 3 healthy pods and has 3 currently"),
        ),
        (
            "a budget behind its spec",
            pod("p", "Running", true),
            vec![&stale],
            Verdict::Refuse(Refusal {
                budget: "b".into(),
                allowed: 1,
                why: "The disruption budget b is still being processed by the server.".into(),
            }),
        ),
        ("a pending pod disrupts nothing", pod("p", "Pending", false), vec![&shut], Verdict::Free),
        ("nor a failed one", pod("p", "Failed", false), vec![&shut], Verdict::Free),
        ("an unready pod under a met budget", pod("p", "Running", false), vec![&shut], Verdict::Free),
        (
            "an unready pod under an unmet budget",
            pod("p", "Running", false),
            vec![&unhealthy],
            refused("The disruption budget b needs 3 healthy pods and has 2 currently"),
        ),
        (
            "two budgets",
            pod("p", "Running", true),
            vec![&open, &other],
            Verdict::Refuse(Refusal {
                budget: "b,c".into(),
                allowed: 0,
                why: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
            }),
        ),
    ];
    for (name, p, budgets, want) in cases {
        assert_eq!(judge(&p, &budgets), want, "{name}");
    }
}

#[test]
fn spending_is_the_evictions_write() {
    let now: Timestamp = "2024-01-01T00:00:10.5Z".parse().unwrap();
    let next = spend(&budget("b", 1, 4, 3, 2), "web-1", now);
    let s = next.status.unwrap();
    assert_eq!(s.disruptions_allowed, 0);
    let at = &s.disrupted_pods.unwrap()["web-1"];
    assert_eq!(at.0, "2024-01-01T00:00:10Z".parse::<Timestamp>().unwrap());
    let c = s.conditions.unwrap();
    assert_eq!(c[0].type_, "DisruptionAllowed");
    assert_eq!(c[0].status, "False");
}

#[test]
fn the_annotation_wins_over_the_default() {
    let a = |v: &str| Some(BTreeMap::from([(ANNOTATION.to_string(), v.to_string())]));
    assert!(honors(a("true").as_ref(), false));
    assert!(!honors(a("false").as_ref(), true));
    assert!(honors(a("yes please").as_ref(), true));
    assert!(!honors(a("").as_ref(), false));
    assert!(!honors(None, false));
    assert!(honors(None, true));
}

#[test]
fn old_replica_sets_shrink_only_as_far_as_budgets_allow() {
    let shrink = |name: &str, from, to, unavailable| Shrink {
        name: name.into(),
        from,
        to,
        unavailable,
    };
    let allowances = |left: &[(&str, i32)], of: &[(&str, &[&str])]| Allowances {
        left: left.iter().map(|(n, l)| (n.to_string(), *l)).collect(),
        of: of
            .iter()
            .map(|(rs, bs)| (rs.to_string(), bs.iter().map(|b| b.to_string()).collect()))
            .collect(),
    };
    // No budget: the plan stands.
    let (plan, held) = cap_scale_down(&[shrink("v1", 4, 2, 0)], &allowances(&[], &[("v1", &[])]));
    assert_eq!(plan, [("v1".to_string(), 2)]);
    assert_eq!(held, None);
    // One allowance: one available pod goes, and the budget is named.
    let (plan, held) = cap_scale_down(
        &[shrink("v1", 4, 2, 0)],
        &allowances(&[("b", 1)], &[("v1", &["b"])]),
    );
    assert_eq!(plan, [("v1".to_string(), 3)]);
    let held = held.unwrap();
    assert_eq!(held.budget, "b");
    assert_eq!(held.allowed, 1);
    assert_eq!(held.summary(), "waiting on pdb/b (1 disruption allowed)");
    // Unavailable pods go freely; the allowance is shared by the ReplicaSets the budget selects.
    let (plan, held) = cap_scale_down(
        &[shrink("v1", 3, 0, 2), shrink("v2", 2, 0, 0)],
        &allowances(&[("b", 1)], &[("v1", &["b"]), ("v2", &["b"])]),
    );
    assert_eq!(plan, [("v1".to_string(), 0)]);
    assert_eq!(
        held.unwrap().summary(),
        "waiting on pdb/b (0 disruptions allowed)"
    );
    // Nothing allowed: nothing planned.
    let (plan, held) = cap_scale_down(
        &[shrink("v1", 3, 2, 0)],
        &allowances(&[("b", 0)], &[("v1", &["b"])]),
    );
    assert!(plan.is_empty());
    assert!(held.is_some());
    // Two budgets refuse, as the eviction does.
    let (plan, held) = cap_scale_down(
        &[shrink("v1", 3, 2, 0)],
        &allowances(&[("b", 5), ("c", 5)], &[("v1", &["b", "c"])]),
    );
    assert!(plan.is_empty());
    assert_eq!(held.unwrap().budget, "b,c");
}

#[test]
fn the_condition_tells_the_budget_and_goes_when_nothing_waits() {
    let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let t1: Timestamp = "2024-01-01T00:00:05Z".parse().unwrap();
    let r = Refusal {
        budget: "db".into(),
        allowed: 0,
        why: "The disruption budget db needs 3 healthy pods and has 3 currently".into(),
    };
    let other = json!({"type": "RolloutPaced", "status": "True"});
    let mut fields = json!({"replicas": 3});
    assert!(add_to(
        &mut fields,
        std::slice::from_ref(&other),
        Some(&r),
        t0
    ));
    let list = fields["conditions"].as_array().unwrap().clone();
    assert_eq!(list.len(), 2);
    let c = &list[1];
    assert_eq!(c["reason"], REASON);
    assert_eq!(
        summary_of(c),
        Some("waiting on pdb/db (0 disruptions allowed)")
    );
    // The same hold later changes nothing.
    let mut again = json!({});
    assert!(!add_to(&mut again, &list, Some(&r), t1));
    // Nothing held: the condition goes, the other stays.
    let mut gone = json!({});
    assert!(add_to(&mut gone, &list, None, t1));
    assert_eq!(gone["conditions"], json!([other]));
    // Never held: nothing to write.
    let mut none = json!({});
    assert!(!add_to(&mut none, std::slice::from_ref(&other), None, t1));

    let mut conditions = None;
    set_deployment_condition(&mut conditions, Some(&r), t0);
    let c = &conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.reason.as_deref()),
        (CONDITION, Some(REASON))
    );
    set_deployment_condition(&mut conditions, None, t1);
    assert_eq!(conditions, None);
}
