//! [`Strategy`]: a kind's write rules, as upstream's `pkg/registry/<group>/<kind>/strategy.go`
//! states them (`PrepareForCreate`, `PrepareForUpdate`, `Validate`, `ValidateUpdate`, and the
//! status strategy's own `PrepareForUpdate`).
//!
//! The generic parts every write shares (server-owned metadata, name and namespace checks,
//! immutable `uid`, `status` kept on main-resource writes) live in `admission`; a strategy says
//! only what differs per kind, and every method has the default most kinds want.

use api::field::FieldError;
use serde_json::Value;

/// When a main-resource write moves `metadata.generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// Never: the kind has no generation (it is not set on create either).
    Untracked,
    /// When `spec` changes (workloads, PodDisruptionBudgets, Ingresses, ...).
    Spec,
    /// When `spec` or `metadata.annotations` change: upstream's Deployment bumps it on
    /// annotation changes too, because they are copied to its ReplicaSets.
    SpecOrAnnotations,
    /// When anything but `metadata` and `status` changes (custom resources).
    AllButMetadataAndStatus,
    /// Set to 1 on create and never moved (kinds that carried one before they were tracked,
    /// such as pods in rollwright's earlier releases).
    Fixed,
}

/// A part of the object a `status` write takes from the stored object rather than the request
/// (upstream's status strategies' `PrepareForUpdate`; everything else in the request is kept,
/// metadata included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// `spec`.
    Spec,
    /// `metadata.labels` (Deployments).
    Labels,
    /// `metadata.annotations` (CustomResourceDefinitions).
    Annotations,
    /// `metadata.deletionTimestamp` (pods).
    DeletionTimestamp,
    /// `metadata.ownerReferences` (pods: old kubelets corrupted them).
    OwnerReferences,
    /// Everything but `status` (custom resources: the request's metadata is dropped too).
    AllButStatus,
}

/// Reads the cluster's current objects, for strategies that assign unique values (a Service's
/// cluster IP and node ports).
pub trait Cluster {
    /// The stored objects of a resource, in every namespace.
    fn objects(&self, group: &str, plural: &str) -> Vec<Value>;
}

/// A kind's write rules. Every method has upstream's generic default.
pub trait Strategy: Send + Sync {
    /// Whether a create keeps the `status` it was given. Upstream clears it for kinds with a
    /// status subresource, except nodes (kubelets register with their status).
    fn keeps_status_on_create(&self) -> bool {
        false
    }

    /// `PrepareForCreate` beyond the generic part: the status a new object starts with (runs
    /// after `status` was cleared).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Upstream's `SetDefaults_*` for the kind.
    fn defaults(&self, _obj: &mut Value) {}

    /// `Validate` on create.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// `ValidateUpdate`: by default the create rules on the new object.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// When a main-resource write bumps `metadata.generation`.
    fn generation(&self) -> Generation {
        Generation::Untracked
    }

    /// `PrepareForUpdate` of the main resource beyond keeping `status` and the generation (for
    /// example, a DaemonSet's template generation).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// The propagation of a delete that names none and finds no `orphan` or
    /// `foregroundDeletion` finalizer (upstream's `DefaultGarbageCollectionPolicy`).
    fn default_propagation(&self) -> &'static str {
        "Background"
    }

    /// Whether objects read from storage get defaults ([`Strategy::default_on_read`]): custom
    /// resources whose schema declares some, since a default added to a CRD applies to objects
    /// stored before it, as upstream's decoder applies them.
    fn defaults_on_read(&self) -> bool {
        false
    }

    /// Fills defaults into an object read from storage.
    fn default_on_read(&self, _obj: &mut Value) {}

    /// What a `status` write takes from the stored object.
    fn status_resets(&self) -> &'static [Reset] {
        &[Reset::Spec]
    }

    /// The status strategy's `PrepareForUpdate` beyond [`Strategy::status_resets`] (a pod's QoS
    /// class backfilled, a volume's phase transition time).
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// The status strategy's `ValidateUpdate`.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Warnings a create or update returns (kubectl prints them as `Warning: ...`).
    fn warnings(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Values the server assigns on create once the object is valid (a Service's cluster IP and
    /// node ports); errors are field errors (a 422), like upstream's allocators'.
    fn allocate(&self, _obj: &mut Value, _cluster: &dyn Cluster) -> Result<(), Vec<FieldError>> {
        Ok(())
    }

    /// Values the server assigns on update (a Service turned into a NodePort Service).
    fn allocate_update(
        &self,
        _new: &mut Value,
        _old: &Value,
        _cluster: &dyn Cluster,
    ) -> Result<(), Vec<FieldError>> {
        Ok(())
    }

    /// Whether deletion is graceful (pods): it sets `deletionTimestamp` first.
    fn graceful_delete(&self) -> bool {
        false
    }
}

/// Upstream's generic behaviour: no defaults, no rules beyond metadata, status writes reset
/// `spec`.
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}

/// A strategy made of plain functions, for kinds whose rules are a defaulting function and
/// validation functions from the `api` crate.
#[derive(Clone, Copy)]
pub struct Rules {
    /// Defaulting.
    pub defaults: fn(&mut Value),
    /// Validation on create.
    pub validate: fn(&Value) -> Vec<FieldError>,
    /// What may not change on update (added to `validate` on the new object).
    pub immutable: fn(&Value, &Value) -> Vec<FieldError>,
    /// When the generation moves.
    pub generation: Generation,
    /// Warnings about an accepted object.
    pub warnings: fn(&Value) -> Vec<String>,
}

fn no_defaults(_: &mut Value) {}

fn no_errors(_: &Value) -> Vec<FieldError> {
    Vec::new()
}

fn nothing_immutable(_: &Value, _: &Value) -> Vec<FieldError> {
    Vec::new()
}

fn no_warnings(_: &Value) -> Vec<String> {
    Vec::new()
}

impl Rules {
    /// No defaults, no rules.
    pub const fn new() -> Self {
        Self {
            defaults: no_defaults,
            validate: no_errors,
            immutable: nothing_immutable,
            generation: Generation::Untracked,
            warnings: no_warnings,
        }
    }

    /// With a defaulting function.
    pub const fn defaults(mut self, f: fn(&mut Value)) -> Self {
        self.defaults = f;
        self
    }

    /// With a validation function.
    pub const fn validate(mut self, f: fn(&Value) -> Vec<FieldError>) -> Self {
        self.validate = f;
        self
    }

    /// With update rules.
    pub const fn immutable(mut self, f: fn(&Value, &Value) -> Vec<FieldError>) -> Self {
        self.immutable = f;
        self
    }

    /// With a generation policy.
    pub const fn generation(mut self, g: Generation) -> Self {
        self.generation = g;
        self
    }

    /// With warnings.
    pub const fn warnings(mut self, f: fn(&Value) -> Vec<String>) -> Self {
        self.warnings = f;
        self
    }
}

impl Default for Rules {
    fn default() -> Self {
        Self::new()
    }
}

impl Strategy for Rules {
    fn defaults(&self, obj: &mut Value) {
        (self.defaults)(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        (self.validate)(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = (self.validate)(new);
        errs.extend((self.immutable)(new, old));
        errs
    }

    fn generation(&self) -> Generation {
        self.generation
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        (self.warnings)(obj)
    }
}
