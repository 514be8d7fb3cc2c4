//! An object as a client's version of its kind sees it: stored objects converted and defaulted
//! on the way out, request objects converted on the way in (for kinds served in more than one
//! group or version, and custom resources with defaults).

use serde_json::Value;

use crate::registry::Kind;

/// A stored object as `view` serves it: converted when the view is another version or group of
/// the stored kind, as is otherwise, then given the view's defaults when its schema has some
/// (upstream defaults custom resources as it decodes them from storage).
pub(crate) fn present(view: &Kind, obj: Value) -> Value {
    let mut obj = match view.conversion() {
        None => obj,
        Some(conversion) => {
            let mut obj = conversion.stored_to_view(obj);
            if let Some(m) = obj.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(view.api_version()));
                m.insert("kind".into(), Value::String(view.kind.clone()));
            }
            obj
        }
    };
    if view.strategy.defaults_on_read() {
        view.strategy.default_on_read(&mut obj);
    }
    obj
}

/// A request object of `view` as `storage` stores it.
pub(crate) fn intake(view: &Kind, storage: &Kind, obj: Value) -> Value {
    let Some(conversion) = view.conversion() else {
        return obj;
    };
    let mut obj = conversion.view_to_stored(obj);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(storage.api_version()));
        m.insert("kind".into(), Value::String(storage.kind.clone()));
    }
    obj
}
