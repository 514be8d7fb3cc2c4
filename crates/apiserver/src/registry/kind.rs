//! [`Kind`]: one served resource, described once (names, scope, subresources, behaviour, columns,
//! schema and where it is stored).

use std::{any::TypeId, sync::Arc};

use k8s_openapi::{NamespaceResourceScope, Resource};
use schemars::{JsonSchema, generate::SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    conversion::Conversion,
    strategy::{DefaultStrategy, Strategy},
};
use crate::table::Printer;

/// A subresource a kind offers besides its main endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subresource {
    /// `/status`: writes only what the kind's status strategy lets through; the main resource
    /// ignores `status`.
    Status,
    /// `/scale`: an `autoscaling/v1` `Scale` over `spec.replicas`.
    Scale,
    /// `pods/binding`: assigns a pod to a node (create only).
    Binding,
    /// `pods/eviction`: a policy/v1 `Eviction` that deletes the pod (create only).
    Eviction,
    /// `certificatesigningrequests/approval`: a write of the approval conditions (served like
    /// `status`: the spec stays).
    Approval,
    /// `namespaces/finalize`: the one way to change a namespace's `spec.finalizers` (update only).
    Finalize,
    /// `serviceaccounts/token`: an `authentication.k8s.io/v1` TokenRequest that returns a token
    /// for the ServiceAccount (create only).
    Token,
    /// `pods/log`: the container's output as plain text (get only).
    Log,
    /// `pods/exec`: runs a command in a container (create and get, upgraded to a stream).
    Exec,
    /// `pods/ephemeralcontainers`: the Pod, of which a write may only add ephemeral containers
    /// (what `kubectl debug` patches).
    EphemeralContainers,
}

impl Subresource {
    /// The path segment, e.g. `status`.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Approval => "approval",
            Subresource::Finalize => "finalize",
            Subresource::Token => "token",
            Subresource::Log => "log",
            Subresource::Exec => "exec",
            Subresource::EphemeralContainers => "ephemeralcontainers",
        }
    }
}

/// Where a kind's OpenAPI schema comes from.
#[derive(Clone)]
pub enum Schema {
    /// A `k8s-openapi` type's schemars impl; registering it returns the component name
    /// (`io.k8s.api.apps.v1.Deployment`).
    Builtin(fn(&mut SchemaGenerator) -> String),
    /// A schema given at run time (a CustomResourceDefinition version's `openAPIV3Schema`), under
    /// the component name upstream gives it (`com.example.v1.Widget`).
    Custom {
        /// The component name.
        name: String,
        /// The schema.
        schema: Value,
    },
}

/// Where a kind's objects live.
#[derive(Clone)]
pub enum Storage {
    /// Under its own group and plural.
    Own,
    /// Another kind's objects seen through a conversion: events.k8s.io/v1 Events are core/v1
    /// Events, autoscaling/v1 HorizontalPodAutoscalers are the autoscaling/v2 ones.
    View {
        /// The group of the kind that stores the objects.
        group: String,
        /// Its plural.
        plural: String,
        /// Between the stored form and this kind's.
        conversion: Arc<dyn Conversion>,
    },
    /// Nowhere: the kind is only created, the server answers the create and keeps nothing (the
    /// review kinds: TokenReview, SubjectAccessReview...).
    Nowhere,
}

/// Checks a body decodes as a Go type would; the error is the decoder's.
pub type TypeCheck = fn(&Value) -> Result<(), String>;

/// One served resource: everything the server knows about it.
#[derive(Clone)]
pub struct Kind {
    /// API group; empty for core.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Plural resource name used in URLs, e.g. `deployments`.
    pub plural: String,
    /// Singular name, e.g. `deployment`.
    pub singular: String,
    /// Short names kubectl accepts, e.g. `deploy`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Subresources served.
    pub subresources: Vec<Subresource>,
    /// Whether `deletecollection` is served (upstream refuses it on namespaces).
    pub delete_collection: bool,
    /// Defaulting, validation and what each write may change.
    pub strategy: Arc<dyn Strategy>,
    /// Fields, besides `metadata.name` and `metadata.namespace`, that field selectors may use
    /// (upstream's `GetAttrs`).
    pub selectable_fields: Arc<[String]>,
    /// What a selectable field reads as when the object leaves it unset: upstream's `GetAttrs`
    /// formats the Go value, so an absent `spec.unschedulable` is `false`, not empty.
    pub field_defaults: Arc<[(String, String)]>,
    /// `kubectl get` columns.
    pub printer: Printer,
    /// The OpenAPI schema, if the kind has one.
    pub schema: Option<Schema>,
    /// Checks a body decodes as upstream's Go type would (shape, not rules).
    pub typecheck: Option<TypeCheck>,
    /// Where the objects are stored.
    pub storage: Storage,
    /// Read only, the objects made by the server on each read (componentstatuses); only with
    /// [`Storage::Nowhere`].
    pub computed: bool,
}

fn decode<T: DeserializeOwned>(v: &Value) -> Result<(), String> {
    T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

fn register<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

impl Kind {
    /// A kind with default behaviour, named as given.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced,
            subresources: Vec::new(),
            delete_collection: true,
            strategy: Arc::new(DefaultStrategy),
            selectable_fields: Arc::from([]),
            field_defaults: Arc::from([]),
            printer: Printer::Default,
            schema: None,
            typecheck: None,
            storage: Storage::Own,
            computed: false,
        }
    }

    /// The kind of a `k8s-openapi` type: its group, version, kind, plural and scope, its schema,
    /// and its shape check, with default behaviour.
    pub fn of<T>() -> Self
    where
        T: Resource + DeserializeOwned + JsonSchema + 'static,
    {
        let namespaced = TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>();
        let mut k = Self::new(
            T::GROUP,
            T::VERSION,
            T::KIND,
            T::URL_PATH_SEGMENT,
            namespaced,
        );
        k.schema = Some(Schema::Builtin(register::<T>));
        k.typecheck = Some(decode::<T>);
        k
    }

    /// Sets the short names.
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Sets the categories.
    pub fn categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Sets the subresources.
    pub fn subresources(mut self, subs: &[Subresource]) -> Self {
        self.subresources = subs.to_vec();
        self
    }

    /// Sets the strategy.
    pub fn strategy(mut self, s: impl Strategy + 'static) -> Self {
        self.strategy = Arc::new(s);
        self
    }

    /// Sets the selectable fields.
    pub fn selectable_fields(mut self, fields: &[&str]) -> Self {
        self.selectable_fields = fields.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Sets what unset selectable fields read as (`(field, value)` pairs).
    pub fn field_defaults(mut self, defaults: &[(&str, &str)]) -> Self {
        self.field_defaults = defaults
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        self
    }

    /// The value field selectors see for `field` of `obj`.
    pub fn selectable_value(&self, obj: &Value, field: &str) -> String {
        // Upstream's volumes and claims offer a `name` field that is the object's name.
        let path = if field == "name" {
            "metadata.name"
        } else {
            field
        };
        let v = crate::object::field_string(obj, path);
        if !v.is_empty() {
            return v;
        }
        self.field_defaults
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, d)| d.clone())
            .unwrap_or(v)
    }

    /// Sets the printer.
    pub fn printer(mut self, p: Printer) -> Self {
        self.printer = p;
        self
    }

    /// Serves this kind as a view of another kind's objects.
    pub fn view_of(
        mut self,
        group: &str,
        plural: &str,
        conversion: impl Conversion + 'static,
    ) -> Self {
        self.storage = Storage::View {
            group: group.into(),
            plural: plural.into(),
            conversion: Arc::new(conversion),
        };
        self
    }

    /// Serves this kind by create only, answered by the server and never stored.
    pub fn never_stored(mut self) -> Self {
        self.storage = Storage::Nowhere;
        self.delete_collection = false;
        self
    }

    /// Serves this kind by get and list only, the objects made by the server on each read and
    /// never stored (upstream's componentstatuses, whose REST storage probes the components).
    pub fn computed(mut self) -> Self {
        self = self.never_stored();
        self.computed = true;
        self
    }

    /// Whether objects of this kind are kept (false for the review kinds).
    pub fn is_stored(&self) -> bool {
        !matches!(self.storage, Storage::Nowhere)
    }

    /// `apps/v1`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `DeploymentList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `sub` is served.
    pub fn has(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// The resource as upstream names it in messages: `deployments.apps`, or `pods` for core.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The kind as upstream names it in messages: `Deployment.apps`, or `Pod` for core.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Whether this is `group`'s `kind` in the core group (a shorthand for the few places that
    /// treat one kind specially, such as namespaces).
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    /// The group and plural the objects are stored under.
    pub fn storage_resource(&self) -> (&str, &str) {
        match &self.storage {
            Storage::Own | Storage::Nowhere => (&self.group, &self.plural),
            Storage::View { group, plural, .. } => (group, plural),
        }
    }

    /// The conversion from the stored form, for a view.
    pub fn conversion(&self) -> Option<&Arc<dyn Conversion>> {
        match &self.storage {
            Storage::Own | Storage::Nowhere => None,
            Storage::View { conversion, .. } => Some(conversion),
        }
    }

    /// The store prefix of all objects of this resource: `/registry/{group}/{plural}/`.
    pub fn key_prefix(&self) -> String {
        let (group, plural) = self.storage_resource();
        let group = if group.is_empty() { "core" } else { group };
        format!("/registry/{group}/{plural}/")
    }

    /// The store key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/{name}", self.key_prefix()),
            _ => format!("{}{name}", self.key_prefix()),
        }
    }

    /// Whether the strategy deletes gracefully (pods): a deletion sets `deletionTimestamp` first.
    pub fn graceful_delete(&self) -> bool {
        self.strategy.graceful_delete()
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kind({}/{})", self.api_version(), self.kind)
    }
}
