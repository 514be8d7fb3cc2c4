//! batch/v1 Jobs and CronJobs: stored with upstream's defaults, generated selector and
//! validation. The controllers crate runs them (`job`, `cronjob`, `ttl-after-finished`).

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use serde_json::{Value, json};

use super::{Generation, Kind, Rules, Strategy, Subresource};
use crate::{
    object,
    table::{
        AGE, CONTAINERS, Column, Desc, IMAGES, NAME, Printer, Row, age_cell, arr, col,
        container_cells, format_label_selector, get, human_duration_since, i, name_cell, plain, s,
        since, timestamp,
    },
};

/// The batch kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<CronJob>()
            .short_names(&["cj"])
            .categories(&["all"])
            .subresources(&[Subresource::Status])
            .strategy(
                Rules::new()
                    .defaults(api::defaults::cron_job)
                    .validate(api::validation::batch::validate_cron_job)
                    .generation(Generation::Spec),
            )
            .printer(Printer::Columns {
                columns: cron_job_columns,
                row: cron_job_row,
            }),
        Kind::of::<Job>()
            .categories(&["all"])
            .subresources(&[Subresource::Status])
            .strategy(JobStrategy)
            .selectable_fields(&["status.successful"])
            .field_defaults(&[("status.successful", "0")])
            .printer(Printer::Columns {
                columns: job_columns,
                row: job_row,
            }),
    ]
}

/// Upstream's `pkg/registry/batch/job/strategy.go`.
struct JobStrategy;

/// The labels upstream's generated selector puts on a job's pods.
const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

impl Strategy for JobStrategy {
    /// batch/v1 Jobs orphan their pods unless told otherwise, for compatibility with clients
    /// older than garbage collection (kubectl sends Background explicitly).
    fn default_propagation(&self) -> &'static str {
        "Orphan"
    }

    /// Generates the selector from the job's uid unless `manualSelector` is set, labelling the
    /// template to match (upstream's `generateSelector`).
    fn prepare_for_create(&self, obj: &mut Value) {
        if obj.pointer("/spec/manualSelector") == Some(&json!(true)) {
            return;
        }
        let name = object::name(obj).to_string();
        let uid = object::meta_str(obj, "uid").unwrap_or_default().to_string();
        // Upstream defaults the job's labels from the template before the generated ones exist.
        let user_labels = obj
            .pointer("/spec/template/metadata/labels")
            .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
            .cloned();
        if let Some(labels) = user_labels
            && object::labels(obj).is_empty()
        {
            object::meta_mut(obj).insert("labels".into(), labels);
        }
        if !obj["spec"].is_object() {
            obj["spec"] = json!({});
        }
        let spec = &mut obj["spec"];
        if !spec["template"].is_object() {
            spec["template"] = json!({});
        }
        if !spec["template"]["metadata"].is_object() {
            spec["template"]["metadata"] = json!({});
        }
        if !spec["template"]["metadata"]["labels"].is_object() {
            spec["template"]["metadata"]["labels"] = json!({});
        }
        let labels = &mut spec["template"]["metadata"]["labels"];
        for k in JOB_NAME_LABELS {
            if labels.get(k).is_none() {
                labels[k] = json!(name);
            }
        }
        for k in CONTROLLER_UID_LABELS {
            if labels.get(k).is_none() {
                labels[k] = json!(uid);
            }
        }
        if !spec["selector"].is_object() {
            spec["selector"] = json!({});
        }
        if !spec["selector"]["matchLabels"].is_object() {
            spec["selector"]["matchLabels"] = json!({});
        }
        let match_labels = &mut spec["selector"]["matchLabels"];
        if match_labels.get(CONTROLLER_UID_LABELS[1]).is_none() {
            match_labels[CONTROLLER_UID_LABELS[1]] = json!(uid);
        }
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::job(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::batch::validate_job(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::batch::validate_job(new);
        errs.extend(api::validation::batch::validate_job_update(new, old));
        errs
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }
}

fn job_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    vec![
        NAME,
        col("Status", "string", 0, Text("Status of the job.")),
        col(
            "Completions",
            "string",
            0,
            Field("io.k8s.api.batch.v1.JobStatus", "succeeded"),
        ),
        col(
            "Duration",
            "string",
            0,
            Text("Time required to complete the job."),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Field("io.k8s.api.batch.v1.JobSpec", "selector"),
        ),
    ]
}

fn has_condition(job: &Value, ty: &str) -> bool {
    arr(job, &["status", "conditions"])
        .iter()
        .any(|c| c["type"] == ty && c["status"] == "True")
}

/// Upstream's `printJob`.
fn job_row(job: &Value, now: Timestamp) -> Row {
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if object::is_deleting(job) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = i(job, &["status", "succeeded"]);
    let completions = match get(job, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match i(job, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = timestamp(get(job, &["status", "startTime"]));
    let duration = match (start, timestamp(get(job, &["status", "completionTime"]))) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration_since(s, now),
        (Some(s), Some(done)) => human_duration_since(s, done),
    };
    let (names, images) = container_cells(&job["spec"]["template"]["spec"]);
    plain(vec![
        name_cell(job),
        json!(status),
        json!(completions),
        json!(duration),
        age_cell(job, now),
        json!(names),
        json!(images),
        json!(format_label_selector(get(job, &["spec", "selector"]))),
    ])
}

fn cron_job_columns() -> Vec<Column> {
    use Desc::{Field, Text};
    const SPEC: &str = "io.k8s.api.batch.v1.CronJobSpec";
    vec![
        NAME,
        col("Schedule", "string", 0, Field(SPEC, "schedule")),
        col("Timezone", "string", 0, Field(SPEC, "timeZone")),
        col("Suspend", "boolean", 0, Field(SPEC, "suspend")),
        col(
            "Active",
            "integer",
            0,
            Field("io.k8s.api.batch.v1.CronJobStatus", "active"),
        ),
        col(
            "Last Schedule",
            "string",
            0,
            Field("io.k8s.api.batch.v1.CronJobStatus", "lastScheduleTime"),
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        col(
            "Selector",
            "string",
            1,
            Text("Selector of the job template."),
        ),
    ]
}

/// Upstream's `printCronJob`.
fn cron_job_row(cj: &Value, now: Timestamp) -> Row {
    let last = if get(cj, &["status", "lastScheduleTime"]).is_some_and(|v| !v.is_null()) {
        since(get(cj, &["status", "lastScheduleTime"]), now)
    } else {
        "<none>".into()
    };
    let zone = Some(s(cj, &["spec", "timeZone"]))
        .filter(|z| !z.is_empty())
        .unwrap_or("<none>");
    let suspend = match get(cj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let job_spec = &cj["spec"]["jobTemplate"]["spec"];
    let (names, images) = container_cells(&job_spec["template"]["spec"]);
    plain(vec![
        name_cell(cj),
        json!(s(cj, &["spec", "schedule"])),
        json!(zone),
        json!(suspend),
        json!(arr(cj, &["status", "active"]).len()),
        json!(last),
        age_cell(cj, now),
        json!(names),
        json!(images),
        json!(format_label_selector(job_spec.get("selector"))),
    ])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn jobs_get_a_generated_selector() {
        let mut job = json!({"metadata": {"name": "pi", "namespace": "d", "uid": "u-1"}, "spec": {"template": {"metadata": {"labels": {"app": "pi"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}});
        JobStrategy.prepare_for_create(&mut job);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(labels["controller-uid"], "u-1");
        assert_eq!(job["metadata"]["labels"], json!({"app": "pi"}));
        JobStrategy.defaults(&mut job);
        assert!(
            JobStrategy.validate(&job).is_empty(),
            "{:?}",
            JobStrategy.validate(&job)
        );
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        job["metadata"]["creationTimestamp"] = json!("2024-05-01T11:59:00Z");
        job["status"] = json!({"succeeded": 1, "startTime": "2024-05-01T11:59:00Z",
            "completionTime": "2024-05-01T11:59:10Z", "conditions": [{"type": "Complete", "status": "True"}]});
        let cells = job_row(&job, now).0;
        assert_eq!(
            Value::Array(cells[..5].to_vec()),
            json!(["pi", "Complete", "1/1", "10s", "60s"])
        );
    }
}
