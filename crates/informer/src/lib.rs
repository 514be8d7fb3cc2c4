//! One shared, indexed informer cache per process, which every controller and the scheduler
//! read.
//!
//! Before it, each controller kept its own watch of every kind it read (about seven pod watches
//! in `rollwright up`), and each decoded every pod event. Here:
//! - [`Informers`] starts one watch per kind for the whole process; each event is decoded once
//!   and the object shared as [`Shared<K>`] (an `Arc`), with what controllers decide on derived
//!   once per event ([`Object::Facts`]; for pods [`PodFacts`]: node, readiness, revision);
//! - [`Store`] indexes a kind by namespace, by controller uid, orphans by namespace, and by node;
//! - [`Informer::subscribe`] registers an event handler that maps a [`Change`] to the keys of the
//!   controller that cares; handlers run after the store holds the change.

#![warn(missing_docs)]

pub mod informer;
pub mod informers;
pub mod object;
pub mod store;

pub use informer::{Change, Informer, MetaChange, MetaHandler, Subscription};
pub use informers::Informers;
pub use object::{Cached, Key, Object, PodFacts, Shared, key, key_of, split_key};
pub use store::Store;
