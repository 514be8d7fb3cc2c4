//! How many seats a request takes: upstream's work estimator (`request/width.go`,
//! `list_work_estimator.go`). A list costs one seat per 100 objects it goes through, at most 10,
//! so that concurrent large lists wait for each other instead of all running at once; anything
//! else takes one seat. A watch takes one seat while it starts (its initial events cost more
//! only when it asks for them with `sendInitialEvents`), and none once it streams.

use authz::Attributes;

use crate::request::Params;

/// Objects a seat pays for (upstream's `objectsPerSeat`).
pub(crate) const OBJECTS_PER_SEAT: u64 = 100;
/// The most seats one request takes (upstream's `maximumSeatsLimit`).
pub(crate) const MAX_SEATS: u32 = 10;

/// The seats `attrs` with `query` takes, `stored` being how many objects of its resource the
/// watch cache holds (`None`: a resource it does not hold, such as an aggregated one, which
/// costs this server little).
pub(crate) fn seats(attrs: &Attributes, query: Option<&str>, stored: Option<usize>) -> u32 {
    if !attrs.resource_request || !matches!(attrs.verb.as_str(), "list" | "watch") {
        return 1;
    }
    // A list naming its object (`fieldSelector=metadata.name=x`) reads one.
    if !attrs.name.is_empty() {
        return 1;
    }
    let Ok(params) = Params::parse(query) else {
        // Bound to fail validation; upstream charges the most.
        return MAX_SEATS;
    };
    if attrs.verb == "watch" && !crate::request::flag(&params.send_initial_events) {
        return 1;
    }
    let Some(stored) = stored else {
        return 1;
    };
    // Every list here is served from the watch cache and goes through every object the cache
    // holds of the resource, a page too: upstream's estimate for a list from the cache.
    let objects = stored as u64;
    let seats = objects.div_ceil(OBJECTS_PER_SEAT);
    seats.clamp(1, u64::from(MAX_SEATS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(resource: &str) -> Attributes {
        Attributes {
            verb: "list".into(),
            resource_request: true,
            resource: resource.into(),
            api_version: "v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_list_takes_a_seat_per_hundred_objects_up_to_ten() {
        let pods = list("pods");
        assert_eq!(seats(&pods, None, Some(0)), 1);
        assert_eq!(seats(&pods, None, Some(100)), 1);
        assert_eq!(seats(&pods, None, Some(101)), 2);
        assert_eq!(seats(&pods, None, Some(550)), 6);
        assert_eq!(seats(&pods, None, Some(5000)), 10);
        // From the cache, a page still goes through every object (upstream's estimate).
        assert_eq!(seats(&pods, Some("limit=10"), Some(550)), 6);
        // One named object, an unknown resource: one seat.
        let named = Attributes {
            name: "a".into(),
            ..list("pods")
        };
        assert_eq!(seats(&named, None, Some(5000)), 1);
        assert_eq!(seats(&pods, None, None), 1);
    }

    #[test]
    fn a_watch_takes_one_seat_unless_it_asks_for_initial_events() {
        let watch = Attributes {
            verb: "watch".into(),
            ..list("pods")
        };
        assert_eq!(seats(&watch, Some("watch=1"), Some(5000)), 1);
        assert_eq!(
            seats(
                &watch,
                Some(
                    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                ),
                Some(5000)
            ),
            10
        );
        let create = Attributes {
            verb: "create".into(),
            ..list("pods")
        };
        assert_eq!(seats(&create, None, Some(5000)), 1);
    }
}
