//! The pod-template hash that names ReplicaSets and ControllerRevisions.
//!
//! Upstream hashes the Go struct with a deep printer, which no other language reproduces; rollwright
//! hashes a canonical JSON serialization instead (keys sorted, no whitespace), with the same
//! FNV-1a 32-bit function, the same collision-count suffix and the same safe encoding, so names
//! look and behave like upstream's (`web-7d4b9c8f5`), stay stable across restarts, and change
//! with `status.collisionCount`.

use serde_json::Value;

/// The alphabet upstream's `rand.SafeEncodeString` maps onto: no vowels (no words), no
/// look-alikes (`0`, `1`, `3`), so generated names never read as anything.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bit.
#[derive(Clone, Copy, Debug)]
struct Fnv1a(u32);

impl Fnv1a {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;

    fn new() -> Self {
        Fnv1a(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u32::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
}

/// Writes `v` as JSON with object keys sorted at every level (the workspace keeps insertion order
/// elsewhere, which would make the hash depend on how a client ordered its fields).
pub fn canonical_json(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            out.push(b'{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(k.clone()).to_string().as_bytes());
                out.push(b':');
                canonical_json(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(item, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// Maps each byte onto the safe alphabet, as upstream's `SafeEncodeString`.
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()] as char)
        .collect()
}

/// The `pod-template-hash` / `controller-revision-hash` of a pod template (the JSON of
/// `spec.template`), salted with the owner's `status.collisionCount` when set.
pub fn template_hash(template: &Value, collision_count: Option<i32>) -> String {
    let mut bytes = Vec::new();
    canonical_json(template, &mut bytes);
    let mut h = Fnv1a::new();
    h.write(&bytes);
    if let Some(c) = collision_count {
        // Upstream writes the count as an unsigned 32-bit little-endian integer.
        h.write(&(c as u32).to_le_bytes());
    }
    safe_encode(&h.0.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference test suite.
        for (input, want) in [
            ("", 0x811c_9dc5u32),
            ("a", 0xe40c_292c),
            ("foobar", 0xbf9c_f968),
        ] {
            let mut h = Fnv1a::new();
            h.write(input.as_bytes());
            assert_eq!(h.0, want, "{input:?}");
        }
    }

    #[test]
    fn safe_encoding_uses_only_the_alphabet() {
        // b'0' is 48 and 48 % 27 = 21, the alphabet's `4`.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        assert!(
            safe_encode("4294967295")
                .bytes()
                .all(|b| SAFE_ALPHABET.contains(&b))
        );
    }

    #[test]
    fn the_hash_ignores_key_order_and_follows_content_and_collisions() {
        let a = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
        let b = json!({"spec": {"containers": [{"image": "nginx:1", "name": "c"}]}, "metadata": {"labels": {"tier": "fe", "app": "web"}}});
        let c = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert_eq!(template_hash(&a, None), template_hash(&b, None));
        assert_ne!(template_hash(&a, None), template_hash(&c, None));
        assert_ne!(template_hash(&a, None), template_hash(&a, Some(1)));
        assert_ne!(template_hash(&a, Some(1)), template_hash(&a, Some(2)));
        assert_eq!(template_hash(&a, Some(0)), template_hash(&a, Some(0)));
        let h = template_hash(&a, None);
        assert!(!h.is_empty() && h.len() <= 10, "{h}");
    }
}
