//! events.k8s.io/v1 Events: the core/v1 Events seen through upstream's conversion, so both APIs
//! list, watch and write the same objects (client-go's new event recorder, used by
//! kube-scheduler, writes these; `kubectl get events` reads core/v1).

use serde_json::Value;

use super::{
    Kind,
    conversion::{Conversion, rename},
};
use crate::table::Printer;

/// The events.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<k8s_openapi::api::events::v1::Event>()
            .short_names(&["ev"])
            .view_of("", "events", EventsV1)
            .printer(Printer::Default),
    ]
}

/// Field moves between core/v1 (left) and events.k8s.io/v1 (right), as upstream's
/// `Convert_v1_Event_To_core_Event` and back.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

struct EventsV1;

impl Conversion for EventsV1 {
    fn stored_to_view(&self, mut obj: Value) -> Value {
        for (core, events) in RENAMES {
            rename(&mut obj, core, events);
        }
        obj
    }

    fn view_to_stored(&self, mut obj: Value) -> Value {
        for (core, events) in RENAMES {
            rename(&mut obj, events, core);
        }
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips() {
        let core = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "hi", "reason": "Started", "source": {"component": "kubelet"}, "count": 2,
            "reportingComponent": "kubelet", "type": "Normal"});
        let v1 = EventsV1.stored_to_view(core.clone());
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "hi");
        assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "kubelet");
        assert_eq!(EventsV1.view_to_stored(v1), core);
    }
}
