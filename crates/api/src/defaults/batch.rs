//! batch/v1 defaults: Jobs and CronJobs (upstream's `SetDefaults_Job`, `SetDefaults_CronJob`).

use serde_json::{Map, Value, json};

use super::{child, default_ptr, existing, on_root, template};

/// A Job: completions and parallelism, back-off limit, completion mode, suspension, pod
/// replacement policy, and labels from the template.
pub fn job(obj: &mut Value) {
    on_root(obj, job_root)
}

fn job_root(root: &mut Map<String, Value>) {
    let template_labels = root
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = template_labels
        && let Some(meta) = child(root, "metadata")
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
    let Some(spec) = child(root, "spec") else {
        return;
    };
    job_spec(spec);
}

fn job_spec(spec: &mut Map<String, Value>) {
    // A job that sets neither runs one pod to completion.
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_ptr(spec, "parallelism", json!(1));
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    default_ptr(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    default_ptr(spec, "completionMode", json!("NonIndexed"));
    default_ptr(spec, "suspend", json!(false));
    let has_failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    default_ptr(
        spec,
        "podReplacementPolicy",
        json!(if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    template(spec);
}

/// A CronJob: concurrency, suspension, history limits, and its job template's defaults.
pub fn cron_job(obj: &mut Value) {
    on_root(obj, |root| {
        let Some(spec) = child(root, "spec") else {
            return;
        };
        default_ptr(spec, "concurrencyPolicy", json!("Allow"));
        default_ptr(spec, "suspend", json!(false));
        default_ptr(spec, "successfulJobsHistoryLimit", json!(3));
        default_ptr(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(job_template) = existing(spec, "jobTemplate")
            && let Some(job_spec) = existing(job_template, "spec")
        {
            template(job_spec);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_default_as_upstream() {
        let mut j = json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}});
        job(&mut j);
        let spec = &j["spec"];
        assert_eq!(
            (
                &spec["completions"],
                &spec["parallelism"],
                &spec["backoffLimit"]
            ),
            (&json!(1), &json!(1), &json!(6))
        );
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(j["metadata"]["labels"], json!({"a": "b"}));
        let mut parallel = json!({"spec": {"parallelism": 3, "template": {}}});
        job(&mut parallel);
        assert!(parallel["spec"].get("completions").is_none());
    }

    #[test]
    fn cron_jobs_default_as_upstream() {
        let mut c = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
        cron_job(&mut c);
        assert_eq!(c["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(c["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(c["spec"]["failedJobsHistoryLimit"], 1);
        assert_eq!(
            c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
    }
}
